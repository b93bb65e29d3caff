//! [`replay`]: re-runs a recorded trajectory against a fresh session, resolving approvals
//! the way they were resolved, and reports where it diverges ([`ReplayReport`]).

use super::files::{STEPS, io_err};
use crate::backend::Backend;
use crate::engine::Computer;
use crate::error::{Error, Result};
use crate::image::decode_rgb;
use crate::step::{Status, StepReport};
use cordon_protocol::computer::{Action, ComputerCall};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;

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
    /// Actions whose typed text was redacted (see [`REDACTED`](super::REDACTED)).
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
