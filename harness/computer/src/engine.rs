//! The step loop: decode → scale → gate → run → settle → capture → report (→ trajectory).
//!
//! [`Computer`] is generic over a [`Backend`] that runs screen-space [`Op`]s, so the gate,
//! approval and scaling logic is the same for Chromium and for a desktop backend.

use crate::display::{CssPoint, Scaler};
use crate::error::{ActionError, Error, Result};
use crate::gate::{Decision, ElementInfo, GateContext, Navigation, Rules, Verdict};
use crate::image::ImageFormat;
use crate::lowering::{Capture, Lowerer};
use crate::op::Op;
use crate::origin::origin_of;
use crate::trajectory::TrajectoryWriter;
use cordon_protocol::computer::{Action, ComputerCall};
use std::time::Instant;

// The backend trait and the step types lived in this module before they got their own;
// their `engine::` paths keep working.
pub use crate::backend::Backend;
pub use crate::step::{PendingApproval, SettleEnd, Status, StepReport, Timings};

/// Most actions one call may batch (OpenAI `actions[]`); more is a model-visible error.
pub const MAX_ACTIONS_PER_CALL: usize = 100;

/// Settings of the step loop.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct EngineOptions {
    pub rules: Rules,
    pub format: ImageFormat,
    /// Where Gemini's `search` goes.
    pub search_url: String,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            rules: Rules::default(),
            format: ImageFormat::Png,
            search_url: "https://duckduckgo.com/".into(),
        }
    }
}

struct Pending {
    id: String,
    call: ComputerCall,
    index: usize,
    /// The verdict that asked (so the trajectory shows what was approved).
    verdict: Verdict,
    /// Actions up to `index` whose typed text is redacted when recorded.
    redacted: Vec<usize>,
}

/// A computer-use session over a backend.
pub struct Computer<B> {
    backend: B,
    opts: EngineOptions,
    lowerer: Lowerer,
    step: u64,
    pending: Option<Pending>,
    next_pending: u64,
    trajectory: Option<TrajectoryWriter>,
    resolving: Option<String>,
    /// When the current step started (so every report, early or not, has a total).
    started: Option<Instant>,
}

impl<B> std::fmt::Debug for Computer<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Computer")
            .field("step", &self.step)
            .field("pending", &self.pending.as_ref().map(|p| &p.id))
            .finish_non_exhaustive()
    }
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

impl<B: Backend> Computer<B> {
    pub fn new(backend: B, opts: EngineOptions) -> Self {
        let lowerer = Lowerer {
            scaler: backend.scaler(),
            space: Default::default(),
            pointer: CssPoint { x: 0.0, y: 0.0 },
            search_url: opts.search_url.clone(),
        };
        Self {
            backend,
            opts,
            lowerer,
            step: 0,
            pending: None,
            next_pending: 1,
            trajectory: None,
            resolving: None,
            started: None,
        }
    }

