//! Gemini streams (`streamGenerateContent?alt=sse`): `data:` lines without event names,
//! each a `GenerateContentResponse` holding the next parts of the first candidate; the
//! last carries `finishReason` and `usageMetadata`. A turn as chunks ([`gemini_events`])
//! and the accumulator that rebuilds it ([`GeminiAccumulator`]); the live encoder for a
//! Gemini client is in `live_gemini.rs`.
//!
//! Gemini cuts text anywhere: consecutive text parts (and consecutive thought parts) are
//! one part until one carries a thought signature, which ends it. Function calls arrive
//! whole, so a call is complete as soon as its chunk is read.

use serde_json::{Map, Value, json};

use super::delta::{BlockKind, Delta, arguments_text};
use super::event::{Accumulator, Event, Progress, Result, event, upstream_error};
use super::limits::{Budget, StreamLimits};
use crate::conversation::gemini_parts::{RESPONSE_POSITION, decode_response_part};
use crate::conversation::{ContentBlock, ConversionError, Turn, Vendor, gemini};

/// A turn as `streamGenerateContent` chunks: one per part, the last with the finish
/// reason and usage. Gemini's events have no name.
pub fn gemini_events(turn: &Turn) -> Vec<Event> {
    let response = gemini::encode_response(turn);
    let parts = response["candidates"][0]["content"]["parts"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let count = parts.len().max(1);
    (0..count)
        .map(|i| {
            let mut chunk = if i + 1 == count {
                response.clone()
            } else {
                json!({
                    "candidates": [{"index": 0}],
                    "modelVersion": response["modelVersion"],
                    "responseId": response["responseId"],
                })
            };
            let part = parts.get(i).map_or(json!([]), |p| json!([p]));
            chunk["candidates"][0]["content"] = json!({"role": "model", "parts": part});
            event("", chunk)
        })
        .collect()
}

/// One part being rebuilt, with the live block it opened.
#[derive(Debug)]
struct OpenPart {
    part: Map<String, Value>,
    /// The block index its deltas use, while it is open.
    index: Option<usize>,
}

/// Rebuilds a turn from `streamGenerateContent` chunks.
#[derive(Debug, Default)]
pub struct GeminiAccumulator {
    head: Map<String, Value>,
    /// The first candidate's fields other than its content.
    candidate: Map<String, Value>,
    parts: Vec<OpenPart>,
    usage: Option<Value>,
    started: bool,
    done: bool,
    /// Live blocks started so far (the next block's index).
    blocks: usize,
    /// Where calls without an id are numbered (see [`gemini::decode_response_at`]).
    position: Option<String>,
    budget: Budget,
}

/// Whether a part is text (or thought text) that the next text piece may still extend.
fn mergeable(part: &Map<String, Value>) -> bool {
    part.get("text").is_some_and(Value::is_string)
        && !part.contains_key("thoughtSignature")
        && !part.contains_key("thought_signature")
        && part.keys().all(|k| k == "text" || k == "thought")
}

fn is_thought(part: &Map<String, Value>) -> bool {
    part.get("thought") == Some(&Value::Bool(true))
}

impl GeminiAccumulator {
    /// An accumulator keeping to `limits` instead of the defaults.
    pub fn with_limits(limits: StreamLimits) -> Self {
        GeminiAccumulator {
            budget: Budget::new(limits),
            ..Self::default()
        }
    }

    /// An accumulator numbering calls without an id under `position`, as
    /// [`gemini::decode_response_at`] does.
    pub fn at_position(position: &str) -> Self {
        GeminiAccumulator {
            position: Some(position.to_owned()),
            ..Self::default()
        }
    }

    fn position(&self) -> &str {
        self.position.as_deref().unwrap_or(RESPONSE_POSITION)
    }

    fn decode(&self) -> Result<Turn> {
        gemini::decode_response_at(&self.response(), self.position())
    }

    /// The chunks so far as one response.
    fn response(&self) -> Value {
        let mut candidate = self.candidate.clone();
        let parts: Vec<Value> = self
            .parts
            .iter()
            .map(|p| Value::Object(p.part.clone()))
            .collect();
        candidate.insert("content".into(), json!({"role": "model", "parts": parts}));
        let mut response = self.head.clone();
        response.insert("candidates".into(), json!([candidate]));
        if let Some(usage) = &self.usage {
            response.insert("usageMetadata".into(), usage.clone());
        }
        Value::Object(response)
    }

    fn next_block(&mut self) -> usize {
        self.blocks += 1;
        self.blocks - 1
    }

    /// Closes the last part's live block: its stop, then its signature's block if any.
    fn close_last(&mut self, deltas: &mut Vec<Delta>) -> Result<()> {
        let at = self.parts.len().saturating_sub(1);
        let Some(open) = self.parts.last_mut() else {
            return Ok(());
        };
        let Some(index) = open.index.take() else {
            return Ok(());
        };
        let part = Value::Object(open.part.clone());
        let position = self.position.as_deref().unwrap_or(RESPONSE_POSITION);
        let mut blocks = decode_response_part(&part, position, at)?.into_iter();
        if let Some(block) = blocks.next() {
            deltas.push(Delta::BlockStop { index, block });
        }
        for block in blocks {
            let index = self.next_block();
            deltas.push(Delta::BlockStart {
                index,
                kind: BlockKind::Whole(block.clone()),
            });
            deltas.push(Delta::BlockStop { index, block });
        }
        Ok(())
    }

    /// Takes one part of a chunk: extends the open text, or starts (and for a whole part,
    /// ends) a block of its own.
    fn take_part(&mut self, part: &Value, deltas: &mut Vec<Delta>) -> Result<Progress> {
        let Value::Object(part) = part else {
            return Err(ConversionError::field("candidates[].content.parts[]"));
        };
        let text = part.get("text").and_then(Value::as_str);
        if let (Some(text), Some(last)) = (text, self.parts.last_mut())
            && mergeable(&last.part)
            && is_thought(&last.part) == is_thought(part)
            && part
                .keys()
                .all(|k| matches!(k.as_str(), "text" | "thought" | "thoughtSignature"))
        {
            if let Some(Value::String(kept)) = last.part.get_mut("text") {
                kept.push_str(text);
            }
            if let Some(signature) = part.get("thoughtSignature") {
                last.part
                    .insert("thoughtSignature".into(), signature.clone());
            }
            if let Some(index) = last.index
                && !text.is_empty()
            {
                deltas.push(if is_thought(part) {
                    Delta::Thinking {
                        index,
                        text: text.to_owned(),
                    }
                } else {
                    Delta::Text {
                        index,
                        text: text.to_owned(),
                    }
                });
            }
            return Ok(Progress::Pending);
        }
        self.close_last(deltas)?;
        if self.parts.len() >= self.budget.limits.max_blocks {
            return Err(ConversionError::TooLarge {
                what: "parts".into(),
                max: self.budget.limits.max_blocks,
            });
        }
        let at = self.parts.len();
        let value = Value::Object(part.clone());
        let blocks = decode_response_part(&value, self.position(), at)?;
        let index = self.next_block();
        let mut progress = Progress::Pending;
        let first = blocks.first().cloned();
        match first {
            Some(ContentBlock::Text { text, .. }) => {
                deltas.push(Delta::BlockStart {
                    index,
                    kind: BlockKind::Text,
                });
                if !text.is_empty() {
                    deltas.push(Delta::Text { index, text });
                }
            }
            Some(ContentBlock::Reasoning { vendor, .. }) if is_thought(part) => {
                deltas.push(Delta::BlockStart {
                    index,
                    kind: BlockKind::Thinking { vendor },
                });
                if let Some(text) = text.filter(|t| !t.is_empty()) {
                    deltas.push(Delta::Thinking {
                        index,
                        text: text.to_owned(),
                    });
                }
            }
            Some(ContentBlock::ToolCall(call)) => {
                deltas.push(Delta::BlockStart {
                    index,
                    kind: BlockKind::ToolCall {
                        id: call.id.clone(),
                        name: call.name.clone(),
                        caller: None,
                    },
                });
                deltas.push(Delta::ToolArguments {
                    index,
                    json: arguments_text(&call.input),
                });
                progress = Progress::ToolCallComplete(call);
            }
            Some(other) => deltas.push(Delta::BlockStart {
                index,
                kind: BlockKind::Whole(other),
            }),
            None => {}
        }
        self.parts.push(OpenPart {
            part: part.clone(),
            index: Some(index),
        });
        // Only text grows: every other part is complete as it came.
        if !mergeable(part) {
            self.close_last(deltas)?;
        }
        Ok(progress)
    }
}

impl Accumulator for GeminiAccumulator {
    fn push(&mut self, event: &str, data: &Value) -> Result<Progress> {
        self.push_deltas(event, data, &mut Vec::new())
    }

    fn push_deltas(
        &mut self,
        _event: &str,
        data: &Value,
        deltas: &mut Vec<Delta>,
    ) -> Result<Progress> {
        self.budget.charge(data)?;
        if data.get("error").is_some() {
            return Err(upstream_error(data));
        }
        let Value::Object(chunk) = data else {
            return Err(ConversionError::field("chunk"));
        };
        for (key, value) in chunk {
            match key.as_str() {
                "candidates" => {}
                "usageMetadata" | "usage_metadata" => self.usage = Some(value.clone()),
                _ => {
                    self.head.insert(key.clone(), value.clone());
                }
            }
        }
        if !self.started {
            self.started = true;
            let text = |key: &str| {
                self.head
                    .get(key)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            deltas.push(Delta::TurnStart {
                id: text("responseId"),
                model: text("modelVersion"),
                origin: Some(Vendor::Gemini),
            });
        }
        let mut progress = Progress::Pending;
        let candidate = chunk
            .get("candidates")
            .and_then(Value::as_array)
            .and_then(|c| c.first());
        let Some(Value::Object(candidate)) = candidate else {
            return Ok(progress);
        };
        let parts = candidate
            .get("content")
            .and_then(|c| c.get("parts"))
            .and_then(Value::as_array);
        for part in parts.into_iter().flatten() {
            // The progress names the first call the chunk completes; every call's block
            // stop is in the deltas.
            let made = self.take_part(part, deltas)?;
            if matches!(progress, Progress::Pending) {
                progress = made;
            }
        }
        for (key, value) in candidate {
            if key != "content" {
                self.candidate.insert(key.clone(), value.clone());
            }
        }
        if candidate.contains_key("finishReason") && !self.done {
            self.done = true;
            self.close_last(deltas)?;
            let turn = self.decode()?;
            deltas.push(Delta::TurnEnd {
                stop_reason: turn.stop_reason,
                stop_sequence: None,
                usage: turn.usage,
                container: None,
            });
            progress = Progress::Done;
        }
        Ok(progress)
    }

    fn finish(self) -> Result<Turn> {
        self.decode()
    }
}
