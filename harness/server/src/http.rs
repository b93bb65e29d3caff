//! The HTTP + SSE API (`cordon serve`): routes, request parsing, authentication, event
//! streams, computer sessions and the OpenAPI document. The contract is
//! `docs/http-api.md`.

use cordon_core::ids::constant_time_eq;
use cordon_protocol::time::rfc3339;
use std::collections::{HashMap, HashSet, VecDeque};
use std::convert::Infallible;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Path, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use cordon_computer::browser::BrowserOptions;
use cordon_core::SubmitError;
use cordon_protocol::execution::{ExecutionEvent, parse_event_seq};
use cordon_protocol::tool::Locus;
use cordon_sandbox::Sandbox;
use futures::Stream;
use serde::de::DeserializeOwned;
use utoipa::OpenApi;

use crate::api::{
    ApprovalDecided, ComputerActions, ComputerApproval, ComputerCreated, ComputerInfo,
    ComputerState, ComputerStep, ComputerTrajectory, CreateComputer, CreateExecution,
    CreateSandbox, DecideApproval, ErrorBody, ExecutionCreated, ExecutionInfo, ExecutionState,
    LoggedEvent, PendingApproval, PendingToolCall, SandboxCreated, SandboxInfo, ScreenshotBody,
    ScreenshotRef, SizeBody, StepStatus, ToolResults, ToolResultsAccepted, TrajectoryStep,
};
use crate::computer::ComputerPool;
use crate::computers::ComputerHub;
use crate::connect::Connection;
use crate::error::ApiError;
use crate::guard::{HostGuard, guard_requests};
use crate::hub::{DEFAULT_TTL, Hub, MAX_TTL, spawn_periodic};
use crate::store::{EventRow, Store, StoreError};

pub mod envs;
mod files;
mod gateway;
mod inert;
mod session;
pub use crate::hub::budget::{DEFAULT_MAX_SANDBOXES, DEFAULT_MAX_WORKSPACE_BYTES_TOTAL};
pub use gateway::{GatewaySetup, parse_duration};

/// Largest request body accepted by default (tool results may carry up to the default
/// `max_payload_bytes` of 1 MiB each, several per request).
pub const DEFAULT_MAX_BODY_BYTES: usize = 8 << 20;
/// Events read from the store per query while streaming.
const EVENT_PAGE: usize = 256;
/// How long `DELETE /v1/executions/{id}` waits for a cancelled execution to stop.
const CANCEL_WAIT: Duration = Duration::from_secs(10);
/// How long finished histories are kept unless told otherwise.
pub const DEFAULT_RETAIN: Duration = Duration::from_secs(7 * 24 * 3600);
/// Computer sessions open at once unless told otherwise.
pub const DEFAULT_MAX_COMPUTERS: usize = 16;

/// Options of the HTTP API.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpOptions {
    /// When set, every request needs `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// Largest request body, in bytes; larger ones get `413 payload_too_large`.
    pub max_body_bytes: usize,
    /// Connected MCP servers whose tools every sandbox gets (`--connect`).
    pub connections: Vec<Connection>,
    /// How computer sessions start Chromium (launched on the first session).
    pub browser: BrowserOptions,
    /// Where each computer session's trajectory directory goes; default: a
    /// `cordon-trajectories` directory in the system's temp directory.
    pub trajectories: Option<PathBuf>,
    /// Computer sessions open at once.
    pub max_computers: usize,
    /// Sandboxes live at once (`--max-sandboxes`); a create beyond is `503
    /// too_many_sandboxes`.
    pub max_sandboxes: usize,
    /// Sum of the `workspace_bytes` of the live sandboxes (`--max-workspace-bytes-total`):
    /// workspaces live in this process's memory. A create beyond is `503
    /// workspace_budget_exhausted`.
    pub max_workspace_bytes_total: u64,
    /// Finished executions, ended sandboxes and closed computer sessions (with their
    /// trajectories) older than this are deleted; `None` keeps everything.
    pub retain: Option<Duration>,
    /// Host names served besides loopback and the bound address (`--allow-host`), as
    /// [`crate::guard::parse_allowed_host`] returns them; see [`crate::guard`].
    pub allowed_hosts: Vec<String>,
    /// Accept client-declared `command` and `http` tools (programs and requests run on this
    /// host) even without a token (`--allow-host-tools`). With a token they are always
    /// accepted.
    pub allow_host_tools: bool,
    /// The model behind `POST /v1/messages` (`--upstream`); `None`: no gateway.
    pub gateway: Option<GatewaySetup>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            token: None,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            connections: Vec::new(),
            browser: BrowserOptions::default(),
            trajectories: None,
            max_computers: DEFAULT_MAX_COMPUTERS,
            max_sandboxes: DEFAULT_MAX_SANDBOXES,
            max_workspace_bytes_total: DEFAULT_MAX_WORKSPACE_BYTES_TOTAL,
            retain: Some(DEFAULT_RETAIN),
            allowed_hosts: Vec::new(),
            allow_host_tools: false,
            gateway: None,
        }
    }
}

impl HttpOptions {
    crate::setters! {
        token: Option<String>,
        connections: Vec<Connection>,
        max_body_bytes: usize,
        browser: BrowserOptions,
        trajectories: Option<PathBuf>,
        max_computers: usize,
        max_sandboxes: usize,
        max_workspace_bytes_total: u64,
        retain: Option<Duration>,
        allowed_hosts: Vec<String>,
        allow_host_tools: bool,
        gateway: Option<GatewaySetup>,
    }
}

