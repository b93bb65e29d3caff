//! The desktop backend (feature `desktop`): one isolated X display per session (`Xvfb`),
//! the programs it was asked to launch, input through enigo (XTEST) and capture through
//! x11rb, behind the same [`Backend`](crate::Backend) as the browser, so actions, scaling, gates and
//! trajectories are the browser's.
//!
//! - [`DesktopSession::start`] starts `Xvfb -displayfd` on a free display with its own
//!   cookie, connects, and launches the programs with a clean environment (`HOME` in the
//!   session's directory); every process is stopped with the session, on `close`, on drop
//!   and on a failed start (see `xvfb`).
//! - Settling watches the screen instead of sleeping: XDamage on the root window says when
//!   something was drawn, and `/proc` says whether the X server, the launched programs and
//!   what they started (a terminal's shell and its command) are still running (state
//!   `R`/`D`) or waiting. The step is settled when all have been waiting for two polls in
//!   a row and nothing was drawn for `settle_quiet`; a program that keeps drawing or
//!   spinning ends at `settle_cap` with `settled: false`.
//! - The gates see windows: the element under a point (or holding focus) is
//!   `ElementInfo { tag: "window", text: <title>, name: <WM_CLASS class> }`, so rules can
//!   match titles (`window_title`) as well as action kinds and key chords.
//! - `current_url` is `x11:<title of the focused window>` (`x11:` over the bare root):
//!   a desktop has no URL, and the title is what tells the model where keys go.
//!
//! See docs/desktop.md for the design, the process model and the enigo workarounds.
//!
//! ```no_run
//! # async fn demo() -> cordon_computer::Result<()> {
//! use cordon_computer::desktop::{DesktopOptions, DesktopSession, default_rules};
//! use cordon_computer::{Computer, EngineOptions};
//! use cordon_protocol::computer::{Vendor, decode};
//! let mut opts = DesktopOptions::default(); // 1280×800×24, shown to the model as 1024×640
//! opts.launch = vec!["xterm -geometry 80x24+0+0 -e sh -c 'cat > notes.txt'".into()];
//! let session = DesktopSession::start(opts).await?;
//! let mut engine = EngineOptions::default();
//! engine.rules = default_rules();
//! let mut computer = Computer::new(session, engine);
//! for action in [
//!     serde_json::json!({"action": "left_click", "coordinate": [200, 150]}),
//!     serde_json::json!({"action": "type", "text": "hello äöü €\n"}),
//! ] {
//!     let report = computer.step(decode(Vendor::Anthropic, &action)?, Some(&action)).await?;
//!     println!("{:?} {:?}", report.status, report.current_url); // Ok Some("x11:sh")
//! }
//! computer.into_backend().close().await?; // Xvfb, xterm, its shell and cat all stop
//! # Ok(()) }
//! ```
//!
//! The files, leaves first: `options` ([`DesktopOptions`], [`default_rules`]), `blocking`,
//! `xvfb` (the server and program processes), `x11` (the X connection: windows, capture,
//! keymap), `input` (XTEST input through enigo), `session` ([`DesktopSession`]: start,
//! handles, close), `settle`, `dispatch` (screen ops as input), `capture`, and `backend`
//! (the [`Backend`](crate::Backend) impl).

mod backend;
mod blocking;
mod capture;
mod dispatch;
mod input;
mod options;
mod session;
mod settle;
mod x11;
mod xvfb;

pub use options::{DesktopOptions, default_rules};
pub use session::DesktopSession;
pub use x11::WindowInfo;
pub use xvfb::{MARKER, ProgramState, ProgramStatus, marked_processes};
