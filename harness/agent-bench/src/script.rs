//! The scripted policy's input: a task's `script.jsonl`, read into actions.

use serde_json::Value;

use crate::env::EnvAction;
use crate::error::{BenchError, Result};
use crate::task::Task;

/// The actions of a task's script: one call per line (blank lines and `#` lines skipped).
pub fn read_script(task: &Task) -> Result<Vec<EnvAction>> {
    let bytes = task
        .file("script.jsonl")
        .ok_or_else(|| BenchError::task(&task.id, "the scripted policy needs its script.jsonl"))?;
    let text = String::from_utf8_lossy(&bytes);
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let value: Value = serde_json::from_str(line).map_err(|e| {
            BenchError::task(
                &task.id,
                format!("script.jsonl line {}: not JSON: {e}", n + 1),
            )
        })?;
        out.push(EnvAction::from_value(value).map_err(|e| {
            BenchError::task(&task.id, format!("script.jsonl line {}: {e}", n + 1))
        })?);
    }
    Ok(out)
}