/// The HTTP API over a sandbox and a store.
pub struct HttpApi {
    hub: Arc<Hub>,
    computers: Arc<ComputerHub>,
    envs: envs::Envs,
    gateway: Option<Arc<gateway::Mount>>,
    options: HttpOptions,
    expired_on_start: usize,
}

/// Stops what the API runs besides its routes (computer sessions and their Chromium);
/// see [`HttpApi::shutdown_handle`].
#[derive(Clone)]
pub struct ShutdownHandle {
    computers: Arc<ComputerHub>,
}

impl std::fmt::Debug for ShutdownHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShutdownHandle").finish_non_exhaustive()
    }
}

impl ShutdownHandle {
    /// Ends the live computer sessions (recorded `expired`, "the server shut down") and
    /// stops Chromium. Idempotent.
    pub async fn shutdown(&self) {
        self.computers.shutdown().await;
    }
}

impl std::fmt::Debug for HttpApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpApi")
            .field("options", &self.options.max_body_bytes)
            .finish_non_exhaustive()
    }
}

type AppState = Arc<App>;

impl axum::extract::FromRef<AppState> for envs::Envs {
    fn from_ref(app: &AppState) -> Self {
        app.envs.clone()
    }
}

struct App {
    hub: Arc<Hub>,
    computers: Arc<ComputerHub>,
    /// Benchmark environments (`/v1/envs`).
    envs: envs::Envs,
    token: Option<String>,
    /// Client-declared `command`/`http` tools are accepted (a token is set, or
    /// `--allow-host-tools`).
    host_tools: bool,
    /// The model gateway (`--upstream`).
    gateway: Option<Arc<gateway::Mount>>,
}

impl HttpApi {
    /// Builds the API. Whatever was live in `store` when its last server stopped is
    /// marked `expired` first (see [`Store::recover`]), and a Chromium that server left
    /// running is stopped. Must be called within a tokio runtime (it starts the tasks that
    /// expire idle sandboxes and computer sessions, and the retention sweep).
    pub fn new(sandbox: Sandbox, store: Store, options: HttpOptions) -> Result<Self, StoreError> {
        let expired_on_start = store.recover(
            "the server stopped before this execution ended (its process exited or was killed); \
             run it again",
        )?;
        let store = Arc::new(store);
        let (gateway_sandbox, gateway_store) = (sandbox.clone(), store.clone());
        let capacity = crate::hub::budget::Capacity {
            workspaces: options.max_sandboxes,
            bytes: options.max_workspace_bytes_total,
        };
        let hub = Hub::new(
            sandbox,
            store.clone(),
            options.connections.clone(),
            capacity,
        );
        hub.spawn_reaper();
        let trajectories = options
            .trajectories
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join("cordon-trajectories"));
        let computers = ComputerHub::new(
            ComputerPool::new(options.browser.clone()),
            store,
            trajectories,
            options.max_computers,
        );
        computers.reap_orphans()?;
        computers.spawn_reaper();
        let gateway = options.gateway.clone().map(|setup| {
            Arc::new(gateway::Mount::new(
                setup,
                gateway_sandbox,
                gateway_store,
                computers.clone(),
                options.token.is_some(),
            ))
        });
        if let (Some(mount), Some(retain)) = (&gateway, options.retain) {
            gateway::spawn_retention(mount, retain);
        }
        if let Some(retain) = options.retain {
            spawn_retention(&computers, retain);
        }
        let envs = envs::Envs::new(Some(computers.pool().launcher()));
        Ok(HttpApi {
            hub,
            computers,
            envs,
            gateway,
            options,
            expired_on_start,
        })
    }

    /// A handle that stops the computer sessions and Chromium; [`Self::serve`] calls it
    /// when it returns, and a caller that gives up waiting for `serve` calls it itself.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle {
            computers: self.computers.clone(),
        }
    }

    /// Executions found running in the store at start, now `expired`.
    pub fn expired_on_start(&self) -> usize {
        self.expired_on_start
    }

    /// The routes, ready for [`axum::serve`] on a listener bound to `bound` (its IP and
    /// port are part of the `Host` names accepted; see [`crate::guard`]).
    pub fn router(&self, bound: std::net::SocketAddr) -> Router {
        let app = Arc::new(App {
            hub: self.hub.clone(),
            computers: self.computers.clone(),
            envs: self.envs.clone(),
            token: self.options.token.clone(),
            host_tools: self.options.token.is_some() || self.options.allow_host_tools,
            gateway: self.gateway.clone(),
        });
        let guard = Arc::new(HostGuard::new(bound, &self.options.allowed_hosts));
        Router::new()
            .route("/openapi.json", get(openapi))
            .route("/v1/health", get(health))
            .route("/v1/sandboxes", post(create_sandbox))
            .route(
                "/v1/sandboxes/{id}",
                get(get_sandbox).delete(delete_sandbox),
            )
            .route("/v1/sandboxes/{id}/executions", post(create_execution))
            .route(
                "/v1/executions/{id}",
                get(get_execution).delete(delete_execution),
            )
            .route("/v1/executions/{id}/events", get(execution_events))
            .route("/v1/executions/{id}/tool_results", post(post_tool_results))
            .route("/v1/executions/{id}/cancel", post(cancel_execution))
            .route("/v1/approvals/{id}", post(decide_approval))
            .route("/v1/computers", post(create_computer))
            .route(
                "/v1/computers/{id}",
                get(get_computer).delete(delete_computer),
            )
            .route("/v1/computers/{id}/actions", post(computer_actions))
            .route("/v1/computers/{id}/trajectory", get(computer_trajectory))
            .route(
                "/v1/computers/{id}/trajectory/{step}/screenshot",
                get(computer_screenshot),
            )
            .merge(gateway::routes())
            .merge(session::routes())
            .merge(files::routes())
            .merge(envs::routes())
            .fallback(route_not_found)
            .method_not_allowed_fallback(method_not_allowed)
            .layer(middleware::from_fn_with_state(app.clone(), authenticate))
            .layer(DefaultBodyLimit::max(self.options.max_body_bytes))
            // Outermost: a request naming another host or coming from another site's page
            // is refused before authentication and before its body is read.
            .layer(middleware::from_fn_with_state(guard, guard_requests))
            // Around everything, refusals included: no response is read as another type.
            .layer(middleware::map_response(inert::nosniff))
            .with_state(app)
    }

    /// Serves on `listener` until `shutdown` resolves.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        use axum::serve::ListenerExt;
        let router = self.router(listener.local_addr()?);
        // Without TCP_NODELAY, the small writes of an SSE stream wait for the peer's
        // delayed ACK (Nagle): 40 ms per event on Linux.
        let listener = listener.tap_io(|stream| {
            let _ = stream.set_nodelay(true);
        });
        let handle = self.shutdown_handle();
        let served = axum::serve(listener, router)
            .with_graceful_shutdown(shutdown)
            .await;
        handle.shutdown().await;
        served
    }
}

