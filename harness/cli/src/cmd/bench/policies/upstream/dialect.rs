//! What every vendor dialect gives the shared loop: the first request, the computer calls
//! of a model turn as environment actions, and the next request carrying their results.

use base64::Engine as _;
use cordon_agent_bench::VENDOR_SAFETY_RULE;
use cordon_agent_bench::env::{StepInfo, Transition};
use cordon_agent_bench::policy_env::EnvView;
use cordon_computer::image::EncodedImage;
use cordon_protocol::computer::SafetyCheck;
use cordon_protocol::conversation::{ConversionError, Request, Turn};
use serde_json::Value;

use cordon_agent_bench::env::EnvAction;

/// One computer call of a model turn.
#[derive(Debug, Clone)]
pub(super) struct ModelCall {
    /// The vendor's id of the call (`tool_use.id`, `call_id`, Gemini's `id` or name).
    pub id: String,
    /// The vendor's name of the call (the tool's, or Gemini's function name).
    pub name: String,
    /// What the environment runs, or why the call is refused before anything runs (the
    /// model reads it).
    pub action: Result<EnvAction, String>,
    /// The vendor safety checks the call carries.
    pub safety_checks: Vec<SafetyCheck>,
}

/// What came of a call.
#[derive(Debug, Clone)]
pub(super) enum CallOutcome {
    /// The environment ran it (`info.status` says how it went).
    Stepped {
        transition: Box<Transition>,
        /// The gates approved the call's vendor safety checks: they are acknowledged.
        acknowledged: bool,
    },
    /// Refused before anything ran.
    Refused(String),
}

/// A vendor's computer-use conversation.
pub(super) trait Dialect: Send {
    /// The first request body: the instruction and the screen.
    fn first_request(&mut self, instruction: &str, view: &EnvView) -> Value;
    /// A body of this dialect as the gateway's canonical request.
    fn decode(&self, body: &Value) -> Result<Request, ConversionError>;
    /// The computer calls of `turn`, which the dialect keeps for the next request.
    fn take_turn(&mut self, turn: &Turn) -> Result<Vec<ModelCall>, String>;
    /// The next request body: the results of the calls that ran, in order.
    fn next_request(&mut self, answers: &[(ModelCall, CallOutcome)]) -> Value;
}

/// How the gates answered a vendor safety check in this step: `Some(true)` approved,
/// `Some(false)` denied, `None` when none was asked about.
pub(super) fn safety_answer(info: &StepInfo) -> Option<bool> {
    info.gates
        .iter()
        .filter(|g| g.rule.as_deref() == Some(VENDOR_SAFETY_RULE))
        .find_map(|g| g.answer.as_deref())
        .map(|answer| answer == "approved")
}

/// A screenshot as base64, with its media type.
pub(super) fn base64_image(image: &EncodedImage) -> (&'static str, String) {
    (
        image.format.media_type(),
        base64::engine::general_purpose::STANDARD.encode(&image.data),
    )
}
