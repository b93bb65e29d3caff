//! Serving the MCP server: one client on stdio, or Streamable HTTP at `/mcp` behind the
//! Host/Origin guard.

use std::sync::Arc;

use super::server::McpServer;
use crate::guard::{HostGuard, guard_requests};

/// rmcp answers a session `DELETE` with `202 Accepted`; clients (the Python SDK among
/// them) expect `200` or `204` for a terminated session and log a failure otherwise.
async fn terminated_is_no_content(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let delete = request.method() == axum::http::Method::DELETE;
    let mut response = next.run(request).await;
    if delete && response.status() == axum::http::StatusCode::ACCEPTED {
        *response.status_mut() = axum::http::StatusCode::NO_CONTENT;
    }
    response
}

/// A failure serving MCP (the transport, not a tool call).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpServeError {
    /// The client's `initialize` failed or the connection broke during it.
    #[error("MCP session setup failed: {0}")]
    Initialize(String),
    /// The serving task failed.
    #[error("MCP server task failed: {0}")]
    Task(String),
    /// The HTTP listener failed.
    #[error("MCP HTTP server: {0}")]
    Io(#[from] std::io::Error),
}

impl McpServer {
    /// Serves one client on stdin/stdout until it disconnects.
    pub async fn serve_stdio(self) -> Result<(), McpServeError> {
        use rmcp::ServiceExt;
        let this = self.clone();
        let running = self
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|error| McpServeError::Initialize(error.to_string()))?;
        let waited = running
            .waiting()
            .await
            .map_err(|error| McpServeError::Task(error.to_string()));
        this.shutdown().await;
        waited?;
        Ok(())
    }

    /// The Streamable HTTP endpoint as an axum router serving `/mcp`. `guard` judges the
    /// `Host` and `Origin` of every request first (DNS-rebinding and cross-site
    /// protection, as the MCP transport spec requires); refusals are `403` with a JSON
    /// body `{"type", "message"}`.
    pub fn streamable_http_router(
        self,
        guard: HostGuard,
        cancel: tokio_util::sync::CancellationToken,
    ) -> axum::Router {
        use rmcp::transport::StreamableHttpServerConfig;
        use rmcp::transport::streamable_http_server::StreamableHttpService;
        use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
        // `guard` is the one judge of Host and Origin (the same code as `cordon serve`'s):
        // rmcp's own, narrower host list would refuse the names `--allow-host` adds.
        let config = StreamableHttpServerConfig::default()
            .with_cancellation_token(cancel)
            .disable_allowed_hosts()
            .disable_allowed_origins();
        let service = StreamableHttpService::new(
            move || Ok(self.with_own_sessions()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        axum::Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn(terminated_is_no_content))
            .layer(axum::middleware::from_fn_with_state(
                Arc::new(guard),
                guard_requests,
            ))
    }

    /// Serves Streamable HTTP at `/mcp` on `listener` until `shutdown` resolves.
    pub async fn serve_http(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<(), McpServeError> {
        let cancel = tokio_util::sync::CancellationToken::new();
        let this = self.clone();
        let guard = HostGuard::new(listener.local_addr()?, &self.inner.allowed_hosts);
        let router = self.streamable_http_router(guard, cancel.clone());
        use axum::serve::ListenerExt;
        // Small SSE writes must not wait for delayed ACKs (Nagle).
        let listener = listener.tap_io(|stream| {
            let _ = stream.set_nodelay(true);
        });
        let served = axum::serve(listener, router)
            .with_graceful_shutdown(async move {
                shutdown.await;
                cancel.cancel();
            })
            .await;
        this.shutdown().await;
        served?;
        Ok(())
    }
}
