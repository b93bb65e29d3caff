//! The [`Backend`] trait: what executes screen-space [`Op`]s (a browser page, an X
//! display) and answers the step loop's questions about the screen.

use crate::display::{CapturePlan, CssPoint, Scaler};
use crate::error::{ActionError, Result};
use crate::gate::ElementInfo;
use crate::image::{EncodedImage, ImageFormat};
use crate::op::Op;
use crate::origin::OriginPolicy;
use crate::step::SettleEnd;

/// What executes screen-space operations: a browser page, an X display.
#[allow(
    async_fn_in_trait,
    reason = "used generically inside this workspace; no dyn or Send bound is needed"
)]
pub trait Backend {
    /// Short name for messages (`browser`, `desktop`).
    fn name(&self) -> &'static str;
    /// The mapping between the model display and this screen.
    fn scaler(&self) -> Scaler;
    /// What the session may reach (checked before explicit navigations, so the model gets
    /// a clear refusal instead of an error page).
    fn policy(&self) -> &OriginPolicy;
    /// The element under a point (for the gates).
    async fn element_at(&mut self, at: CssPoint) -> Result<Option<ElementInfo>>;
    /// The element that has keyboard focus.
    async fn focused_element(&mut self) -> Result<Option<ElementInfo>>;
    async fn current_url(&mut self) -> Result<String>;
    async fn run(&mut self, op: &Op) -> Result<()>;
    /// Waits until the screen stops changing on its own, up to a cap. Returns false if the
    /// cap was hit.
    async fn settle(&mut self) -> Result<bool>;
    async fn capture(&mut self, plan: &CapturePlan, format: ImageFormat) -> Result<EncodedImage>;
    /// Refuses, before anything of the action runs, an op this backend cannot carry out
    /// (a key it cannot type, a navigation on a desktop). The refusal is model-visible.
    fn check(&self, op: &Op) -> std::result::Result<(), ActionError> {
        let _ = op;
        Ok(())
    }
    /// Where the pointer really is, for backends that can ask (an X display, where a
    /// program may warp it). `None` keeps the engine's own tracking.
    async fn pointer(&mut self) -> Result<Option<CssPoint>> {
        Ok(None)
    }
    /// What happened on the screen's side during the step that the model should read
    /// (a file chooser answered or refused); reported in the step's `text`.
    fn take_notes(&mut self) -> Vec<String> {
        Vec::new()
    }
    /// A navigation the page started during the step (a link, a form, a redirect, a
    /// script) that the session's policy refused before it left. The page stays where it
    /// was; the step reports the refusal with status `error`.
    fn take_refusal(&mut self) -> Option<ActionError> {
        None
    }
    /// How the last settle and capture ended, for backends that tell more than
    /// [`settle`](Self::settle)'s yes or no.
    fn settle_end(&self) -> Option<SettleEnd> {
        None
    }
}
