//! Trajectories: a directory with `session.json` (how the session was set up),
//! `steps.jsonl` (one line per step: the call as sent, what ran in screen coordinates, gate
//! verdicts, status, URL, timings) and `step-NNNN.png|jpg` (the image the model saw).
//! [`replay()`] re-runs one against a fresh session and reports where it diverges.
//!
//! Trajectories are private: the directory is created 0700 and every file Cordon writes in
//! it is 0600 (an existing directory keeps its mode, so `--trajectory .` never changes the
//! working directory; files that already exist are tightened, never widened). Text typed
//! into a field the gate identified as a password field is recorded as [`REDACTED`], in the
//! call, in the vendor JSON as sent and in the screen ops; the step lists those actions in
//! `redacted_actions`, and [`replay()`] types nothing for them.
//!
//! The files: `files` (the directory on disk, its private modes, [`TrajectoryWriter`],
//! [`read_session`]), `redact` (what a trajectory hides: [`REDACTED`], [`redact_call`],
//! [`redact_value`]) and `replay` ([`replay()`] and its report).

mod files;
mod redact;
mod replay;

pub use files::{SESSION, STEPS, TrajectoryWriter, create_private_dir, read_session, tighten};
pub use redact::{REDACTED, redact_call, redact_value, secrets};
pub use replay::{IMAGE_TOLERANCE, ReplayReport, ReplayStep, replay};