/// Deletes histories older than `retain` now and then (at start, then every
/// `retain / 4`, at least every second and at most every hour).
fn spawn_retention(computers: &Arc<ComputerHub>, retain: Duration) {
    let every = (retain / 4).clamp(Duration::from_secs(1), Duration::from_secs(3600));
    let retain_ms = u64::try_from(retain.as_millis()).unwrap_or(u64::MAX);
    spawn_periodic(computers, every, move |hub| async move {
        let cutoff = cordon_core::clock::now_ms().saturating_sub(retain_ms);
        if let Err(error) = hub.purge(cutoff) {
            eprintln!("cordon serve: deleting old histories failed: {error}");
        }
    });
}

/// The OpenAPI document of this API.
#[derive(Debug, OpenApi)]
#[openapi(
    info(
        title = "Cordon HTTP API",
        description = "Run model-written Python and JavaScript in WebAssembly sandboxes; stream \
                       events over SSE; answer client tool calls and approvals; drive isolated \
                       browser sessions with any vendor's computer-use actions."
    ),
    paths(
        openapi, health, create_sandbox, get_sandbox, delete_sandbox, create_execution, get_execution,
        delete_execution, execution_events, post_tool_results, cancel_execution, decide_approval,
        create_computer, get_computer, delete_computer, computer_actions, computer_trajectory,
        computer_screenshot, files::put_file, files::get_file, files::list_files,
        files::delete_file, gateway::messages, gateway::chat_completions, gateway::responses,
        gateway::list_conversations, gateway::conversation, session::create,
        session::continue_session, session::history, session::remove, envs::create_env,
        envs::list_tasks, envs::get_env, envs::reset_env, envs::step_env, envs::evaluate_env,
        envs::finish_env, envs::delete_env
    ),
    components(schemas(
        ErrorBody, ExecutionEvent, LoggedEvent, ComputerStep, ComputerApproval, ScreenshotBody,
        ScreenshotRef, SizeBody, StepStatus, ComputerState, TrajectoryStep
    )),
    modifiers(&BearerAuth)
)]
pub struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// This document.
#[utoipa::path(
    get, path = "/openapi.json",
    responses((status = 200, description = "The OpenAPI 3.1 document of every route", body = Object))
)]
async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}

/// Whether the server is up, and its version.
#[utoipa::path(
    get, path = "/v1/health",
    responses((status = 200, description = "`{status: \"ok\", version}`", body = Object)),
    security(("bearer" = []))
)]
async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({"status": "ok", "version": env!("CARGO_PKG_VERSION")}))
}

async fn authenticate(State(app): State<AppState>, request: Request, next: Next) -> Response {
    let Some(token) = &app.token else {
        return next.run(request).await;
    };
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        // The anthropic SDK sends its `api_key` as `x-api-key` (the gateway's clients).
        .or_else(|| {
            request
                .headers()
                .get("x-api-key")
                .and_then(|value| value.to_str().ok())
        });
    match presented {
        Some(presented) if constant_time_eq(presented.as_bytes(), token.as_bytes()) => {
            next.run(request).await
        }
        Some(_) => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "the bearer token is wrong",
        )
        .into_response(),
        None => {
            let mut response = ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "this server needs `Authorization: Bearer <token>` (the --token it was started with)",
            )
            .into_response();
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            response
        }
    }
}

async fn route_not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "route_not_found",
        format!("no route for {method} {}; see /openapi.json", uri.path()),
    )
}

