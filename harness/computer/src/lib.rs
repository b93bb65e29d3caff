//! Computer use for Cordon: run a model's UI actions in an isolated Chromium and return the
//! screenshot it should see next.
//!
//! - [`display`]: the model display size and exact model ↔ screen mapping (any DPR);
//! - [`op`]: the screen-space input operations a backend runs;
//! - [`lowering`]: actions lowered to those operations;
//! - [`gate`]: `allow | ask | deny` approval rules on what an action touches;
//! - [`origin`]: the allow/block policy for every request;
//! - [`private_net`]: the private-network address ranges sessions may not reach by default;
//! - [`image`]: the last mile of the screenshot pipeline (SIMD resize, PNG/JPEG);
//! - [`step`]: what a step reports ([`StepReport`], [`Status`], [`SettleEnd`]);
//! - [`backend`]: the [`Backend`] trait a screen implements;
//! - [`engine`]: the step loop ([`Computer`]) over any [`Backend`], with approvals;
//! - [`trajectory`]: JSONL + screenshots per step, and [`trajectory::replay`];
//! - `browser` (feature `browser`, on by default): the Chromium backend;
//! - `desktop` (feature `desktop`): an isolated X display per session (Xvfb + enigo).
//!
//! Actions arrive as `cordon_protocol::computer` types, decoded from any vendor's shape.
//!
//! ```
//! use cordon_computer::display::{Scaler, Size};
//! use cordon_protocol::computer::{CoordSpace, Point};
//! // The model sees 1024×640; the page is 1280×800 CSS px at DPR 2.
//! let s = Scaler::new(Size::new(1024, 640), Size::new(1280, 800), 2.0);
//! let css = s.to_css(Point::new(512, 320), CoordSpace::Display).unwrap();
//! assert_eq!((css.x, css.y), (640.625, 400.625));
//! assert_eq!(s.to_model(css), Point::new(512, 320));
//! // Outside the display is an error the model can correct.
//! let err = s.to_css(Point::new(1024, 0), CoordSpace::Display).unwrap_err();
//! assert!(err.to_string().contains("0..=1023"));
//! ```
//!
//! With the `browser` feature a session runs like this (needs Chromium, so not run here):
//!
//! ```no_run
//! # async fn demo() -> cordon_computer::Result<()> {
//! use cordon_computer::browser::{Browser, BrowserOptions, SessionOptions};
//! use cordon_computer::{Computer, EngineOptions};
//! use cordon_protocol::computer::{decode, Vendor};
//! let browser = Browser::launch(BrowserOptions::default()).await?;
//! let mut opts = SessionOptions::default();
//! opts.start_url = Some("http://127.0.0.1:8000/".into());
//! let session = browser.new_session(opts).await?;
//! let mut computer = Computer::new(session, EngineOptions::default());
//! let call = decode(Vendor::Anthropic, &serde_json::json!(
//!     {"action": "left_click", "coordinate": [100, 200]}))?;
//! let report = computer.step(call, None).await?;
//! println!("{:?} {:?}", report.status, report.current_url);
//! computer.into_backend().close().await?;
//! browser.close().await?;
//! # Ok(()) }
//! ```

pub mod backend;
#[cfg(feature = "browser")]
pub mod browser;
#[cfg(feature = "desktop")]
pub mod desktop;
pub mod display;
pub mod engine;
mod error;
pub mod gate;
pub mod image;
pub mod lowering;
pub mod op;
pub mod origin;
pub mod private_net;
#[cfg(feature = "browser")]
mod socks;
pub mod step;
pub mod trajectory;

pub use backend::Backend;
pub use engine::{Computer, EngineOptions};
pub use error::{ActionError, Error, Result};
pub use step::{PendingApproval, SettleEnd, Status, StepReport};
