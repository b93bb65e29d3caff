//! What a policy that drives an episode itself sees of it, web or desktop alike: the screen
//! (the last screenshot and the display size the model's coordinates are in) and a step
//! that runs one vendor call in that vendor's own shape ([`EnvAction::format`]), so the
//! coordinates are scaled by the environment, as for every other caller of the engine.
//! A model's loop is written once over [`PolicyEnv`].

use std::future::Future;

use cordon_computer::display::Size;
use cordon_computer::image::EncodedImage;

use crate::env::{EnvAction, Transition, WebEnv};
use crate::error::{BenchError, Result};
use crate::task::Approvals;

/// The screen as the model is about to see it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct EnvView {
    /// At the model's display size (`None` when none was taken yet).
    pub screenshot: Option<EncodedImage>,
    /// The model's display: the space of its coordinates.
    pub display: Size,
    /// The page's address (web episodes).
    pub url: Option<String>,
    /// Which kind of screen it is.
    pub surface: Surface,
}

/// A browser page or a whole desktop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    Browser,
    Desktop,
}

/// An episode a policy steps: a web episode ([`WebEnv`]) or a desktop one
/// (`DesktopEnv`, feature `desktop`).
pub trait PolicyEnv {
    /// The screen now: the last screenshot taken (the reset's before any step).
    fn view(&self) -> Result<EnvView>;
    /// How the vendor safety checks of later steps are answered (`None`: as the task
    /// says); the answer is recorded in each step's `gates`.
    fn answer_safety_checks(&mut self, answer: Option<Approvals>);
    /// Runs one model call (see [`WebEnv::step`]).
    fn act(&mut self, action: EnvAction) -> impl Future<Output = Result<Transition>>;
}

/// The scripted policy: plays `script`'s actions in order until the episode is done; the
/// first action that fails ends it with that error.
pub(crate) async fn play_script<E: PolicyEnv>(env: &mut E, script: Vec<EnvAction>) -> Result<()> {
    for action in script {
        if env.act(action).await?.done {
            break;
        }
    }
    Ok(())
}

impl PolicyEnv for WebEnv {
    fn view(&self) -> Result<EnvView> {
        let (Some(screen), Some(trace)) = (self.screen(), self.trace()) else {
            return Err(BenchError::State("the episode was not reset".into()));
        };
        let last = trace.steps.iter().rev().find(|s| s.screenshot.is_some());
        let url = trace
            .steps
            .last()
            .map_or_else(|| trace.start_url.clone(), |s| s.info.url.clone());
        Ok(EnvView {
            screenshot: last.and_then(|s| s.screenshot.clone()).or(trace.first),
            display: screen.display,
            url: Some(url),
            surface: Surface::Browser,
        })
    }

    fn answer_safety_checks(&mut self, answer: Option<Approvals>) {
        WebEnv::answer_safety_checks(self, answer);
    }

    fn act(&mut self, action: EnvAction) -> impl Future<Output = Result<Transition>> {
        self.step(action)
    }
}

#[cfg(feature = "desktop")]
impl PolicyEnv for crate::desktop_env::DesktopEnv {
    fn view(&self) -> Result<EnvView> {
        Ok(EnvView {
            screenshot: self.observation().screenshot.clone(),
            display: self.screen().display,
            url: None,
            surface: Surface::Desktop,
        })
    }

    fn answer_safety_checks(&mut self, answer: Option<Approvals>) {
        crate::desktop_env::DesktopEnv::answer_safety_checks(self, answer);
    }

    fn act(&mut self, action: EnvAction) -> impl Future<Output = Result<Transition>> {
        self.step(action)
    }
}
