//! The engines a run's episodes share (Chromium, the sandbox, the task page server),
//! each started when the first episode needs it.

use std::sync::Arc;

use cordon_computer::browser::Browser;
use cordon_sandbox::Sandbox;

use crate::error::{BenchError, Result};
use crate::page_server::PageServer;

/// The engines a run needs, started on demand.
pub(crate) struct Engines {
    pub(crate) browser: tokio::sync::OnceCell<std::result::Result<Browser, String>>,
    pub(crate) browser_options: cordon_computer::browser::BrowserOptions,
    pub(crate) sandbox: tokio::sync::OnceCell<std::result::Result<Sandbox, String>>,
    pub(crate) pages: Arc<PageServer>,
    /// Browser sessions kept between web episodes.
    pub(crate) sessions: Arc<crate::session_pool::SessionPool>,
}

impl Engines {
    pub(crate) async fn browser(&self) -> Result<Browser> {
        self.browser
            .get_or_init(|| async {
                Browser::launch(self.browser_options.clone())
                    .await
                    .map_err(|e| e.to_string())
            })
            .await
            .clone()
            .map_err(|e| BenchError::Policy(format!("Chromium did not start: {e}")))
    }

    pub(crate) async fn sandbox(&self) -> Result<Sandbox> {
        self.sandbox
            .get_or_init(|| async {
                Sandbox::new(cordon_sandbox::SandboxConfig::default())
                    .await
                    .map_err(|e| e.to_string())
            })
            .await
            .clone()
            .map_err(BenchError::Sandbox)
    }
}
