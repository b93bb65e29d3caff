//! Computer use as a server tool: what the gateway needs from whoever owns the computers.

use futures::future::BoxFuture;
use serde_json::Value;

/// What one computer action gave.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ComputerOutcome {
    /// It ran (or failed in a way the model can act on); the model sees this.
    Done {
        /// A screenshot after the action: media type and base64 data.
        screenshot: Option<(String, String)>,
        /// Text for the model (an error message, or what the action returned).
        text: Option<String>,
        /// Whether the model should read it as an error.
        is_error: bool,
    },
    /// A gate asks: the client must approve the action first.
    NeedsApproval {
        /// Why, for a human.
        reason: String,
    },
}

/// The computers the gateway may drive, owned by the server (`/v1/computers`).
pub trait Computers: Send + Sync + std::fmt::Debug {
    /// Opens a new computer on `url` whose screenshots the model sees at `display`
    /// (width, height; the tool's `display_width_px`/`display_height_px`); its `cmp_…` id.
    fn open<'a>(
        &'a self,
        url: &'a str,
        display: Option<(u64, u64)>,
    ) -> BoxFuture<'a, Result<String, String>>;

    /// Whether computer `id` is open.
    fn exists<'a>(&'a self, id: &'a str) -> BoxFuture<'a, bool>;

    /// Runs one Anthropic computer-tool action (`input` of the tool call) on computer `id`,
    /// or one action of Cordon's vocabulary (`{"kind": "navigate", "url"}`, `go_back`,
    /// `go_forward`: a browser toolset's `navigate`).
    /// `approved` is set when the client approved this call after a gate asked. A Gemini
    /// function call (`{"name": "click_at", "args"}`) is one of Gemini's computer-use
    /// actions, on its 0–999 grid.
    fn act<'a>(
        &'a self,
        id: &'a str,
        input: &'a Value,
        approved: bool,
    ) -> BoxFuture<'a, Result<ComputerOutcome, String>>;

    /// Whether computer `id` was open when the server stopped (its browser went with the
    /// process), so a request binding it is told so rather than "no such computer".
    fn interrupted_by_restart<'a>(&'a self, id: &'a str) -> BoxFuture<'a, bool> {
        let _ = id;
        Box::pin(async { false })
    }

    /// The page computer `id` is on (Gemini's action results carry it); `None` when
    /// unknown.
    fn current_url<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Option<String>> {
        let _ = id;
        Box::pin(async { None })
    }
}