    /// Records every step from now on.
    pub fn record(&mut self, writer: TrajectoryWriter) {
        self.trajectory = Some(writer);
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    pub fn backend_mut(&mut self) -> &mut B {
        &mut self.backend
    }

    pub fn into_backend(self) -> B {
        self.backend
    }

    pub fn scaler(&self) -> Scaler {
        self.backend.scaler()
    }

    /// The id of the step waiting for approval, if any.
    pub fn pending_id(&self) -> Option<&str> {
        self.pending.as_ref().map(|p| p.id.as_str())
    }

    /// Runs one call. Model-visible problems come back as a report with status `error`
    /// (or `denied`/`approval_required`); `Err` means the session is broken.
    pub async fn step(
        &mut self,
        call: ComputerCall,
        raw: Option<&serde_json::Value>,
    ) -> Result<StepReport> {
        if let Some(id) = self.pending.as_ref().map(|p| p.id.clone()) {
            let waiting = self.step;
            let mut report = self.new_report(&call);
            report.status = Status::Error;
            report.error = Some(format!(
                "step {waiting} waits for approval `{id}`: approve or deny it first"
            ));
            return self.finish(report, &call, raw, None).await;
        }
        self.run_call(call, 0, false, Vec::new(), raw).await
    }

    /// Approves the pending step: it resumes where it stopped (the asking action runs).
    pub async fn approve(&mut self, id: &str) -> Result<StepReport> {
        let p = self.take_pending(id)?;
        self.resolving = Some(p.id.clone());
        let out = self.run_call(p.call, p.index, true, p.redacted, None).await;
        self.resolving = None;
        out
    }

    /// Refuses the pending step; nothing more of it runs.
    pub async fn deny(&mut self, id: &str) -> Result<StepReport> {
        let p = self.take_pending(id)?;
        let mut report = self.new_report(&p.call);
        report.status = Status::Denied;
        report.resolves = Some(p.id.clone());
        report.error = Some(
            ActionError::Denied {
                rule: p.verdict.rule.clone().unwrap_or_default(),
                reason: format!("the user declined: {}", p.verdict.reason),
            }
            .to_string(),
        );
        report.gates.push(p.verdict);
        report.redacted_actions = p.redacted;
        let call = p.call;
        self.finish(report, &call, None, None).await
    }

    fn take_pending(&mut self, id: &str) -> Result<Pending> {
        match self.pending.take() {
            Some(p) if p.id == id => Ok(p),
            other => {
                self.pending = other;
                Err(ActionError::NoSuchApproval(id.to_owned()).into())
            }
        }
    }

    fn new_report(&mut self, call: &ComputerCall) -> StepReport {
        self.step += 1;
        let mut r = StepReport::new(self.step, call);
        r.resolves = self.resolving.clone();
        r
    }

    async fn run_call(
        &mut self,
        call: ComputerCall,
        start: usize,
        approved: bool,
        redacted: Vec<usize>,
        raw: Option<&serde_json::Value>,
    ) -> Result<StepReport> {
        let t0 = Instant::now();
        self.started = Some(t0);
        let mut report = self.new_report(&call);
        report.redacted_actions = redacted;
        self.lowerer.space = call.coords;
        self.lowerer.scaler = self.backend.scaler();
        if let Some(p) = self.backend.pointer().await? {
            self.lowerer.pointer = p;
        }
        if approved {
            report.acknowledged_safety_checks = call.safety_checks.clone();
        }
        // Vendor safety checks ask before anything runs, like an `ask` rule.
        if start == 0 && !approved && !call.safety_checks.is_empty() {
            let reason = call
                .safety_checks
                .iter()
                .map(|c| {
                    c.message
                        .clone()
                        .or_else(|| c.code.clone())
                        .unwrap_or_else(|| c.id.clone())
                })
                .collect::<Vec<_>>()
                .join("; ");
            let verdict = Verdict {
                decision: Decision::Ask,
                rule: Some("vendor-safety-check".into()),
                reason,
                element: None,
            };
            return self.ask(report, call, 0, verdict, raw).await;
        }
        if call.actions.len() > MAX_ACTIONS_PER_CALL {
            let e = ActionError::Invalid(format!(
                "{} actions in one call is more than {MAX_ACTIONS_PER_CALL}; send them in several calls",
                call.actions.len()
            ));
            return self.action_error(report, &call, raw, e).await;
        }
        let mut capture = Capture::Screen;
        let mut gate_ms = 0.0;
        let mut act_ms = 0.0;
        for index in start..call.actions.len() {
            let action = &call.actions[index];
            let lowered = match self.lowerer.lower(action) {
                Ok(l) => l,
                Err(e) => return self.action_error(report, &call, raw, e).await,
            };
            if let Some(e) = lowered
                .ops
                .iter()
                .find_map(|op| self.backend.check(op).err())
            {
                return self.action_error(report, &call, raw, e).await;
            }
            let tg = Instant::now();
            let (verdict, secret) = match self.gate(action, &lowered).await? {
                Ok(v) => v,
                Err(e) => return self.action_error(report, &call, raw, e).await,
            };
            gate_ms += ms(tg);
            // Before the decision: a step that asks or is denied records the call too.
            if secret {
                report.redacted_actions.push(index);
            }
            let skip_ask = approved && index == start;
            match verdict.decision {
                Decision::Deny => {
                    report.status = Status::Denied;
                    report.error = Some(
                        ActionError::Denied {
                            rule: verdict.rule.clone().unwrap_or_default(),
                            reason: verdict.reason.clone(),
                        }
                        .to_string(),
                    );
                    report.gates.push(verdict);
                    report.timings_ms.gate = gate_ms;
                    return self.finish(report, &call, raw, None).await;
                }
                Decision::Ask if !skip_ask => {
                    report.timings_ms.gate = gate_ms;
                    return self.ask(report, call, index, verdict, raw).await;
                }
                Decision::Ask => {
                    report.gates.push(Verdict {
                        reason: format!("approved: {}", verdict.reason),
                        ..verdict
                    });
                }
                _ => report.gates.push(verdict),
            }
            let ta = Instant::now();
            for op in &lowered.ops {
                match self.backend.run(op).await {
                    Ok(()) => {}
                    // A backend may still refuse an op while running it (the model can
                    // correct that); anything else breaks the session.
                    Err(Error::Action(e)) => return self.action_error(report, &call, raw, e).await,
                    Err(e) => return Err(e),
                }
            }
            act_ms += ms(ta);
            report
                .screen_ops
                .extend(lowered.ops.into_iter().map(|op| match op {
                    Op::Text { .. } if secret => Op::Text {
                        text: crate::trajectory::REDACTED.to_owned(),
                    },
                    op => op,
                }));
            if lowered.text.is_some() {
                report.text = lowered.text;
            }
            capture = lowered.capture;
        }
        report.timings_ms.gate = gate_ms;
        report.timings_ms.act = act_ms;
        let ts = Instant::now();
        report.settled = self.backend.settle().await?;
        report.timings_ms.settle = ms(ts);
        let tc = Instant::now();
        let plan = match capture {
            Capture::Screen => self.backend.scaler().capture_plan(),
            Capture::Zoom(plan) => plan,
        };
        report.screenshot = Some(self.backend.capture(&plan, self.opts.format).await?);
        report.timings_ms.capture = ms(tc);
        report.settle = self.backend.settle_end().unwrap_or(if report.settled {
            SettleEnd::Quiet
        } else {
            SettleEnd::Timeout
        });
        report.settled = !matches!(report.settle, SettleEnd::Timeout | SettleEnd::Moving);
        let notes = self.backend.take_notes();
        if !notes.is_empty() {
            let text = report.text.take().into_iter().chain(notes);
            report.text = Some(text.collect::<Vec<_>>().join("\n"));
        }
        let current = self.backend.current_url().await?;
        if let Some(refusal) = self.backend.take_refusal() {
            let line = match &refusal {
                ActionError::Blocked { url, reason } => {
                    format!("Cordon refused to open {url}: {reason}. The page stays on {current}.")
                }
                other => format!("{other}. The page stays on {current}."),
            };
            report.status = Status::Error;
            report.error = Some(refusal.to_string());
            let text = report.text.take().into_iter().chain([line]);
            report.text = Some(text.collect::<Vec<_>>().join("\n"));
        }
        report.current_url = Some(current);
        report.timings_ms.total = ms(t0);
        self.finish(report, &call, raw, None).await
    }

    async fn ask(
        &mut self,
        mut report: StepReport,
        call: ComputerCall,
        index: usize,
        verdict: Verdict,
        raw: Option<&serde_json::Value>,
    ) -> Result<StepReport> {
        let id = format!("appr-{}", self.next_pending);
        self.next_pending += 1;
        report.status = Status::ApprovalRequired;
        report.pending = Some(PendingApproval {
            id: id.clone(),
            rule: verdict.rule.clone().unwrap_or_default(),
            reason: verdict.reason.clone(),
            element: verdict.element.clone(),
            action_index: index,
            action: call
                .actions
                .get(index)
                .map_or("call", Action::kind)
                .to_owned(),
        });
        report.gates.push(verdict.clone());
        report.current_url = self.backend.current_url().await.ok();
        let redacted = report.redacted_actions.clone();
        let out = self.finish(report, &call, raw, None).await;
        self.pending = Some(Pending {
            id,
            call,
            index,
            verdict,
            // The asking action is gated again when approved.
            redacted: redacted.into_iter().filter(|&i| i < index).collect(),
        });
        out
    }

    async fn action_error(
        &mut self,
        mut report: StepReport,
        call: &ComputerCall,
        raw: Option<&serde_json::Value>,
        e: ActionError,
    ) -> Result<StepReport> {
        report.status = Status::Error;
        report.error = Some(e.to_string());
        report.current_url = self.backend.current_url().await.ok();
        self.finish(report, call, raw, None).await
    }

    async fn finish(
        &mut self,
        report: StepReport,
        call: &ComputerCall,
        raw: Option<&serde_json::Value>,
        _note: Option<&str>,
    ) -> Result<StepReport> {
        let mut report = report;
        if report.timings_ms.total == 0.0
            && let Some(t0) = self.started.take()
        {
            report.timings_ms.total = ms(t0);
        }
        if let Some(t) = &mut self.trajectory {
            t.append(&report, call, raw)?;
        }
        Ok(report)
    }

    /// Gathers what the action touches and asks the rules; also says whether the action
    /// types into a password field (its text is then redacted when recorded). The inner
    /// `Err` is a model-visible refusal (a blocked URL).
    async fn gate(
        &mut self,
        action: &Action,
        lowered: &crate::lowering::Lowered,
    ) -> Result<Result<(Verdict, bool), ActionError>> {
        let kind = action.kind();
        let element = match (kind, lowered.target) {
            ("type" | "key", None) => self.backend.focused_element().await?,
            ("type", Some(p)) => self.backend.element_at(p).await?,
            (_, Some(p)) => self.backend.element_at(p).await?,
            _ => None,
        };
        let current = self.backend.current_url().await.unwrap_or_default();
        let mut navigation = None;
        let target_url = lowered.navigates_to.clone().or_else(|| {
            // A click on a link navigates too.
            matches!(kind, "click" | "mouse_down" | "mouse_up")
                .then(|| element.as_ref().and_then(|e| e.href.clone()))
                .flatten()
        });
        if let Some(to) = target_url {
            let explicit = lowered.navigates_to.is_some();
            if explicit && let Err(refusal) = self.backend.policy().check(&to) {
                return Ok(Err(ActionError::Blocked {
                    url: to,
                    reason: refusal.0,
                }));
            }
            let new_origin = match (origin_of(&to), origin_of(&current)) {
                (Some(a), Some(b)) => a != b,
                (Some(_), None) => true,
                _ => false,
            };
            navigation = Some(Navigation { to, new_origin });
        } else if matches!(kind, "go_back" | "go_forward") {
            navigation = Some(Navigation {
                to: kind.replace('_', " "),
                new_origin: false,
            });
        }
        let chords = match action {
            Action::Key { chords } => chords.clone(),
            Action::HoldKey { keys, .. } => vec![keys.clone()],
            Action::Click { modifiers, .. } if !modifiers.is_empty() => vec![modifiers.clone()],
            _ => Vec::new(),
        };
        let secret = matches!(action, Action::Type { .. })
            && element.as_ref().is_some_and(ElementInfo::is_password);
        let verdict = self.opts.rules.evaluate(&GateContext {
            action,
            element: element.as_ref(),
            navigation,
            chords,
        });
        Ok(Ok((verdict, secret)))
    }
}
