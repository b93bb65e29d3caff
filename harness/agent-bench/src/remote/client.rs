//! [`EnvClient`]: the `/v1/envs` API of one Cordon server, as a remote episode calls it
//! (create, step, evaluate, delete), with the server's bearer token when it needs one.

use std::time::Duration;

use serde_json::{Value, json};

use crate::env::EnvAction;
use crate::error::{BenchError, Result};
use crate::task::Approvals;

/// The longest one call may take: a step settles the page and reads the reward (seconds);
/// a create may start the server's Chromium or fetch the MiniWoB++ pages first.
const CALL_TIMEOUT: Duration = Duration::from_secs(180);

/// How a call to a server failed.
#[derive(Debug)]
pub(crate) enum CallError {
    /// The server could not be reached or broke off (connection refused or reset, a
    /// timeout, an answer that is not the API's): it is taken out of the run.
    Unreachable(String),
    /// The server answered with an API error (`{"type", "message"}`).
    Refused {
        status: u16,
        kind: String,
        message: String,
    },
}

impl CallError {
    /// As the error that ends the episode, naming the server.
    pub(crate) fn into_bench(self, server: &str) -> BenchError {
        let reason = match self {
            CallError::Unreachable(reason) => reason,
            CallError::Refused {
                status,
                kind,
                message,
            } => format!("{status} {kind}: {message}"),
        };
        BenchError::Remote {
            server: server.to_owned(),
            reason,
        }
    }
}

/// One server's `/v1/envs`.
#[derive(Debug, Clone)]
pub(crate) struct EnvClient {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl EnvClient {
    pub(crate) fn new(http: reqwest::Client, base: &str, token: Option<String>) -> EnvClient {
        EnvClient {
            http,
            base: base.trim_end_matches('/').to_owned(),
            token,
        }
    }

    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, CallError> {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .timeout(CALL_TIMEOUT);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request
            .send()
            .await
            .map_err(|e| CallError::Unreachable(describe(&e)))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|e| CallError::Unreachable(describe(&e)))?;
        if status == reqwest::StatusCode::NO_CONTENT {
            return Ok(Value::Null);
        }
        let value: Value = serde_json::from_str(&text).map_err(|_| {
            CallError::Unreachable(format!(
                "answered {status} with something that is not the Cordon API's JSON"
            ))
        })?;
        if status.is_success() {
            return Ok(value);
        }
        let text_of = |field: &str| value[field].as_str().unwrap_or_default().to_owned();
        Err(CallError::Refused {
            status: status.as_u16(),
            kind: text_of("type"),
            message: text_of("message"),
        })
    }

    /// `POST /v1/envs`: a new environment on `task` of `suite`, reset with `seed`.
    pub(crate) async fn create(
        &self,
        suite: &str,
        task: &str,
        seed: u64,
        dpr: Option<f64>,
    ) -> Result<Value, CallError> {
        let mut body = json!({"suite": suite, "task": task, "seed": seed});
        if let Some(dpr) = dpr {
            body["dpr"] = json!(dpr);
        }
        self.call(reqwest::Method::POST, "/v1/envs", Some(body))
            .await
    }

    /// `POST /v1/envs/{id}/step`.
    pub(crate) async fn step(
        &self,
        id: &str,
        action: &EnvAction,
        safety_checks: Option<Approvals>,
    ) -> Result<Value, CallError> {
        let mut body = json!({"format": action.format, "actions": action.actions});
        if let Some(answer) = safety_checks {
            body["safety_checks"] = json!(answer);
        }
        self.call(
            reqwest::Method::POST,
            &format!("/v1/envs/{id}/step"),
            Some(body),
        )
        .await
    }

    /// `POST /v1/envs/{id}/evaluate`: the reward read from the page now.
    pub(crate) async fn evaluate(&self, id: &str) -> Result<f64, CallError> {
        let value = self
            .call(
                reqwest::Method::POST,
                &format!("/v1/envs/{id}/evaluate"),
                None,
            )
            .await?;
        Ok(value["reward"].as_f64().unwrap_or(0.0))
    }

    /// `DELETE /v1/envs/{id}`.
    pub(crate) async fn delete(&self, id: &str) -> Result<(), CallError> {
        self.call(reqwest::Method::DELETE, &format!("/v1/envs/{id}"), None)
            .await
            .map(|_| ())
    }
}

/// A transport error in a few words (reqwest's own display hides the cause).
fn describe(error: &reqwest::Error) -> String {
    let what = if error.is_connect() {
        "could not connect"
    } else if error.is_timeout() {
        "did not answer in time"
    } else {
        "broke off"
    };
    let mut cause = String::new();
    let mut source = std::error::Error::source(error);
    while let Some(inner) = source {
        cause = inner.to_string();
        source = inner.source();
    }
    if cause.is_empty() {
        what.to_owned()
    } else {
        format!("{what} ({cause})")
    }
}
