//! The script upstream: a recorded model replaying turns from a JSONL file.
//!
//! Each non-empty line not starting with `#` is one assistant turn in the Anthropic
//! Messages response shape (`content` required), optionally with `"expect"`: a pattern the
//! request must match (see [`matches`]). Lines are used in order, one per model call, and
//! the script starts over after its last line.

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use cordon_protocol::conversation::{Request, Turn, anthropic};
use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::upstream::{Credential, Upstream, UpstreamError};

/// A script that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScriptError {
    /// The file could not be read.
    #[error("cannot read script {path}: {source}")]
    Read {
        /// The path as given.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A line is not a turn.
    #[error("script {path} line {line}: {reason}")]
    Line {
        /// The path as given.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// No turns at all.
    #[error("script {0} has no turns")]
    Empty(String),
}

#[derive(Debug, Clone)]
struct Line {
    number: usize,
    expect: Option<Value>,
    turn: Turn,
}

/// A recorded model.
#[derive(Debug)]
pub struct ScriptUpstream {
    name: String,
    lines: Vec<Line>,
    next: Mutex<usize>,
    ids: AtomicU64,
}

impl ScriptUpstream {
    /// Reads a script file.
    pub fn from_file(path: &Path) -> Result<Self, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses script text; `name` is used in messages.
    pub fn parse(text: &str, name: &str) -> Result<Self, ScriptError> {
        let mut lines = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            let raw = raw.trim();
            if raw.is_empty() || raw.starts_with('#') {
                continue;
            }
            let error = |reason: String| ScriptError::Line {
                path: name.to_owned(),
                line: index + 1,
                reason,
            };
            let mut value: Value =
                serde_json::from_str(raw).map_err(|e| error(format!("not JSON: {e}")))?;
            let Some(object) = value.as_object_mut() else {
                return Err(error("expected a JSON object".into()));
            };
            let expect = object.remove("expect");
            if !object.get("content").is_some_and(Value::is_array) {
                return Err(error("`content` (an array of blocks) is required".into()));
            }
            let has_tool_use = object["content"]
                .as_array()
                .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_use"));
            object.entry("type").or_insert(json!("message"));
            object.entry("role").or_insert(json!("assistant"));
            object.entry("model").or_insert(json!("cordon-script"));
            object
                .entry("stop_reason")
                .or_insert(json!(if has_tool_use { "tool_use" } else { "end_turn" }));
            object
                .entry("usage")
                .or_insert(json!({"input_tokens": 0, "output_tokens": 0}));
            let turn = anthropic::decode_response(&value).map_err(|e| error(e.to_string()))?;
            lines.push(Line {
                number: index + 1,
                expect,
                turn,
            });
        }
        if lines.is_empty() {
            return Err(ScriptError::Empty(name.to_owned()));
        }
        Ok(ScriptUpstream {
            name: name.to_owned(),
            lines,
            next: Mutex::new(0),
            ids: AtomicU64::new(0),
        })
    }

    fn take(&self) -> Line {
        let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        let line = self.lines[*next % self.lines.len()].clone();
        *next = (*next + 1) % self.lines.len();
        line
    }

    fn answer(&self, request: &Request) -> Result<Turn, UpstreamError> {
        let line = self.take();
        if let Some(expect) = &line.expect {
            let sent = anthropic::encode_request(request);
            if !matches(expect, &sent) {
                return Err(UpstreamError::Status {
                    status: 500,
                    message: format!(
                        "script {} line {}: the request does not match its `expect` pattern {}",
                        self.name, line.number, expect
                    ),
                });
            }
        }
        let mut turn = line.turn;
        if turn.id.is_empty() {
            let n = self.ids.fetch_add(1, Ordering::Relaxed);
            turn.id = format!("msg_script_{n:06}");
        }
        if !request.model.is_empty() && turn.model == "cordon-script" {
            turn.model = request.model.clone();
        }
        Ok(turn)
    }
}

/// Whether `value` matches `pattern`: objects when every key of the pattern matches,
/// arrays when every pattern element matches some element, anything else by equality.
pub fn matches(pattern: &Value, value: &Value) -> bool {
    match (pattern, value) {
        (Value::Object(p), Value::Object(v)) => p
            .iter()
            .all(|(k, pv)| v.get(k).is_some_and(|vv| matches(pv, vv))),
        (Value::Array(p), Value::Array(v)) => p.iter().all(|pe| v.iter().any(|ve| matches(pe, ve))),
        // A string pattern also matches a message whose content is that string.
        (p, v) => p == v,
    }
}

impl Upstream for ScriptUpstream {
    fn call<'a>(
        &'a self,
        request: &'a Request,
        _credential: Option<&'a Credential>,
    ) -> BoxFuture<'a, Result<Turn, UpstreamError>> {
        Box::pin(std::future::ready(self.answer(request)))
    }

    fn describe(&self) -> String {
        format!("script={}", self.name)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn patterns_match_subsets() {
        let v =
            json!({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant"}], "n": 1});
        assert!(matches(&json!({"messages": [{"role": "assistant"}]}), &v));
        assert!(!matches(&json!({"messages": [{"role": "tool"}]}), &v));
        assert!(!matches(&json!({"n": 2}), &v));
    }

    #[test]
    fn lines_default_their_stop_reason_and_cycle() {
        let script = ScriptUpstream::parse(
            "# comment\n{\"content\": [{\"type\": \"tool_use\", \"id\": \"t\", \"name\": \"f\", \"input\": {}}]}\n\n{\"content\": [{\"type\": \"text\", \"text\": \"done\"}]}\n",
            "test",
        )
        .unwrap();
        let request = Request::default();
        let first = script.answer(&request).unwrap();
        assert_eq!(
            first.stop_reason,
            Some(cordon_protocol::conversation::StopReason::ToolUse)
        );
        let second = script.answer(&request).unwrap();
        assert_eq!(
            second.stop_reason,
            Some(cordon_protocol::conversation::StopReason::EndTurn)
        );
        assert_eq!(script.answer(&request).unwrap().content, first.content);
    }
}
