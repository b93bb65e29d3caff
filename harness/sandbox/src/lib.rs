//! Cordon's WebAssembly sandbox: runs model-written Python and JavaScript in wasmtime with
//! fixed limits, where the only way out is the tool bridge.
//!
//! - [`Sandbox`] owns the engine and the pre-initialized guest images (loaded from a disk
//!   cache; made on first use).
//! - [`Sandbox::execute`] runs code in a fresh instance; [`Sandbox::session`] keeps one
//!   instance so variables survive from one execution to the next.
//! - An [`Execution`] streams [`ExecutionEvent`]s, takes client-tool results and approval
//!   decisions while it is suspended, and ends with an [`ExecutionResult`].
//! - [`Session::pause`] captures a session's state as a [`PausedSession`] (bytes to store
//!   anywhere) and frees its instance; [`Sandbox::resume`] brings it back, on this host or
//!   another running the same build.
//! - A [`Workspace`] is the guest's `/workspace`: files in memory, with quotas, that the
//!   host writes and reads around executions (`ExecutionRequest::workspace`).
//!
//! Inside, arrows point one way: `config`, `error` and the leaves (`meter`, `workspace`,
//! `pages`, `write_tracking`, `cache`) first; then the store's data (`host_state`) with
//! the WASI files (`wasi_fs`) and the bridge; the engines; images and their instances
//! (`image`, `bridge_image`, `cpython`, `pool`); the driver; and on top `sandbox`,
//! `execution` and `session`. `docs/architecture.md` has the map.
//!
//! ```no_run
//! # async fn demo() -> Result<(), cordon_sandbox::SandboxError> {
//! use std::sync::Arc;
//! use cordon_core::{Dispatcher, ToolRegistry};
//! use cordon_protocol::execution::Language;
//! use cordon_sandbox::{ExecutionRequest, Sandbox, SandboxConfig};
//!
//! let sandbox = Sandbox::new(SandboxConfig::default()).await?;
//! let tools = Dispatcher::new(Arc::new(ToolRegistry::empty()));
//! let result = sandbox
//!     .execute(ExecutionRequest::new(Language::PythonLite, "print(6 * 7)", tools))
//!     .wait()
//!     .await;
//! assert_eq!(result.stdout, "42\n");
//!
//! // Files in, files out.
//! let workspace = cordon_sandbox::Workspace::new(cordon_sandbox::Quota { bytes: 1 << 20, files: 100 });
//! workspace.write("in.csv", b"a,b\n1,2\n").unwrap();
//! let code = "import csv\nrows = list(csv.reader(open('in.csv')))\nopen('n.txt', 'w').write(str(len(rows)))";
//! let tools = Dispatcher::new(Arc::new(ToolRegistry::empty()));
//! let request = ExecutionRequest::new(Language::PythonLite, code, tools).workspace(workspace.clone());
//! sandbox.execute(request).wait().await;
//! assert_eq!(workspace.read("n.txt").unwrap(), b"2");
//! # Ok(()) }
//! ```
//!
//! [`ExecutionEvent`]: cordon_protocol::execution::ExecutionEvent
//! [`ExecutionResult`]: cordon_protocol::execution::ExecutionResult

mod bridge;
mod bridge_image;
mod cache;
mod config;
pub mod cpython;
mod driver;
mod ending;
mod engine;
mod error;
mod execution;
mod hmac;
mod host_state;
mod image;
mod install_lock;
mod meter;
mod output_budget;
mod package_index;
mod paused;
mod pool;
mod sandbox;
mod session;
mod snapshot;
mod spec_setters;
mod touched_pages;
mod wasi_fs;
mod workspace;
mod write_tracking;

pub use cache::default_cache_dir;
pub use config::SandboxConfig;
pub use error::SandboxError;
pub use execution::{Execution, ExecutionControl, ExecutionRequest, ResultFuture};
pub use install_lock::{InstallLockError, take_install_lock};
pub use package_index::{find_on_index, link_to};
pub use paused::{BlobError, PauseError, PausedSession, ResumeError};
pub use sandbox::Sandbox;
pub use session::{Session, SessionSpec};
pub use workspace::{FileEntry, GUEST_ROOT, Quota, Workspace, WorkspaceError, split_path};
