//! A desktop episode as an environment a policy steps: the display's computer, the steps
//! taken so far and the task's caps. The reward is the task's checker, run once the episode
//! is over (`desktop.rs`): a step's reward is 0, and `done` says a cap was reached.

use std::sync::Arc;
use std::time::Instant;

use cordon_computer::desktop::DesktopSession;
use cordon_computer::display::Scaler;
use cordon_computer::image::EncodedImage;
use cordon_computer::{Computer, Status};
use cordon_protocol::computer::{Action, ComputerCall};

use crate::env::{EnvAction, Observation, Screen, StepInfo, Trace, TraceStep, Transition, absorb};
use crate::error::{BenchError, Result};
use crate::safety::approves;
use crate::task::{Approvals, Task};

/// Most approval rounds one step may go through (a call of many asking actions).
const MAX_APPROVALS_PER_STEP: usize = 100;

/// One desktop episode being played: reset by [`DesktopEnv::start`], stepped by the
/// scripted policy or a driver, then scored by the checker.
pub struct DesktopEnv {
    task: Arc<Task>,
    computer: Computer<DesktopSession>,
    scaler: Scaler,
    last: Observation,
    first: Option<EncodedImage>,
    steps: Vec<TraceStep>,
    started: Instant,
    /// How vendor safety checks are answered (`None`: approved, as every desktop ask).
    safety_checks: Option<Approvals>,
    done: bool,
}

impl std::fmt::Debug for DesktopEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DesktopEnv")
            .field("task", &self.task.id)
            .field("steps", &self.steps.len())
            .finish_non_exhaustive()
    }
}

impl DesktopEnv {
    /// An episode on `computer`'s display; [`DesktopEnv::open`] takes its first
    /// screenshot.
    pub(crate) fn new(task: Arc<Task>, computer: Computer<DesktopSession>) -> DesktopEnv {
        let scaler = computer.scaler();
        DesktopEnv {
            task,
            computer,
            scaler,
            last: Observation {
                screenshot: None,
                url: String::new(),
                text: None,
            },
            first: None,
            steps: Vec::new(),
            started: Instant::now(),
            safety_checks: None,
            done: false,
        }
    }

    /// Takes the first screenshot; the episode's time starts now.
    pub(crate) async fn open(&mut self) -> Result<()> {
        let first = self
            .computer
            .step(ComputerCall::native(Action::Screenshot), None)
            .await?;
        self.first.clone_from(&first.screenshot);
        self.last.screenshot = first.screenshot;
        self.last.text = first.text;
        self.started = Instant::now();
        Ok(())
    }

    /// The model's display and the screen behind it.
    pub fn screen(&self) -> Screen {
        Screen {
            viewport: self.scaler.viewport,
            display: self.scaler.display,
            dpr: self.scaler.dpr,
        }
    }

    /// What the policy sees now: the last screenshot (the first one before any step).
    pub fn observation(&self) -> &Observation {
        &self.last
    }

    /// Answers the vendor safety checks of later steps with `answer`; `None`: approved,
    /// like every other ask of a desktop episode.
    pub fn answer_safety_checks(&mut self, answer: Option<Approvals>) {
        self.safety_checks = answer;
    }

    /// Runs one call. A call the policy got wrong is a step with `info.status = "error"`;
    /// `Err` means the display broke, or the episode is over (`done`).
    pub async fn step(&mut self, action: EnvAction) -> Result<Transition> {
        let t0 = Instant::now();
        if self.done {
            return Err(BenchError::State(
                "the episode is over: its steps or seconds ran out".into(),
            ));
        }
        let number = u32::try_from(self.steps.len() + 1).unwrap_or(u32::MAX);
        let mut info = StepInfo::new(number, action.clone(), String::new());
        let mut fresh = false;
        match action.decode() {
            Err(error) => info.undecodable(&error),
            Ok(call) => {
                let mut report = self.computer.step(call, None).await?;
                let mut reports = Vec::new();
                let mut rounds = 0;
                while report.status == Status::ApprovalRequired && rounds < MAX_APPROVALS_PER_STEP {
                    rounds += 1;
                    let Some(pending) = report.pending.clone() else {
                        break;
                    };
                    // Desktop tasks have no `approvals`: a rule's ask (a Ctrl+Alt chord under
                    // the default rules) is approved, a vendor check as the policy says.
                    let approve = approves(&pending, Approvals::Approve, self.safety_checks);
                    reports.push((report, Some(approve)));
                    report = if approve {
                        self.computer.approve(&pending.id).await?
                    } else {
                        self.computer.deny(&pending.id).await?
                    };
                }
                fresh = report.screenshot.is_some();
                reports.push((report, None));
                absorb(&mut info, &mut self.last, &reports, self.scaler);
            }
        }
        info.wall_ms = (t0.elapsed().as_secs_f64() * 100_000.0).round() / 100.0;
        self.done = number >= self.task.max_steps
            || self.started.elapsed().as_secs_f64() >= self.task.max_seconds;
        self.steps.push(TraceStep {
            info: info.clone(),
            reward: 0.0,
            screenshot: if fresh {
                self.last.screenshot.clone()
            } else {
                None
            },
        });
        Ok(Transition {
            observation: self.last.clone(),
            reward: 0.0,
            done: self.done,
            info,
        })
    }

    /// Whether a cap ended the episode.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Seconds left of the task's `max_seconds`.
    pub(crate) fn seconds_left(&self) -> f64 {
        self.task.max_seconds - self.started.elapsed().as_secs_f64()
    }

    /// The display's session (for the checker's environment).
    pub(crate) fn session(&self) -> &DesktopSession {
        self.computer.backend()
    }

    /// The episode's record with the checker's `reward` on its last step.
    pub(crate) fn trace(&self, seed: u64, reward: f64) -> Trace {
        let mut steps = self.steps.clone();
        if let Some(step) = steps.last_mut() {
            step.reward = reward;
        }
        Trace {
            task: self.task.id.clone(),
            seed,
            screen: self.screen(),
            start_url: String::new(),
            first: self.first.clone(),
            instruction: None,
            steps,
            reward,
            done: true,
        }
    }

    /// Ends the episode: the display and its programs are closed.
    pub(crate) async fn close(self) {
        let _closed = self.computer.into_backend().close().await;
    }
}
