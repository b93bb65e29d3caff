//! [`RemoteEnv`]: a web episode running on a Cordon server, stepped over its `/v1/envs`
//! API — the same [`PolicyEnv`] a local [`WebEnv`](crate::env::WebEnv) is, so scripts and
//! model policies drive it alike. It keeps the episode's trace as the answers come (each
//! step's info and screenshot), so the run records it as it records a local one.

use base64::Engine as _;
use cordon_computer::display::Size;
use cordon_computer::image::{EncodedImage, ImageFormat};
use serde_json::Value;

use super::client::{CallError, EnvClient};
use crate::env::{EnvAction, Observation, Screen, StepInfo, Trace, TraceStep, Transition};
use crate::error::{BenchError, Result};
use crate::policy_env::{EnvView, PolicyEnv, Surface};
use crate::task::Approvals;

/// An episode on a server.
#[derive(Debug)]
pub struct RemoteEnv {
    client: EnvClient,
    id: String,
    task: String,
    seed: u64,
    screen: Screen,
    instruction: Option<String>,
    start_url: String,
    first: Option<EncodedImage>,
    last: Observation,
    steps: Vec<TraceStep>,
    reward: f64,
    done: bool,
    safety_checks: Option<Approvals>,
    /// Why the server could not be reached, once it could not.
    unreachable: Option<String>,
}

/// A screenshot as `/v1/envs` sends it: `{media_type, data (base64), width, height}`.
fn screenshot(value: &Value) -> Option<EncodedImage> {
    let format = value["media_type"]
        .as_str()
        .and_then(|m| m.strip_prefix("image/"))
        .and_then(ImageFormat::parse)?;
    let data = base64::engine::general_purpose::STANDARD
        .decode(value["data"].as_str()?)
        .ok()?;
    let size = Size::new(
        u32::try_from(value["width"].as_u64()?).ok()?,
        u32::try_from(value["height"].as_u64()?).ok()?,
    );
    Some(EncodedImage {
        data,
        size,
        format,
        resized: false,
    })
}

fn observation(value: &Value) -> Observation {
    Observation {
        screenshot: screenshot(&value["screenshot"]),
        url: value["url"].as_str().unwrap_or_default().to_owned(),
        text: value["text"].as_str().map(str::to_owned),
    }
}

fn malformed(server: &str, what: &str) -> BenchError {
    BenchError::Remote {
        server: server.to_owned(),
        reason: format!("its answer has no valid `{what}`"),
    }
}

impl RemoteEnv {
    /// Creates the environment on the server: `task` of `suite` reset with `seed`.
    pub(crate) async fn create(
        client: EnvClient,
        suite: &str,
        task: &str,
        seed: u64,
        dpr: Option<f64>,
    ) -> std::result::Result<RemoteEnv, CallError> {
        let created = client.create(suite, task, seed, dpr).await?;
        let bad = |what: &str| CallError::Unreachable(format!("its answer has no valid `{what}`"));
        let id = created["id"].as_str().ok_or_else(|| bad("id"))?.to_owned();
        let screen = &created["screen"];
        let size = |v: &Value| serde_json::from_value::<Size>(v.clone()).ok();
        let screen = Screen {
            viewport: size(&screen["viewport"]).ok_or_else(|| bad("screen"))?,
            display: size(&screen["display"]).ok_or_else(|| bad("screen"))?,
            dpr: screen["dpr"].as_f64().unwrap_or(1.0),
        };
        let last = observation(&created["observation"]);
        Ok(RemoteEnv {
            id,
            task: task.to_owned(),
            seed,
            screen,
            instruction: created["instruction"].as_str().map(str::to_owned),
            start_url: last.url.clone(),
            first: last.screenshot.clone(),
            last,
            steps: Vec::new(),
            reward: 0.0,
            done: created["done"].as_bool().unwrap_or(false),
            safety_checks: None,
            unreachable: None,
            client,
        })
    }

    /// The environment's id on its server.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The server's URL.
    pub fn server(&self) -> &str {
        self.client.base()
    }

    /// What the page worded as the task (tasks with an `instruction`).
    pub fn instruction(&self) -> Option<String> {
        self.instruction.clone()
    }

    /// Whether the episode is over (solved, or a cap).
    pub fn done(&self) -> bool {
        self.done
    }

    /// Why the server could not be reached, once a call found it so.
    pub(crate) fn unreachable(&self) -> Option<&str> {
        self.unreachable.as_deref()
    }

    fn failed(&mut self, error: CallError) -> BenchError {
        if let CallError::Unreachable(reason) = &error {
            self.unreachable = Some(reason.clone());
        }
        error.into_bench(self.client.base())
    }

    /// Runs one model call on the server (see [`WebEnv::step`](crate::env::WebEnv::step)).
    pub async fn step(&mut self, action: EnvAction) -> Result<Transition> {
        let answer = match self
            .client
            .step(&self.id, &action, self.safety_checks)
            .await
        {
            Ok(answer) => answer,
            Err(error) => return Err(self.failed(error)),
        };
        let server = self.client.base().to_owned();
        let info: StepInfo = serde_json::from_value(answer["info"].clone())
            .map_err(|_| malformed(&server, "info"))?;
        let reward = answer["reward"]
            .as_f64()
            .ok_or_else(|| malformed(&server, "reward"))?;
        let done = answer["done"].as_bool().unwrap_or(false);
        let seen = observation(&answer["observation"]);
        // The answer repeats the last screenshot when a step took none (an action that did
        // not decode): the trace keeps only new ones.
        let fresh = seen.screenshot.is_some()
            && seen.screenshot.as_ref().map(|s| &s.data)
                != self.last.screenshot.as_ref().map(|s| &s.data);
        self.steps.push(TraceStep {
            info: info.clone(),
            reward,
            screenshot: if fresh { seen.screenshot.clone() } else { None },
        });
        self.last = seen;
        self.reward = reward;
        self.done = done;
        Ok(Transition {
            observation: self.last.clone(),
            reward,
            done,
            info,
        })
    }

    /// Reads the reward from the page now.
    pub async fn evaluate(&mut self) -> Result<f64> {
        match self.client.evaluate(&self.id).await {
            Ok(reward) => {
                self.reward = reward;
                Ok(reward)
            }
            Err(error) => Err(self.failed(error)),
        }
    }

    /// The episode's record so far, as a local episode's.
    pub fn trace(&self) -> Trace {
        Trace {
            task: self.task.clone(),
            seed: self.seed,
            screen: self.screen.clone(),
            start_url: self.start_url.clone(),
            first: self.first.clone(),
            instruction: self.instruction.clone(),
            steps: self.steps.clone(),
            reward: self.reward,
            done: self.done,
        }
    }

    /// Closes the environment on its server (a server that is gone has closed it already).
    pub async fn close(&mut self) {
        if self.unreachable.is_none() {
            let _closed = self.client.delete(&self.id).await;
        }
    }
}

impl PolicyEnv for RemoteEnv {
    fn view(&self) -> Result<EnvView> {
        Ok(EnvView {
            screenshot: self.last.screenshot.clone(),
            display: self.screen.display,
            url: Some(self.last.url.clone()),
            surface: Surface::Browser,
        })
    }

    fn answer_safety_checks(&mut self, answer: Option<Approvals>) {
        self.safety_checks = answer;
    }

    fn act(&mut self, action: EnvAction) -> impl Future<Output = Result<Transition>> {
        self.step(action)
    }
}