async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{method} is not allowed on {}", uri.path()),
    )
}

/// A JSON body, with every way it can be wrong answered as an [`ApiError`]: wrong content
/// type (415), too large (413), not JSON (400), wrong shape (422, with the path).
struct ApiJson<T>(T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let content_type = request
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let mime = content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if mime != "application/json"
            && !(mime.starts_with("application/") && mime.ends_with("+json"))
        {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                if content_type.is_empty() {
                    "the body must be JSON with `Content-Type: application/json`".to_owned()
                } else {
                    format!(
                        "the body must be JSON (`Content-Type: application/json`), not {content_type:?}"
                    )
                },
            ));
        }
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(body_rejection)?;
        let mut deserializer = serde_json::Deserializer::from_slice(&bytes);
        let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
            let path = error.path().to_string();
            json_error(error.into_inner(), &path)
        })?;
        // Trailing bytes after the value make the body invalid JSON as a whole.
        deserializer.end().map_err(|error| json_error(error, "."))?;
        Ok(ApiJson(value))
    }
}

fn json_error(error: serde_json::Error, path: &str) -> ApiError {
    if error.is_data() {
        let at = if path == "." {
            String::new()
        } else {
            format!("at {path}: ")
        };
        ApiError::invalid_request("invalid_request", format!("{at}{error}"))
    } else {
        ApiError::bad_request(
            "invalid_json",
            format!("the body is not valid JSON: {error}"),
        )
    }
}

fn body_rejection(rejection: BytesRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            "the request body is larger than this server accepts (--max-body-bytes)",
        )
    } else {
        ApiError::bad_request("invalid_body", rejection.body_text())
    }
}

