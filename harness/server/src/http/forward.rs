//! Routing between replicas: a request for a live thing another live replica owns
//! (a sandbox and its routes, a running execution's controls, an approval, a computer
//! session) is sent on to that replica's address as a plain HTTP request — method, path,
//! headers and body as they came, the answer (an SSE stream included) streamed back as it
//! arrives. Every answer says which replica made it (`x-cordon-replica`).
//!
//! What it costs: nothing when running alone (no address); nothing for a thing held in
//! this process's memory; otherwise one indexed read of the store (the owner, joined to its
//! heartbeat). Reading an execution and its event stream is not forwarded: both are read
//! from the shared log (the stream woken by `LISTEN`/`NOTIFY` on PostgreSQL), so a stream
//! outlives the replica running the execution and ends with its `interrupted` result.
//!
//! A forwarded request (`x-cordon-forwarded-by`) is never forwarded again: a replica
//! that does not own what it names answers 503 with `Retry-After` (ownership moved, or
//! the owner is dying and its lease has not lapsed yet).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::app_state::AppState;
use super::replica::Replica;
use crate::error::ApiError;
use crate::store::{LiveOwner, Owned};

/// Names the replica that made an answer.
pub(crate) const REPLICA_HEADER: &str = "x-cordon-replica";
/// Names the replica that forwarded a request.
pub(crate) const FORWARDED_BY_HEADER: &str = "x-cordon-forwarded-by";
/// How long a client is told to wait before retrying a request this replica could not
/// route (seconds).
const RETRY_AFTER_SECONDS: &str = "1";

/// Stamps `x-cordon-replica` on every answer that lacks one (a forwarded answer keeps the
/// owner's).
pub(crate) async fn stamp_replica(
    State(replica): State<Arc<Replica>>,
    mut response: Response,
) -> Response {
    if !response.headers().contains_key(REPLICA_HEADER)
        && let Ok(value) = HeaderValue::from_str(&replica.id)
    {
        response.headers_mut().insert(REPLICA_HEADER, value);
    }
    response
}

/// The middleware: forwards a request to the owner of what it names, when that is another
/// live replica.
pub(crate) async fn forward(State(app): State<AppState>, request: Request, next: Next) -> Response {
    let Some(client) = &app.replica.client else {
        return next.run(request).await;
    };
    let Some((owned, id)) = target(request.method(), request.uri().path()) else {
        return next.run(request).await;
    };
    let held_here = match owned {
        Owned::Sandbox => app.sandboxes.expires_ms(id).is_some(),
        Owned::Execution => app.sandboxes.live_execution(id).is_some(),
        Owned::Computer => app.computers.holds(id),
        Owned::Approval => false,
        Owned::Env => app.envs.holds(id),
    };
    if held_here {
        return next.run(request).await;
    }
    let replica = &app.replica;
    let owner = match app
        .sandboxes
        .store
        .live_owner(owned, id, replica.alive_since_ms())
        .await
    {
        Ok(Some(owner)) if owner.replica != replica.id => owner,
        Ok(_) => return next.run(request).await,
        Err(error) => return ApiError::from(error).into_response(),
    };
    if request.headers().contains_key(FORWARDED_BY_HEADER) {
        return unavailable(
            "not_owner",
            format!(
                "replica {} does not hold {id} (replica {} does, by the store); retry",
                replica.id, owner.replica
            ),
        );
    }
    send(client, replica, &owner, request).await
}

/// What a request names whose owner must answer it, by its path; `None`: any replica
/// answers it (creating things, reading an execution or its events, the gateway, …).
fn target<'p>(method: &Method, path: &'p str) -> Option<(Owned, &'p str)> {
    let mut parts = path.strip_prefix("/v1/")?.split('/');
    let collection = parts.next()?;
    let id = parts.next().filter(|id| !id.is_empty())?;
    let rest = parts.next();
    match collection {
        "sandboxes" => Some((Owned::Sandbox, id)),
        "computers" => Some((Owned::Computer, id)),
        "approvals" => Some((Owned::Approval, id)),
        // The store answers an environment's record; its owner steps it.
        "envs" => match rest {
            _ if id == "tasks" => None,
            None if method == Method::GET => None,
            _ => Some((Owned::Env, id)),
        },
        // The log answers reads; the owner answers what changes a running execution.
        "executions" => match rest {
            None if method == Method::GET => None,
            Some("events") => None,
            _ => Some((Owned::Execution, id)),
        },
        _ => None,
    }
}

