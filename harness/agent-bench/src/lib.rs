//! Benchmark mode for Cordon: task suites run through both engines, scored by the harness,
//! with a report people look at.
//!
//! - [`task`]: the suite format (a directory of `task.json` files; `docs/bench.md`) and the
//!   [`builtin`] suite compiled into the binary;
//! - [`env`]: the gym-style interface over the computer engine — [`WebEnv::reset`],
//!   [`WebEnv::step`], [`WebEnv::evaluate`] — whose reward is read from the page;
//! - [`code`]: the same over the sandbox, with a checker program as the reward;
//! - [`policy_env`]: what a policy that drives an episode itself sees of it, web or
//!   desktop alike (the screen, a step in the vendor's own action shape);
//! - [`page_server`]: a loopback server for the tasks' own pages;
//! - [`miniwob`]: the MiniWoB++ suite, its pages fetched from the published package;
//! - [`run`]: parallel, resumable runs that write `results.json`; [`report`]: `report.html`.
//!
//! ```no_run
//! # async fn demo() -> cordon_agent_bench::Result<()> {
//! use std::sync::Arc;
//! use cordon_agent_bench::env::{EnvAction, WebEnv};
//! use cordon_agent_bench::page_server::{PageRoot, PageServer};
//! use cordon_agent_bench::task::Suite;
//! use cordon_computer::browser::{Browser, BrowserOptions};
//!
//! let browser = Browser::launch(BrowserOptions::default()).await?;
//! let pages = Arc::new(PageServer::start(PageRoot::Builtin).await?);
//! let suite = Suite::builtin();
//! let task = Arc::new(suite.entries[0].task.clone().expect("a valid task"));
//! let mut env = WebEnv::new(browser, Some(pages));
//! let first = env.reset(task, 0).await?;
//! println!("{} {:?}", first.url, first.screenshot.map(|s| s.size));
//! let t = env
//!     .step(EnvAction::from_value(serde_json::json!(
//!         {"action": "left_click", "coordinate": [200, 96]})).expect("an action"))
//!     .await?;
//! println!("reward {} done {} status {}", t.reward, t.done, t.info.status);
//! # Ok(()) }
//! ```

pub mod builtin;
pub mod code;
#[cfg(feature = "desktop")]
mod desktop;
#[cfg(feature = "desktop")]
pub mod desktop_env;
mod engines;
pub mod env;
mod episode;
mod error;
pub mod miniwob;
mod options;
pub mod page_server;
pub mod policy_env;
mod progress;
pub mod remote;
pub mod report;
mod results;
mod reward;
pub mod run;
mod safety;
mod script;
pub mod session_pool;
mod shares;
pub mod task;
mod web_reset;

pub use env::{EnvAction, Observation, Transition, WebEnv};
pub use error::{BenchError, PolicyError, Result};
pub use safety::VENDOR_SAFETY_RULE;
