//! What one step reports: [`StepReport`] with its [`Status`], [`SettleEnd`], [`Timings`]
//! and the [`PendingApproval`] a step may wait on; the shapes the step loop, trajectories
//! and replay share.

use crate::error::Error;
use crate::gate::Verdict;
use crate::image::EncodedImage;
use crate::op::Op;
use cordon_protocol::computer::{Action, ComputerCall, ComputerOutput, SafetyCheck, Screenshot};
use serde::{Deserialize, Serialize};

/// How a step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Status {
    Ok,
    Error,
    ApprovalRequired,
    Denied,
}

/// How a step's settling ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SettleEnd {
    /// The network went quiet and the screen did not change after the capture began.
    #[default]
    Quiet,
    /// The screen was changing (an animation, a transition, a script); the step waited
    /// until it stopped and captured again.
    Stable,
    /// The settle timeout was reached (a page that never stops loading or moving); the
    /// screen was captured as it was.
    Timeout,
    /// The page's script kept changing the screen as it did when the previous step ended
    /// (a ticker, a clock): the step waited only briefly (finite animations in full) and
    /// captured it as it was.
    Moving,
}

/// A step waiting for a human.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingApproval {
    pub id: String,
    pub rule: String,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub element: Option<String>,
    /// Which action of the call is waiting (earlier ones of a batch already ran).
    pub action_index: usize,
    pub action: String,
}

/// Milliseconds per phase.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Timings {
    pub gate: f64,
    pub act: f64,
    pub settle: f64,
    pub capture: f64,
    pub total: f64,
}

/// The outcome of one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StepReport {
    pub step: u64,
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_url: Option<String>,
    #[serde(skip)]
    pub screenshot: Option<EncodedImage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<PendingApproval>,
    /// The approval this step resolved (set by approve/deny).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolves: Option<String>,
    /// The gate verdict for each action that reached the gate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gates: Vec<Verdict>,
    /// What ran, in screen coordinates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub screen_ops: Vec<Op>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acknowledged_safety_checks: Vec<SafetyCheck>,
    /// Indices of the call's `type` actions that the gate saw go into a password field:
    /// their text is recorded as [`crate::trajectory::REDACTED`] (their screen ops here are
    /// already redacted; the call is redacted by [`crate::trajectory::redact_call`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redacted_actions: Vec<usize>,
    /// False when the page did not settle before the cap.
    pub settled: bool,
    /// How settling ended.
    #[serde(default)]
    pub settle: SettleEnd,
    pub timings_ms: Timings,
}

impl StepReport {
    pub(crate) fn new(step: u64, call: &ComputerCall) -> Self {
        Self {
            step,
            status: Status::Ok,
            call_id: call.call_id.clone(),
            error: None,
            current_url: None,
            screenshot: None,
            text: None,
            pending: None,
            resolves: None,
            gates: Vec::new(),
            screen_ops: Vec::new(),
            acknowledged_safety_checks: Vec::new(),
            redacted_actions: Vec::new(),
            settled: true,
            settle: SettleEnd::Quiet,
            timings_ms: Timings::default(),
        }
    }

    /// The model-facing output, ready for a vendor encoder.
    pub fn to_output(&self) -> ComputerOutput {
        ComputerOutput {
            screenshot: self.screenshot.as_ref().map(|s| Screenshot {
                media_type: s.format.media_type().into(),
                data: s.data.clone(),
                width: s.size.width,
                height: s.size.height,
            }),
            current_url: self.current_url.clone(),
            error: self.error.clone(),
            text: self.text.clone(),
            acknowledged_safety_checks: self.acknowledged_safety_checks.clone(),
        }
    }
}

impl From<Error> for StepReport {
    /// A fatal error as a report, for callers that print every step (the CLI).
    fn from(e: Error) -> Self {
        let mut r = StepReport::new(0, &ComputerCall::native(Action::Screenshot));
        r.status = Status::Error;
        r.error = Some(e.to_string());
        r
    }
}
