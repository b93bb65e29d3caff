//! Server-sent events, read incrementally from an upstream's answer.

use serde_json::Value;

/// Bytes one event (or one line still being read) may hold. An upstream's turn is text and
/// tool calls; a stream that piles up more without an event boundary is refused, not buffered.
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// A stream that broke [`MAX_EVENT_BYTES`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("an event of the upstream's stream is larger than {MAX_EVENT_BYTES} bytes")]
pub struct EventTooLarge;

/// Splits a byte stream into SSE events `(event name, data)`. `data` is parsed as JSON;
/// data that is not JSON (Chat's `[DONE]`) becomes a JSON string.
#[derive(Debug, Default)]
pub struct SseParser {
    buffer: Vec<u8>,
    /// How much of `buffer` is known to hold no newline (so each byte is scanned once).
    scanned: usize,
    name: String,
    data: String,
}

impl SseParser {
    /// Feeds bytes; returns the events they completed.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<(String, Value)>, EventTooLarge> {
        self.buffer.extend_from_slice(bytes);
        let mut events = Vec::new();
        let mut start = 0;
        while let Some(found) = self.buffer[self.scanned..].iter().position(|&b| b == b'\n') {
            let end = self.scanned + found;
            let line = String::from_utf8_lossy(&self.buffer[start..end]).into_owned();
            start = end + 1;
            self.scanned = start;
            if let Some(event) = self.line(line.trim_end_matches('\r'))? {
                events.push(event);
            }
        }
        // One drain per push, not one per line.
        self.buffer.drain(..start);
        self.scanned = self.buffer.len();
        if self.buffer.len() > MAX_EVENT_BYTES {
            return Err(EventTooLarge);
        }
        Ok(events)
    }

    fn line(&mut self, line: &str) -> Result<Option<(String, Value)>, EventTooLarge> {
        if line.is_empty() {
            return Ok(self.dispatch());
        }
        if line.starts_with(':') {
            return Ok(None);
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => self.name = value.to_owned(),
            "data" => {
                if self.data.len() + value.len() >= MAX_EVENT_BYTES {
                    return Err(EventTooLarge);
                }
                if !self.data.is_empty() {
                    self.data.push('\n');
                }
                self.data.push_str(value);
            }
            _ => {}
        }
        Ok(None)
    }

    /// The event still buffered when the stream ends without a blank line.
    pub fn finish(&mut self) -> Result<Option<(String, Value)>, EventTooLarge> {
        if !self.buffer.is_empty() {
            let mut events = self.push(b"\n\n")?;
            return Ok(if events.is_empty() {
                None
            } else {
                Some(events.remove(0))
            });
        }
        Ok(self.dispatch())
    }

    fn dispatch(&mut self) -> Option<(String, Value)> {
        let name = std::mem::take(&mut self.name);
        let data = std::mem::take(&mut self.data);
        if data.is_empty() {
            return None;
        }
        let value = serde_json::from_str(&data).unwrap_or(Value::String(data));
        // Some servers omit `event:`; the JSON's `type` names the event then (Anthropic,
        // Responses). Chat chunks have neither and keep the empty name.
        let name = if name.is_empty() {
            value
                .get("type")
                .and_then(Value::as_str)
                .filter(|t| !t.starts_with("chat."))
                .unwrap_or_default()
                .to_owned()
        } else {
            name
        };
        Some((name, value))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use serde_json::json;

    #[test]
    fn events_split_across_chunks_and_crlf() {
        let mut p = SseParser::default();
        assert!(
            p.push(b"event: message_start\r\ndata: {\"a\":")
                .unwrap()
                .is_empty()
        );
        let events = p.push(b"1}\r\n\r\ndata: [DONE]\n\n").unwrap();
        assert_eq!(
            events,
            vec![
                ("message_start".to_owned(), json!({"a": 1})),
                (String::new(), json!("[DONE]"))
            ]
        );
    }

    #[test]
    fn missing_event_name_falls_back_to_type() {
        let mut p = SseParser::default();
        let events = p
            .push(b"data: {\"type\":\"response.created\"}\n\n: ping\n\n")
            .unwrap();
        assert_eq!(events[0].0, "response.created");
        assert_eq!(events.len(), 1);
    }

    #[test]
    fn a_stream_without_event_boundaries_is_refused_once_past_the_cap() {
        let mut p = SseParser::default();
        let chunk = vec![b'x'; 1024 * 1024];
        let mut refused = false;
        for _ in 0..=MAX_EVENT_BYTES / chunk.len() {
            if p.push(&chunk).is_err() {
                refused = true;
                break;
            }
        }
        assert!(refused);
        // Many data lines of one event count together.
        let mut p = SseParser::default();
        let line = format!("data: {}\n", "y".repeat(1024 * 1024));
        let mut refused = false;
        for _ in 0..=MAX_EVENT_BYTES / line.len() + 1 {
            if p.push(line.as_bytes()).is_err() {
                refused = true;
                break;
            }
        }
        assert!(refused);
    }

    #[test]
    fn a_final_event_without_a_blank_line_is_still_read() {
        let mut p = SseParser::default();
        assert!(p.push(b"data: {\"type\":\"x\"}").unwrap().is_empty());
        assert_eq!(
            p.finish().unwrap(),
            Some(("x".to_owned(), json!({"type": "x"})))
        );
    }
}