/// Creates a sandbox.
#[utoipa::path(
    post, path = "/v1/sandboxes", request_body = CreateSandbox,
    responses(
        (status = 201, description = "Created", body = SandboxCreated),
        (status = 400, description = "Not JSON", body = ErrorBody),
        (status = 415, description = "Not `application/json`", body = ErrorBody),
        (status = 422, description = "Bad fields or tool declarations", body = ErrorBody),
        (status = 503, description = "The server's cap on live sandboxes (`too_many_sandboxes`) or on their total `workspace_bytes` (`workspace_budget_exhausted`) is reached", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn create_sandbox(
    State(app): State<AppState>,
    ApiJson(body): ApiJson<CreateSandbox>,
) -> Result<Response, ApiError> {
    let ttl = match body.ttl_seconds {
        None => DEFAULT_TTL,
        Some(0) => {
            return Err(ApiError::invalid_request(
                "invalid_request",
                "ttl_seconds must be at least 1",
            ));
        }
        Some(seconds) if Duration::from_secs(seconds) > MAX_TTL => {
            return Err(ApiError::invalid_request(
                "invalid_request",
                format!("ttl_seconds must be at most {}", MAX_TTL.as_secs()),
            ));
        }
        Some(seconds) => Duration::from_secs(seconds),
    };
    if !app.host_tools {
        refuse_host_tools(&body.tools)?;
    }
    let (id, expires_ms) =
        app.hub
            .create_sandbox(body.language, body.tools, body.limits, body.stateful, ttl)?;
    let location = format!("/v1/sandboxes/{id}");
    let body = SandboxCreated {
        id,
        expires_at: rfc3339(expires_ms),
    };
    Ok(created(location, body))
}

/// Without a token, anyone who reaches the port could declare a `command` tool and run
/// programs as this server's user: such declarations need `--allow-host-tools`.
fn refuse_host_tools(tools: &[cordon_protocol::tool::ToolDeclaration]) -> Result<(), ApiError> {
    use cordon_protocol::tool::HandlerSpec;
    let Some((index, tool, kind)) =
        tools
            .iter()
            .enumerate()
            .find_map(|(index, tool)| match tool.handler {
                HandlerSpec::Command { .. } => Some((index, tool, "command")),
                HandlerSpec::Http { .. } => Some((index, tool, "http")),
                _ => None,
            })
    else {
        return Ok(());
    };
    Err(ApiError::invalid_request(
        "host_tools_refused",
        format!(
            "tools[{index}] `{}` has a `{kind}` handler, which runs on this server's host; \
             a server started without --token accepts such tools only when started with \
             --allow-host-tools (or start it with --token, so only holders of the token can \
             declare them). Tools whose handler is `client`, `static` or `mcp` need neither",
            tool.name
        ),
    ))
}

fn created(location: String, body: impl serde::Serialize) -> Response {
    let mut response = (StatusCode::CREATED, Json(body)).into_response();
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

/// Describes a sandbox.
#[utoipa::path(
    get, path = "/v1/sandboxes/{id}",
    params(("id" = String, Path, description = "Sandbox id")),
    responses(
        (status = 200, description = "The sandbox", body = SandboxInfo),
        (status = 404, description = "Unknown or deleted", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn get_sandbox(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<SandboxInfo>, ApiError> {
    let row = match app.hub.store.sandbox(&id)? {
        Some(row) if row.state != "deleted" => row,
        _ => return Err(ApiError::not_found("sandbox", &id)),
    };
    let expires_ms = app.hub.expires_ms(&id).unwrap_or(row.expires_ms);
    Ok(Json(SandboxInfo {
        id: row.id,
        language: row.language,
        stateful: row.stateful,
        limits: row.limits,
        tools: row.tools.into_iter().map(|tool| tool.name).collect(),
        expires_at: rfc3339(expires_ms),
        state: row.state,
        reason: row.reason,
    }))
}

/// Deletes a sandbox: cancels its running executions and frees its instance.
#[utoipa::path(
    delete, path = "/v1/sandboxes/{id}",
    params(("id" = String, Path, description = "Sandbox id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "Unknown or already deleted", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn delete_sandbox(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    app.hub.delete_sandbox(&id)?;
    Ok(StatusCode::NO_CONTENT)
}

fn wants_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| value.to_ascii_lowercase().contains("text/event-stream"))
}

/// Starts an execution. With `Accept: text/event-stream` the response is its event stream.
#[utoipa::path(
    post, path = "/v1/sandboxes/{id}/executions", request_body = CreateExecution,
    params(("id" = String, Path, description = "Sandbox id")),
    responses(
        (status = 201, description = "Started", body = ExecutionCreated),
        (status = 200, description = "Started; the body is the SSE event stream (with `Accept: text/event-stream`)", content_type = "text/event-stream"),
        (status = 404, description = "Unknown sandbox", body = ErrorBody),
        (status = 410, description = "The sandbox expired", body = ErrorBody),
        (status = 422, description = "Bad fields", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn create_execution(
    State(app): State<AppState>,
    Path(sandbox_id): Path<String>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<CreateExecution>,
) -> Result<Response, ApiError> {
    let id = app.hub.start_execution(&sandbox_id, body.code)?;
    let location = format!("/v1/executions/{id}");
    if wants_event_stream(&headers) {
        let mut response = sse(app.hub.clone(), id.clone(), 0).into_response();
        if let Ok(value) = HeaderValue::from_str(&location) {
            response.headers_mut().insert(header::LOCATION, value);
        }
        if let Ok(value) = HeaderValue::from_str(&id) {
            response.headers_mut().insert("cordon-execution-id", value);
        }
        return Ok(response);
    }
    Ok(created(location, ExecutionCreated { id }))
}

/// `?after=N` (default 0): list only what comes after event seq or step `N`. Anything
/// else is a `400 invalid_query`.
struct After(u64);

impl<S: Send + Sync> FromRequestParts<S> for After {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Query(query) = Query::<HashMap<String, String>>::from_request_parts(parts, state)
            .await
            .map_err(|rejection| ApiError::bad_request("invalid_query", rejection.body_text()))?;
        match query.get("after") {
            None => Ok(After(0)),
            Some(text) => parse_event_seq(text.as_bytes())
                .map(After)
                .map_err(|error| {
                    ApiError::bad_request("invalid_query", format!("`after`: {error}"))
                }),
        }
    }
}

/// The event stream of an execution, from the start or after `Last-Event-ID` / `?after=`.
#[utoipa::path(
    get, path = "/v1/executions/{id}/events",
    params(
        ("id" = String, Path, description = "Execution id"),
        ("after" = Option<u64>, Query, description = "Send events with a larger seq only"),
        ("Last-Event-ID" = Option<u64>, Header, description = "Resume after this seq (wins over `after`)"),
    ),
    responses(
        (status = 200, description = "SSE: `event: <type>`, `id: <seq>`, `data: <event JSON>`; ends after `execution.completed`", content_type = "text/event-stream"),
        (status = 404, description = "Unknown execution", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn execution_events(
    State(app): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    After(mut after): After,
) -> Result<Response, ApiError> {
    if let Some(value) = headers.get("last-event-id") {
        after = parse_event_seq(value.as_bytes()).map_err(|error| {
            ApiError::bad_request("invalid_last_event_id", format!("Last-Event-ID: {error}"))
        })?;
    }
    if app.hub.store.execution(&id)?.is_none() {
        return Err(ApiError::not_found("execution", &id));
    }
    Ok(sse(app.hub.clone(), id, after).into_response())
}

fn sse(
    hub: Arc<Hub>,
    id: String,
    after: u64,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let cursor = Cursor {
        hub,
        id,
        after,
        buffered: VecDeque::new(),
        finished: false,
    };
    let stream = futures::stream::unfold(cursor, |mut cursor| async move {
        let row = cursor.next().await?;
        let event = Event::default()
            .event(row.event_type)
            .id(row.seq.to_string())
            .data(row.data);
        Some((Ok(event), cursor))
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// Reads an execution's log from the store, waiting for new events while it runs.
struct Cursor {
    hub: Arc<Hub>,
    id: String,
    after: u64,
    buffered: VecDeque<EventRow>,
    finished: bool,
}

impl Cursor {
    async fn next(&mut self) -> Option<EventRow> {
        loop {
            if let Some(row) = self.buffered.pop_front() {
                self.after = row.seq;
                self.finished = row.event_type == "execution.completed";
                return Some(row);
            }
            if self.finished {
                return None;
            }
            // Subscribe before reading: an event stored after the read changes the
            // receiver, so it cannot slip between the read and the wait.
            let receiver = self.hub.subscribe(&self.id);
            let rows = self.read()?;
            if !rows.is_empty() {
                self.buffered.extend(rows);
                continue;
            }
            match receiver {
                Some(mut receiver) => {
                    if receiver.changed().await.is_err() {
                        // The execution ended; everything it logged is stored.
                        let rows = self.read()?;
                        if rows.is_empty() {
                            return None;
                        }
                        self.buffered.extend(rows);
                    }
                }
                None => {
                    // Not running: its log is complete (recovery appends the end of
                    // executions that were cut off), unless its row is newer than its
                    // live entry (a few microseconds at creation).
                    let running = matches!(
                        self.hub.store.execution(&self.id),
                        Ok(Some(row)) if row.status == crate::store::RUNNING
                    );
                    if !running {
                        let rows = self.read()?;
                        if rows.is_empty() {
                            return None;
                        }
                        self.buffered.extend(rows);
                    } else {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        }
    }

    fn read(&self) -> Option<Vec<EventRow>> {
        match self
            .hub
            .store
            .events_after(&self.id, self.after, EVENT_PAGE)
        {
            Ok(rows) => Some(rows),
            Err(error) => {
                eprintln!("cordon serve: reading events of {}: {error}", self.id);
                None
            }
        }
    }
}

/// An execution: status, what it waits for, its events and its result.
#[utoipa::path(
    get, path = "/v1/executions/{id}",
    params(
        ("id" = String, Path, description = "Execution id"),
        ("after" = Option<u64>, Query, description = "List events with a larger seq only"),
    ),
    responses(
        (status = 200, description = "The execution", body = ExecutionInfo),
        (status = 404, description = "Unknown execution", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn get_execution(
    State(app): State<AppState>,
    Path(id): Path<String>,
    After(after): After,
) -> Result<Json<ExecutionInfo>, ApiError> {
    let store = &app.hub.store;
    let Some(row) = store.execution(&id)? else {
        return Err(ApiError::not_found("execution", &id));
    };
    let status = ExecutionState::parse(&row.status);
    let rows = store.events_after(&id, 0, usize::MAX)?;
    let mut events = Vec::with_capacity(rows.len());
    let mut calls: Vec<PendingToolCall> = Vec::new();
    let mut answered: HashSet<String> = HashSet::new();
    for row in rows {
        let event: ExecutionEvent = serde_json::from_str(&row.data).map_err(StoreError::from)?;
        match &event {
            ExecutionEvent::ToolCall {
                id,
                name,
                input,
                locus: Locus::Client,
                ..
            } => calls.push(PendingToolCall {
                id: id.clone(),
                name: name.clone(),
                input: input.clone(),
                locus: Locus::Client,
            }),
            ExecutionEvent::ToolResult { id, .. } => {
                answered.insert(id.clone());
            }
            _ => {}
        }
        if row.seq > after {
            events.push(LoggedEvent {
                seq: row.seq,
                event,
            });
        }
    }
    let running = status == ExecutionState::Running;
    let pending_tool_calls = if running {
        // The log says which calls were announced and not yet finished; the live broker
        // says which of those still accept a result (a result posted a moment ago is
        // delivered before its `tool.result` is logged).
        let waiting: HashSet<String> = app
            .hub
            .live_execution(&id)
            .map(|live| live.control.pending_tool_calls().into_iter().collect())
            .unwrap_or_default();
        calls
            .into_iter()
            .filter(|call| !answered.contains(&call.id) && waiting.contains(&call.id))
            .collect()
    } else {
        Vec::new()
    };
    let pending_approvals = if running {
        store
            .pending_approvals(&id)?
            .into_iter()
            .map(|approval| PendingApproval {
                approval_id: approval.id,
                call_id: approval.call_id,
                tool: approval.tool,
                input: approval.input,
                reason: approval.reason,
            })
            .collect()
    } else {
        Vec::new()
    };
    Ok(Json(ExecutionInfo {
        id: row.id,
        sandbox_id: row.sandbox_id,
        language: row.language,
        status,
        pending_tool_calls,
        pending_approvals,
        events,
        result: row.result,
    }))
}

/// Results for pending client tool calls; the execution resumes when its batch is complete.
#[utoipa::path(
    post, path = "/v1/executions/{id}/tool_results", request_body = ToolResults,
    params(("id" = String, Path, description = "Execution id")),
    responses(
        (status = 200, description = "Delivered", body = ToolResultsAccepted),
        (status = 404, description = "Unknown execution, or a call id that was never pending (`unknown_call`)", body = ErrorBody),
        (status = 409, description = "The execution ended, or a call was already answered or expired", body = ErrorBody),
        (status = 422, description = "Empty, or an id repeated within the request (`duplicate_call`)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn post_tool_results(
    State(app): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<ToolResults>,
) -> Result<Json<ToolResultsAccepted>, ApiError> {
    if body.results.is_empty() {
        return Err(ApiError::invalid_request(
            "invalid_request",
            "`results` is empty; send at least one {\"call_id\", \"output\", \"is_error\"}",
        ));
    }
    let Some(execution) = app.hub.live_execution(&id) else {
        return Err(not_running(&app, &id)?);
    };
    let accepted: Vec<String> = body.results.iter().map(|r| r.call_id.clone()).collect();
    execution
        .control
        .submit_tool_results(body.results)
        .map_err(|error| {
            let message = format!("{error}; nothing in this request was delivered");
            match error {
                SubmitError::UnknownCall { .. } => {
                    ApiError::new(StatusCode::NOT_FOUND, "unknown_call", message)
                }
                SubmitError::Duplicate { .. } => {
                    ApiError::invalid_request("duplicate_call", message)
                }
                SubmitError::AlreadyAnswered { .. } => {
                    ApiError::conflict("already_answered", message)
                }
                SubmitError::Expired { .. } => ApiError::conflict("call_expired", message),
                _ => ApiError::conflict("tool_results_rejected", message),
            }
        })?;
    Ok(Json(ToolResultsAccepted {
        accepted,
        pending: execution.control.pending_tool_calls(),
    }))
}

/// The error for an execution that is not running: 409 if it ended, 404 if unknown.
fn not_running(app: &App, id: &str) -> Result<ApiError, ApiError> {
    Ok(match app.hub.store.execution(id)? {
        Some(row) => ApiError::conflict(
            "execution_finished",
            format!(
                "execution {id} has ended ({}); it takes no more input",
                row.status
            ),
        ),
        None => ApiError::not_found("execution", id),
    })
}

/// Cancels a running execution; its history stays.
#[utoipa::path(
    post, path = "/v1/executions/{id}/cancel",
    params(("id" = String, Path, description = "Execution id")),
    responses(
        (status = 202, description = "Cancelling; it ends `cancelled`", body = ExecutionCreated),
        (status = 404, description = "Unknown execution", body = ErrorBody),
        (status = 409, description = "It has already ended", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn cancel_execution(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<ExecutionCreated>), ApiError> {
    let Some(execution) = app.hub.live_execution(&id) else {
        return Err(not_running(&app, &id)?);
    };
    execution.control.cancel();
    Ok((StatusCode::ACCEPTED, Json(ExecutionCreated { id })))
}

/// Deletes an execution: cancels it if it runs, then removes its history.
#[utoipa::path(
    delete, path = "/v1/executions/{id}",
    params(("id" = String, Path, description = "Execution id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "Unknown execution", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn delete_execution(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    if let Some(execution) = app.hub.live_execution(&id) {
        let receiver = app.hub.subscribe(&id);
        execution.control.cancel();
        drop(execution);
        if let Some(mut receiver) = receiver {
            // The sender goes away once the last event is stored.
            let _ = tokio::time::timeout(CANCEL_WAIT, async {
                while receiver.changed().await.is_ok() {}
            })
            .await;
        }
    }
    if app.hub.store.delete_execution(&id)? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("execution", &id))
    }
}

/// Approves or denies a tool call waiting on an `ask` policy, or a computer step waiting
/// on an `ask` rule (then the answer carries the step it produced).
#[utoipa::path(
    post, path = "/v1/approvals/{id}", request_body = DecideApproval,
    params(("id" = String, Path, description = "Approval id (from `approval.required`, or a computer step's `pending_approval`)")),
    responses(
        (status = 200, description = "Decided; the call runs or fails with `denied`; a computer step runs (its result is `step`) or is `denied`", body = ApprovalDecided),
        (status = 404, description = "Unknown approval", body = ErrorBody),
        (status = 409, description = "Already decided, or its execution or computer session ended", body = ErrorBody),
        (status = 410, description = "The computer session is gone", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn decide_approval(
    State(app): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<DecideApproval>,
) -> Result<Json<ApprovalDecided>, ApiError> {
    if let Some(decided) = app.computers.decide(&id, body.decision).await {
        let (computer_id, step) = decided?;
        return Ok(Json(ApprovalDecided {
            id,
            execution_id: None,
            computer_id: Some(computer_id),
            decision: body.decision,
            step: Some(step),
        }));
    }
    let execution_id = app.hub.decide(&id, body.decision).await?;
    Ok(Json(ApprovalDecided {
        id,
        execution_id: Some(execution_id),
        computer_id: None,
        decision: body.decision,
        step: None,
    }))
}

/// Opens an isolated browser session (its own BrowserContext in the server's Chromium,
/// started on first use) and takes its first screenshot.
#[utoipa::path(
    post, path = "/v1/computers", request_body = CreateComputer,
    responses(
        (status = 201, description = "Opened", body = ComputerCreated),
        (status = 400, description = "Not JSON", body = ErrorBody),
        (status = 415, description = "Not `application/json`", body = ErrorBody),
        (status = 422, description = "Bad fields (`invalid_request`), or the start url is refused by the session's origin policy (`url_blocked`)", body = ErrorBody),
        (status = 502, description = "The browser failed to open the session (`browser_error`)", body = ErrorBody),
        (status = 503, description = "Chromium is not installed or did not start (`browser_unavailable`), or too many sessions are open (`too_many_computers`)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn create_computer(
    State(app): State<AppState>,
    ApiJson(body): ApiJson<CreateComputer>,
) -> Result<Response, ApiError> {
    let created = app.computers.create(body).await?;
    let location = format!("/v1/computers/{}", created.id);
    Ok(self::created(location, created))
}

/// Describes a computer session: its state, display and the approval it waits for.
#[utoipa::path(
    get, path = "/v1/computers/{id}",
    params(("id" = String, Path, description = "Computer id")),
    responses(
        (status = 200, description = "The session", body = ComputerInfo),
        (status = 404, description = "Unknown (or deleted)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn get_computer(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<ComputerInfo>, ApiError> {
    Ok(Json(app.computers.info(&id)?))
}

/// Closes a live session (state `closed`; its trajectory stays readable); deletes the
/// record and trajectory of a session that is already over.
#[utoipa::path(
    delete, path = "/v1/computers/{id}",
    params(("id" = String, Path, description = "Computer id")),
    responses(
        (status = 204, description = "Closed, or deleted"),
        (status = 404, description = "Unknown (or deleted)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn delete_computer(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    app.computers.delete(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Runs one model call (one or more actions in the vendor's shape, then one screenshot).
/// Problems the model can fix are a `200` with status `error` or `denied`.
#[utoipa::path(
    post, path = "/v1/computers/{id}/actions", request_body = ComputerActions,
    params(("id" = String, Path, description = "Computer id")),
    responses(
        (status = 200, description = "The step: `ok`, `error`, `approval_required` or `denied`", body = ComputerStep),
        (status = 404, description = "Unknown computer", body = ErrorBody),
        (status = 409, description = "A step waits for approval (`approval_pending`)", body = ErrorBody),
        (status = 410, description = "The session is over: `computer_expired`, `computer_closed`, `computer_lost` (its browser crashed)", body = ErrorBody),
        (status = 422, description = "Unknown `format`, or no actions", body = ErrorBody),
        (status = 502, description = "A browser command failed (`browser_error`); the session may still work", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn computer_actions(
    State(app): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<ComputerActions>,
) -> Result<Json<ComputerStep>, ApiError> {
    Ok(Json(app.computers.act(&id, body).await?))
}

/// The recorded steps of a computer session (also after it ended or the server restarted).
#[utoipa::path(
    get, path = "/v1/computers/{id}/trajectory",
    params(
        ("id" = String, Path, description = "Computer id"),
        ("after" = Option<u64>, Query, description = "List steps with a larger number only"),
    ),
    responses(
        (status = 200, description = "The steps", body = ComputerTrajectory),
        (status = 404, description = "Unknown computer", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn computer_trajectory(
    State(app): State<AppState>,
    Path(id): Path<String>,
    After(after): After,
) -> Result<Json<ComputerTrajectory>, ApiError> {
    Ok(Json(app.computers.trajectory(&id, after)?))
}

/// The screenshot the model saw after step `step`.
#[utoipa::path(
    get, path = "/v1/computers/{id}/trajectory/{step}/screenshot",
    params(
        ("id" = String, Path, description = "Computer id"),
        ("step" = u64, Path, description = "Step number"),
    ),
    responses(
        (status = 200, description = "The image", content_type = "image/png"),
        (status = 400, description = "`step` is not a number", body = ErrorBody),
        (status = 404, description = "Unknown computer, or the step has no screenshot", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn computer_screenshot(
    State(app): State<AppState>,
    Path((id, step)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let step: u64 = step.parse().map_err(|_| {
        ApiError::bad_request(
            "invalid_path",
            format!("the step must be a step number, not {step:?}"),
        )
    })?;
    let (media_type, bytes) = app.computers.screenshot(&id, step).await?;
    // A picture of a web page's content: an inert download like any served bytes.
    let extension = if media_type == "image/jpeg" {
        "jpg"
    } else {
        "png"
    };
    let name = format!("{id}-step-{step}.{extension}");
    Ok(inert::download_as(&name, media_type, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every path a router in this module or its children declares is in the OpenAPI
    /// document: the routes are read from the sources, so a new route cannot be forgotten.
    #[test]
    fn openapi_documents_every_routed_path() {
        let doc = serde_json::to_value(ApiDoc::openapi()).unwrap_or_default();
        let sources = [
            include_str!("http.rs"),
            include_str!("http/gateway.rs"),
            include_str!("http/session.rs"),
            include_str!("http/files.rs"),
            include_str!("http/envs.rs"),
        ];
        let mut routed = Vec::new();
        for source in sources {
            for piece in source.split(".route(").skip(1) {
                let Some(path) = piece.trim_start().strip_prefix('"') else {
                    continue;
                };
                let Some((path, _)) = path.split_once('"') else {
                    continue;
                };
                if path.starts_with('/') {
                    routed.push(path.replace("{*", "{"));
                }
            }
        }
        assert!(routed.len() >= 25, "read too few routes: {routed:?}");
        for path in &routed {
            assert!(
                doc["paths"].get(path).is_some(),
                "{path} is routed but missing from /openapi.json"
            );
        }
    }

    #[test]
    fn openapi_names_every_route() {
        let doc = serde_json::to_value(ApiDoc::openapi()).unwrap_or_default();
        for path in [
            "/v1/sandboxes",
            "/v1/sandboxes/{id}",
            "/v1/sandboxes/{id}/executions",
            "/v1/executions/{id}",
            "/v1/executions/{id}/events",
            "/v1/executions/{id}/tool_results",
            "/v1/approvals/{id}",
            "/v1/computers",
            "/v1/computers/{id}",
            "/v1/computers/{id}/actions",
            "/v1/computers/{id}/trajectory",
            "/v1/computers/{id}/trajectory/{step}/screenshot",
            "/v1/sandboxes/{id}/files",
            "/v1/sandboxes/{id}/files/{path}",
        ] {
            assert!(doc["paths"].get(path).is_some(), "missing {path}");
        }
        assert!(doc["components"]["schemas"].get("ExecutionEvent").is_some());
        assert!(doc["components"]["schemas"].get("ComputerStep").is_some());
    }
}
