//! Gemini clients' live streams: canonical deltas as `streamGenerateContent` chunks
//! ([`GeminiLiveEncoder`]).

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::delta::Delta;
use super::event::{Event, event};
use super::live_encoder::LiveEncoder;
use crate::conversation::gemini_parts::{PartStyle, encode_parts};
use crate::conversation::{ContentBlock, Turn, Vendor, encode_error, gemini};

/// Writes canonical deltas as `streamGenerateContent` chunks for a Gemini client: text and
/// Gemini thoughts as they come, every other part whole at its block's end (a function
/// call with the signature that follows it), the finish reason and usage last.
#[derive(Debug, Default)]
pub struct GeminiLiveEncoder {
    id: String,
    model: String,
    /// The part last finished, held back for a signature that may follow it.
    held: Option<Map<String, Value>>,
    /// The turn came from Gemini: its blocks' vendor fields go back.
    same: bool,
}

impl GeminiLiveEncoder {
    fn chunk(&self, parts: Vec<Value>) -> Value {
        json!({
            "candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}],
            "modelVersion": self.model,
            "responseId": self.id,
        })
    }

    fn flush(&mut self, out: &mut Vec<Event>) {
        if let Some(part) = self.held.take() {
            out.push(event("", self.chunk(vec![Value::Object(part)])));
        }
    }
}

impl LiveEncoder for GeminiLiveEncoder {
    fn encode(&mut self, delta: &Delta, out: &mut Vec<Event>) {
        match delta {
            Delta::TurnStart { id, model, origin } => {
                self.id.clone_from(id);
                self.model.clone_from(model);
                self.same = *origin == Some(Vendor::Gemini);
            }
            Delta::Text { text, .. } => {
                self.flush(out);
                out.push(event("", self.chunk(vec![json!({"text": text})])));
            }
            Delta::BlockStop { block, .. } => match block {
                // Streamed as pieces already.
                ContentBlock::Text { .. } => {}
                ContentBlock::Reasoning {
                    vendor: Vendor::Gemini,
                    data,
                } if data.get("thought").is_none() => {
                    let signature = data.get("thoughtSignature").cloned();
                    let signs = data["signs"].as_str().unwrap_or("text");
                    match (&mut self.held, signature) {
                        (Some(held), Some(signature)) if held.contains_key(signs) => {
                            held.insert("thoughtSignature".into(), signature);
                            self.flush(out);
                        }
                        (_, Some(signature)) => {
                            self.flush(out);
                            out.push(event(
                                "",
                                self.chunk(vec![
                                    json!({"text": "", "thoughtSignature": signature}),
                                ]),
                            ));
                        }
                        (_, None) => {}
                    }
                }
                other => {
                    self.flush(out);
                    let style = PartStyle {
                        same: self.same,
                        drop_synthesized_ids: false,
                    };
                    let parts = encode_parts(std::slice::from_ref(other), &HashMap::new(), style);
                    for part in parts {
                        if let Value::Object(part) = part {
                            self.flush(out);
                            self.held = Some(part);
                        }
                    }
                }
            },
            Delta::TurnEnd {
                stop_reason, usage, ..
            } => {
                self.flush(out);
                let turn = Turn {
                    origin: None,
                    id: self.id.clone(),
                    model: self.model.clone(),
                    content: Vec::new(),
                    stop_reason: stop_reason.clone(),
                    stop_sequence: None,
                    usage: usage.clone(),
                    container: None,
                    extra: Map::new(),
                };
                let mut end = gemini::encode_response(&turn);
                end["candidates"][0]["content"]["parts"] = json!([]);
                out.push(event("", end));
            }
            Delta::Error { kind, message } => {
                self.flush(out);
                let status = match kind.as_str() {
                    "invalid_request_error" => 400,
                    "rate_limit_error" => 429,
                    "overloaded_error" => 503,
                    _ => 500,
                };
                out.push(event(
                    "",
                    encode_error(Vendor::Gemini, status, kind, message).body,
                ));
            }
            // Thinking pieces: Gemini's own thoughts go whole at their stop, and another
            // vendor's reasoning has no place in Gemini's parts.
            _ => {}
        }
    }
}
