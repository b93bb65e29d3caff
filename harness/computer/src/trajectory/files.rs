//! The trajectory directory on disk: its file names, its private modes (0700 directory,
//! 0600 files), [`TrajectoryWriter`] appending one JSONL line and one image per step, and
//! reading `session.json` back.

use super::redact::{redact_call, redact_value, secrets};
use crate::error::{Error, Result};
use crate::step::StepReport;
use cordon_protocol::computer::ComputerCall;
use serde_json::{Value, json};
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

pub const STEPS: &str = "steps.jsonl";
pub const SESSION: &str = "session.json";

/// Mode of the trajectory directory when Cordon creates it.
const DIR_MODE: u32 = 0o700;
/// Mode of every file Cordon writes in it.
const FILE_MODE: u32 = 0o600;

pub(super) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Trajectory {
        path: path.display().to_string(),
        source,
    }
}

/// Appends steps to a trajectory directory.
#[derive(Debug)]
pub struct TrajectoryWriter {
    dir: PathBuf,
    steps: std::fs::File,
}

/// Creates `dir` (and missing parents) 0700. An existing directory is left as it is: it
/// may be one the user pointed at (`--trajectory .`), and its mode is theirs.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)
}

/// Opens `path` for writing, created 0600; an existing file loses its group and other
/// permission bits (never gains any).
fn private_file(path: &Path, append: bool) -> std::io::Result<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .mode(FILE_MODE)
        .open(path)?;
    tighten(&file)?;
    Ok(file)
}

/// Clears the group and other bits of an open file (the mode given at creation only applies
/// to new files, and the process umask could only narrow it further).
pub fn tighten(file: &std::fs::File) -> std::io::Result<()> {
    let mode = file.metadata()?.permissions().mode();
    if mode & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(mode & 0o7700))?;
    }
    Ok(())
}

impl TrajectoryWriter {
    /// Creates (or appends to) `dir`, writing `session` as `session.json`.
    pub fn create(dir: impl Into<PathBuf>, session: &Value) -> Result<Self> {
        let dir = dir.into();
        create_private_dir(&dir).map_err(io_err(&dir))?;
        let meta = dir.join(SESSION);
        let text = serde_json::to_string_pretty(session)
            .map_err(|e| Error::Config(format!("session metadata: {e}")))?;
        private_file(&meta, false)
            .and_then(|mut file| file.write_all(text.as_bytes()))
            .map_err(io_err(&meta))?;
        let path = dir.join(STEPS);
        let steps = private_file(&path, true).map_err(io_err(&path))?;
        Ok(Self { dir, steps })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes the screenshot and one JSONL line; returns the screenshot's path.
    pub fn append(
        &mut self,
        report: &StepReport,
        call: &ComputerCall,
        raw: Option<&Value>,
    ) -> Result<Option<PathBuf>> {
        let mut line =
            serde_json::to_value(report).map_err(|e| Error::Config(format!("step report: {e}")))?;
        let recorded = redact_call(call, &report.redacted_actions);
        line["call"] =
            serde_json::to_value(&recorded).map_err(|e| Error::Config(format!("call: {e}")))?;
        if let Some(raw) = raw {
            let mut sent = raw.clone();
            redact_value(&mut sent, &secrets(call, &report.redacted_actions));
            line["sent"] = sent;
        }
        let mut shot = None;
        if let Some(img) = &report.screenshot {
            let name = format!("step-{:04}.{}", report.step, img.format.extension());
            let path = self.dir.join(&name);
            private_file(&path, false)
                .and_then(|mut file| file.write_all(&img.data))
                .map_err(io_err(&path))?;
            line["screenshot"] = json!({
                "path": name, "width": img.size.width, "height": img.size.height,
            });
            shot = Some(path);
        }
        let mut text = line.to_string();
        text.push('\n');
        self.steps
            .write_all(text.as_bytes())
            .map_err(io_err(&self.dir))?;
        Ok(shot)
    }
}

/// Reads `session.json`.
pub fn read_session(dir: &Path) -> Result<Value> {
    let path = dir.join(SESSION);
    let text = std::fs::read_to_string(&path).map_err(io_err(&path))?;
    serde_json::from_str(&text).map_err(|e| Error::Config(format!("{}: {e}", path.display())))
}
