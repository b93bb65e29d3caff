//! MiniWoB++ as a shipped suite (`cordon bench --suite miniwob[:TASK,…]`): the published
//! pages of the PyPI package `miniwob`, fetched once into Cordon's cache, served on
//! loopback, each episode seeded as MiniWoB++'s own Python does it, the reward read from the
//! page's own globals, the instruction the page's utterance (`docs/bench.md`).
//!
//! - `tar.rs`: reading the sdist's files;
//! - `package.rs`: the pinned sdist, fetched and verified ([`ensure`], [`PackageError`]);
//! - `suite.rs`: every registered task type as a web task ([`suite`], [`task_names`]);
//! - `solver.rs`: the scripted policy of the task types it knows ([`solvable`]).

mod package;
mod solver;
mod suite;
mod tar;

pub use package::{
    PACKAGE, Package, PackageError, SDIST, SDIST_ENV, SDIST_SHA256, Source, VERSION, ensure,
    ensure_default, install_dir,
};
pub(crate) use solver::play;
pub use solver::{knows, planner, solvable};
pub use suite::{SUITE, is_package_task, suite, task, task_names};