/// Sends `request` to `owner` and streams its answer back.
async fn send(
    client: &reqwest::Client,
    replica: &Replica,
    owner: &LiveOwner,
    request: Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map_or(parts.uri.path(), |path| path.as_str());
    let url = format!("{}{path}", owner.address);
    let mut outgoing = client
        .request(parts.method.clone(), &url)
        .headers(end_to_end(&parts.headers));
    if let Ok(value) = HeaderValue::from_str(&replica.id) {
        outgoing = outgoing.header(FORWARDED_BY_HEADER, value);
    }
    if has_body(&parts.method, &parts.headers) {
        outgoing = outgoing.body(reqwest::Body::wrap_stream(body.into_data_stream()));
    }
    let answer = match outgoing.send().await {
        Ok(answer) => answer,
        Err(error) => {
            return unavailable(
                "replica_unreachable",
                format!(
                    "replica {} (at {}) holds this but did not answer ({error}); retry, or \
                     wait for its lease to lapse",
                    owner.replica, owner.address
                ),
            );
        }
    };
    let mut response = Response::builder().status(answer.status());
    if let Some(headers) = response.headers_mut() {
        *headers = end_to_end(answer.headers());
    }
    response
        .body(Body::from_stream(answer.bytes_stream()))
        .unwrap_or_else(|error| {
            ApiError::new(StatusCode::BAD_GATEWAY, "bad_forward", error.to_string()).into_response()
        })
}

/// Whether a request carries a body to pass on.
fn has_body(method: &Method, headers: &HeaderMap) -> bool {
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .is_some_and(|length| length.as_bytes() != b"0")
        || !matches!(
            *method,
            Method::GET | Method::HEAD | Method::DELETE | Method::OPTIONS
        )
}

/// The headers that go on to the next hop: all but those of one connection (RFC 9110
/// §7.6.1) and `Host` (the client sets the owner's).
fn end_to_end(headers: &HeaderMap) -> HeaderMap {
    const HOP_BY_HOP: [&str; 8] = [
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "upgrade",
    ];
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    let mut kept = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        let hop = HOP_BY_HOP.contains(&name.as_str())
            || name == header::HOST
            || name == header::TRANSFER_ENCODING
            || named.contains(name);
        if !hop {
            kept.append(name.clone(), value.clone());
        }
    }
    kept
}

/// 503 with `Retry-After`.
fn unavailable(error_type: &'static str, message: String) -> Response {
    let mut response =
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, error_type, message).into_response();
    response.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from_static(RETRY_AFTER_SECONDS),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_what_their_owner_answers() {
        let post = Method::POST;
        let get = Method::GET;
        assert_eq!(target(&post, "/v1/sandboxes"), None);
        assert_eq!(target(&post, "/v1/sandboxes/"), None);
        assert_eq!(
            target(&post, "/v1/sandboxes/sbx_1/executions"),
            Some((Owned::Sandbox, "sbx_1"))
        );
        assert_eq!(
            target(&get, "/v1/sandboxes/sbx_1/files/a/b.txt"),
            Some((Owned::Sandbox, "sbx_1"))
        );
        assert_eq!(target(&get, "/v1/executions/exec_1"), None);
        assert_eq!(target(&get, "/v1/executions/exec_1/events"), None);
        assert_eq!(
            target(&Method::DELETE, "/v1/executions/exec_1"),
            Some((Owned::Execution, "exec_1"))
        );
        assert_eq!(
            target(&post, "/v1/executions/exec_1/cancel"),
            Some((Owned::Execution, "exec_1"))
        );
        assert_eq!(
            target(&post, "/v1/approvals/appr_1"),
            Some((Owned::Approval, "appr_1"))
        );
        assert_eq!(
            target(&get, "/v1/computers/cmp_1/screenshot/2"),
            Some((Owned::Computer, "cmp_1"))
        );
        assert_eq!(target(&get, "/v1/envs/tasks"), None);
        assert_eq!(target(&get, "/v1/envs/env_1"), None);
        assert_eq!(target(&post, "/v1/envs"), None);
        assert_eq!(
            target(&post, "/v1/envs/env_1/step"),
            Some((Owned::Env, "env_1"))
        );
        assert_eq!(
            target(&Method::DELETE, "/v1/envs/env_1"),
            Some((Owned::Env, "env_1"))
        );
        assert_eq!(target(&post, "/v1/messages"), None);
        assert_eq!(target(&get, "/v1/health"), None);
    }

    #[test]
    fn connection_headers_stay_behind() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, x-hop"),
        );
        headers.insert("x-hop", HeaderValue::from_static("1"));
        headers.insert(header::HOST, HeaderValue::from_static("a:1"));
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer t"));
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        let kept = end_to_end(&headers);
        let names: Vec<&str> = kept.keys().map(HeaderName::as_str).collect();
        assert_eq!(names, ["authorization", "accept"]);
    }
}
