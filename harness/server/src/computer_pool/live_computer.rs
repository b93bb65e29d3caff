//! One open computer session ([`LiveComputer`]): its steps, the step waiting for a human,
//! and what each step produced for the API and the trajectory.

use std::sync::Arc;

use base64::Engine as _;
use cordon_computer::browser::BrowserSession;
use cordon_computer::display::Size;
use cordon_computer::trajectory;
use cordon_computer::{Backend as _, Computer, Error, Status, StepReport};
use cordon_core::clock::now_ms;
use cordon_core::ids::fresh_id;
use cordon_protocol::computer::ComputerCall;
use serde_json::Value;

use super::error::ComputerError;
use crate::api::{
    ComputerApproval, ComputerStep, ScreenshotBody, ScreenshotRef, StepStatus, TrajectoryStep,
};

/// `quiet`, `stable`, `timeout` or `moving`.
fn settle_name(end: cordon_computer::SettleEnd) -> String {
    serde_json::to_value(end)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "quiet".to_owned())
}

/// A step waiting for a human.
#[derive(Debug, Clone)]
pub(super) struct PendingStep {
    approval: ComputerApproval,
    /// The engine's own id for it.
    engine_id: String,
    /// The call it belongs to.
    call: ComputerCall,
}

/// What one step produced: the API's answer, and the trajectory entry when recorded.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Stepped {
    /// The step result.
    pub step: ComputerStep,
    /// The trajectory entry (`None` when the session does not record, or nothing ran).
    pub record: Option<TrajectoryStep>,
    /// The screenshot's file name in the trajectory directory.
    pub screenshot_file: Option<String>,
}

/// An open computer session. Only the worker thread touches it (see [`super`]).
pub struct LiveComputer {
    pub(super) id: String,
    pub(super) computer: Computer<BrowserSession>,
    pub(super) pending: Option<PendingStep>,
    pub(super) recording: bool,
    pub(super) closed: Option<String>,
    /// The model display.
    pub display: Size,
    /// The viewport in CSS pixels.
    pub viewport: Size,
}

impl std::fmt::Debug for LiveComputer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveComputer")
            .field("id", &self.id)
            .field("display", &self.display)
            .finish_non_exhaustive()
    }
}

/// A computer session shared between requests; steps on it run one at a time.
pub type SharedComputer = Arc<tokio::sync::Mutex<LiveComputer>>;

fn status(status: Status) -> StepStatus {
    match status {
        Status::Ok => StepStatus::Ok,
        Status::ApprovalRequired => StepStatus::ApprovalRequired,
        Status::Denied => StepStatus::Denied,
        _ => StepStatus::Error,
    }
}

impl LiveComputer {
    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The approval a step waits for.
    pub fn pending(&self) -> Option<&ComputerApproval> {
        self.pending.as_ref().map(|p| &p.approval)
    }

    /// Runs one call.
    pub(super) async fn step(
        &mut self,
        call: ComputerCall,
        raw: &Value,
    ) -> Result<Stepped, ComputerError> {
        self.usable()?;
        if let Some(pending) = &self.pending {
            return Err(ComputerError::Pending(pending.approval.approval_id.clone()));
        }
        let report = match self.computer.step(call.clone(), Some(raw)).await {
            Ok(report) => report,
            Err(error) => return Err(self.failed(error)),
        };
        Ok(self.stepped(report, call, None))
    }

    /// Approves or denies the pending step.
    pub(super) async fn decide(
        &mut self,
        approval_id: &str,
        approve: bool,
    ) -> Result<Stepped, ComputerError> {
        self.usable()?;
        let pending = match self.pending.take() {
            Some(pending) if pending.approval.approval_id == approval_id => pending,
            other => {
                self.pending = other;
                return Err(ComputerError::NoSuchApproval(approval_id.to_owned()));
            }
        };
        let outcome = if approve {
            self.computer.approve(&pending.engine_id).await
        } else {
            self.computer.deny(&pending.engine_id).await
        };
        match outcome {
            Ok(mut report) => {
                if report.current_url.is_none() {
                    // A denied step ran nothing, but the model still learns where it is.
                    report.current_url = self.computer.backend_mut().current_url().await.ok();
                }
                Ok(self.stepped(report, pending.call, Some(approval_id.to_owned())))
            }
            Err(error) => Err(self.failed(error)),
        }
    }

