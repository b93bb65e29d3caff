//! Trajectories: a directory with `session.json` (how the session was set up),
//! `steps.jsonl` (one line per step: the call as sent, what ran in screen coordinates, gate
//! verdicts, status, URL, timings) and `step-NNNN.png|jpg` (the image the model saw).
//! [`replay`] re-runs one against a fresh session and reports where it diverges.
//!
//! Trajectories are private: the directory is created 0700 and every file Cordon writes in
//! it is 0600 (an existing directory keeps its mode, so `--trajectory .` never changes the
//! working directory; files that already exist are tightened, never widened). Text typed
//! into a field the gate identified as a password field is recorded as [`REDACTED`], in the
//! call, in the vendor JSON as sent and in the screen ops; the step lists those actions in
//! `redacted_actions`, and [`replay`] types nothing for them.

use crate::engine::{Backend, Computer, Status, StepReport};
use crate::error::{Error, Result};
use crate::image::decode_rgb;
use cordon_protocol::computer::{Action, ComputerCall};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

pub const STEPS: &str = "steps.jsonl";
pub const SESSION: &str = "session.json";

/// What a trajectory shows instead of text typed into a password field.
pub const REDACTED: &str = "[redacted]";

/// Mode of the trajectory directory when Cordon creates it.
const DIR_MODE: u32 = 0o700;
/// Mode of every file Cordon writes in it.
const FILE_MODE: u32 = 0o600;

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
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

/// `call` as a trajectory records it: the text of each `type` action at the indices in
/// `redacted` (the gate saw it go into a password field) replaced by [`REDACTED`].
pub fn redact_call(call: &ComputerCall, redacted: &[usize]) -> ComputerCall {
    let mut call = call.clone();
    for &index in redacted {
        if let Some(Action::Type { text, .. }) = call.actions.get_mut(index) {
            *text = REDACTED.to_owned();
        }
    }
    call
}

