//! The lock one process holds while it installs something fetched into Cordon's cache (the
//! CPython artifacts, benchmark suites' pages), so others wait instead of racing it.

use std::fs::{DirBuilder, File, OpenOptions};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// Why the install lock could not be taken: the path it failed on and the error.
#[derive(Debug)]
pub struct InstallLockError {
    /// The directory or lock file the error is about.
    pub path: PathBuf,
    /// What went wrong there.
    pub error: std::io::Error,
}

/// Creates `root` (0700) if missing and takes the exclusive lock `root/.lock`, waiting for
/// another process that holds it. The lock is released when the returned file is dropped.
pub async fn take_install_lock(root: &Path) -> Result<File, InstallLockError> {
    let failed = |path: &Path| {
        let path = path.to_owned();
        move |error| InstallLockError { path, error }
    };
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(root)
        .map_err(failed(root))?;
    let lock_path = root.join(".lock");
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(failed(&lock_path))?;
    // Blocking, but only ever held for a fetch: wait off the async workers.
    tokio::task::spawn_blocking(move || lock.lock().map(|()| lock))
        .await
        .map_err(|e| std::io::Error::other(format!("the lock task failed: {e}")))
        .and_then(|locked| locked)
        .map_err(failed(&lock_path))
}