    pub(super) async fn close(&mut self, why: &str) {
        if self.closed.is_none() {
            self.closed = Some(why.to_owned());
            let _closed = self.computer.backend_mut().close().await;
        }
    }

    fn usable(&self) -> Result<(), ComputerError> {
        match &self.closed {
            Some(why) => Err(ComputerError::Closed(why.clone())),
            None => Ok(()),
        }
    }

    fn failed(&mut self, error: Error) -> ComputerError {
        let error = ComputerError::from_step(error);
        if let ComputerError::Lost(why) = &error {
            // The browser context died with its process: the session cannot go on.
            self.closed = Some(why.clone());
            self.pending = None;
        }
        error
    }

    fn stepped(
        &mut self,
        report: StepReport,
        call: ComputerCall,
        resolves: Option<String>,
    ) -> Stepped {
        let pending_approval = report.pending.as_ref().map(|engine| {
            let approval = ComputerApproval {
                approval_id: fresh_id("appr"),
                rule: engine.rule.clone(),
                reason: engine.reason.clone(),
                element: engine.element.clone(),
                action_index: engine.action_index,
                action: engine.action.clone(),
            };
            self.pending = Some(PendingStep {
                approval: approval.clone(),
                engine_id: engine.id.clone(),
                call: call.clone(),
            });
            approval
        });
        let screenshot = report.screenshot.as_ref().map(|image| ScreenshotBody {
            media_type: image.format.media_type().to_owned(),
            data: base64::engine::general_purpose::STANDARD.encode(&image.data),
            width: image.size.width,
            height: image.size.height,
        });
        let gates: Vec<Value> = report
            .gates
            .iter()
            .filter_map(|gate| serde_json::to_value(gate).ok())
            .collect();
        let timings = serde_json::to_value(report.timings_ms).unwrap_or(Value::Null);
        let step = ComputerStep {
            step: Some(report.step),
            status: status(report.status),
            call_id: report.call_id.clone(),
            error: report.error.clone(),
            current_url: report.current_url.clone(),
            screenshot,
            text: report.text.clone(),
            pending_approval: pending_approval.clone(),
            resolves: resolves.clone(),
            gates: gates.clone(),
            settled: report.settled,
            settle: settle_name(report.settle),
            timings_ms: timings.clone(),
        };
        let screenshot_file = report
            .screenshot
            .as_ref()
            .filter(|_| self.recording)
            .map(|image| format!("step-{:04}.{}", report.step, image.format.extension()));
        let record = self.recording.then(|| TrajectoryStep {
            step: report.step,
            at: cordon_protocol::time::rfc3339(now_ms()),
            status: step.status,
            call_id: report.call_id.clone(),
            error: report.error.clone(),
            current_url: report.current_url.clone(),
            // Text typed into password fields never reaches the store (or the API).
            call: serde_json::to_value(trajectory::redact_call(&call, &report.redacted_actions))
                .unwrap_or(Value::Null),
            redacted_actions: report.redacted_actions.clone(),
            screen_ops: report
                .screen_ops
                .iter()
                .filter_map(|op| serde_json::to_value(op).ok())
                .collect(),
            gates,
            pending_approval,
            resolves,
            text: report.text.clone(),
            screenshot: report.screenshot.as_ref().map(|image| ScreenshotRef {
                media_type: image.format.media_type().to_owned(),
                width: image.size.width,
                height: image.size.height,
                url: format!(
                    "/v1/computers/{}/trajectory/{}/screenshot",
                    self.id, report.step
                ),
            }),
            settled: report.settled,
            settle: settle_name(report.settle),
            timings_ms: timings,
        });
        Stepped {
            step,
            record,
            screenshot_file,
        }
    }
}