/// The typed texts [`redact_call`] hides (non-empty ones only).
pub fn secrets<'a>(call: &'a ComputerCall, redacted: &[usize]) -> Vec<&'a str> {
    redacted
        .iter()
        .filter_map(|&index| match call.actions.get(index) {
            Some(Action::Type { text, .. }) if !text.is_empty() => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// Replaces every occurrence of each secret in the strings (and keys) of `value`, such as
/// the vendor JSON a call arrived in, whose shape differs per vendor.
pub fn redact_value(value: &mut Value, secrets: &[&str]) {
    if secrets.is_empty() {
        return;
    }
    let scrub = |text: &str| {
        secrets.iter().fold(text.to_owned(), |text, secret| {
            text.replace(secret, REDACTED)
        })
    };
    match value {
        Value::String(text) => {
            if secrets.iter().any(|secret| text.contains(secret)) {
                *text = scrub(text);
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| redact_value(item, secrets)),
        Value::Object(map) => {
            let keyed = map
                .keys()
                .any(|key| secrets.iter().any(|s| key.contains(s)));
            if keyed {
                *map = std::mem::take(map)
                    .into_iter()
                    .map(|(key, value)| (scrub(&key), value))
                    .collect();
            }
            map.values_mut()
                .for_each(|item| redact_value(item, secrets));
        }
        _ => {}
    }
}

/// Reads `session.json`.
pub fn read_session(dir: &Path) -> Result<Value> {
    let path = dir.join(SESSION);
    let text = std::fs::read_to_string(&path).map_err(io_err(&path))?;
    serde_json::from_str(&text).map_err(|e| Error::Config(format!("{}: {e}", path.display())))
}

/// One recorded step.
#[derive(Debug, Clone, Deserialize)]
struct Recorded {
    step: u64,
    status: Status,
    call: ComputerCall,
    #[serde(default)]
    current_url: Option<String>,
    #[serde(default)]
    resolves: Option<String>,
    #[serde(default)]
    pending: Option<Value>,
    #[serde(default)]
    screenshot: Option<Value>,
    /// Actions whose typed text was redacted (see [`REDACTED`]).
    #[serde(default)]
    redacted_actions: Vec<usize>,
}

/// How one replayed step compares with the recording.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ReplayStep {
    pub step: u64,
    pub recorded_status: Status,
    pub status: Status,
    pub recorded_url: Option<String>,
    pub url: Option<String>,
    /// Mean absolute pixel difference, 0 (same) to 1, when both steps have a screenshot.
    pub image_diff: Option<f64>,
    /// Why it diverged; empty if it did not.
    pub divergence: Vec<String>,
    /// Actions of this step whose typed text was redacted in the recording; they were
    /// replayed typing nothing (their click, clear and Enter still ran).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub redacted_actions: Vec<usize>,
}

/// The replay as a whole.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ReplayReport {
    pub steps: Vec<ReplayStep>,
    /// The first diverging step.
    pub first_divergence: Option<u64>,
}

/// Screens differing by more than this (mean absolute difference) count as diverged.
pub const IMAGE_TOLERANCE: f64 = 0.02;

fn image_diff(a: &[u8], b: &[u8]) -> Option<f64> {
    let (sa, pa) = decode_rgb(a).ok()?;
    let (sb, pb) = decode_rgb(b).ok()?;
    if sa != sb {
        return Some(1.0);
    }
    let sum: u64 = pa
        .iter()
        .zip(&pb)
        .map(|(x, y)| u64::from(x.abs_diff(*y)))
        .sum();
    Some(sum as f64 / (pa.len().max(1) as f64 * 255.0))
}

/// A recorded call as replay runs it: redacted typed text becomes no text at all, so a
/// replay neither knows the secret nor types the placeholder into the field.
fn replayable(call: &ComputerCall, redacted: &[usize]) -> ComputerCall {
    let mut call = call.clone();
    for &index in redacted {
        if let Some(Action::Type { text, .. }) = call.actions.get_mut(index) {
            text.clear();
        }
    }
    call
}

/// Re-executes a recorded trajectory on `computer` (a fresh session set up like the
/// recorded one), resolving approvals the way they were resolved.
pub async fn replay<B: Backend>(computer: &mut Computer<B>, dir: &Path) -> Result<ReplayReport> {
    let path = dir.join(STEPS);
    let text = std::fs::read_to_string(&path).map_err(io_err(&path))?;
    let mut recorded = Vec::new();
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let r: Recorded = serde_json::from_str(line)
            .map_err(|e| Error::Config(format!("{}:{}: {e}", path.display(), n + 1)))?;
        recorded.push(r);
    }
    let mut steps = Vec::new();
    let mut first = None;
    for rec in &recorded {
        let report = if rec.resolves.is_some() {
            match computer.pending_id().map(str::to_owned) {
                Some(id) if rec.status == Status::Denied => computer.deny(&id).await?,
                Some(id) => computer.approve(&id).await?,
                None => {
                    let mut r = StepReport::from(Error::Config("nothing to resolve".into()));
                    r.step = rec.step;
                    r
                }
            }
        } else {
            computer
                .step(replayable(&rec.call, &rec.redacted_actions), None)
                .await?
        };
        let mut divergence = Vec::new();
        if report.status != rec.status {
            divergence.push(format!(
                "status {:?}, recorded {:?}",
                report.status, rec.status
            ));
        }
        if rec.current_url.is_some() && report.current_url != rec.current_url {
            divergence.push(format!(
                "url {:?}, recorded {:?}",
                report.current_url, rec.current_url
            ));
        }
        if rec.pending.is_some() != report.pending.is_some() {
            divergence.push("approval request differs".into());
        }
        let recorded_image = rec
            .screenshot
            .as_ref()
            .and_then(|s| s["path"].as_str())
            .and_then(|p| std::fs::read(dir.join(p)).ok());
        let diff = match (&recorded_image, &report.screenshot) {
            (Some(a), Some(b)) => image_diff(a, &b.data),
            _ => None,
        };
        if let Some(d) = diff
            && d > IMAGE_TOLERANCE
        {
            divergence.push(format!("screen differs by {:.1}%", d * 100.0));
        }
        if !divergence.is_empty() && first.is_none() {
            first = Some(rec.step);
        }
        steps.push(ReplayStep {
            step: rec.step,
            recorded_status: rec.status,
            status: report.status,
            recorded_url: rec.current_url.clone(),
            url: report.current_url.clone(),
            image_diff: diff,
            divergence,
            redacted_actions: rec.redacted_actions.clone(),
        });
    }
    Ok(ReplayReport {
        steps,
        first_divergence: first,
    })
}
