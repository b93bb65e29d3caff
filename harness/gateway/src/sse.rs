//! Server-sent events, read incrementally from an upstream's answer.

use serde_json::Value;

/// Splits a byte stream into SSE events `(event name, data)`. `data` is parsed as JSON;
/// data that is not JSON (Chat's `[DONE]`) becomes a JSON string.
#[derive(Debug, Default)]
pub struct SseParser {
    buffer: Vec<u8>,
    name: String,
    data: String,
}

impl SseParser {
    /// Feeds bytes; returns the events they completed.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<(String, Value)> {
        self.buffer.extend_from_slice(bytes);
        let mut events = Vec::new();
        while let Some(end) = self.buffer.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buffer.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if let Some(event) = self.dispatch() {
                    events.push(event);
                }
                continue;
            }
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = match line.split_once(':') {
                Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
                None => (line, ""),
            };
            match field {
                "event" => self.name = value.to_owned(),
                "data" => {
                    if !self.data.is_empty() {
                        self.data.push('\n');
                    }
                    self.data.push_str(value);
                }
                _ => {}
            }
        }
        events
    }

    /// The event still buffered when the stream ends without a blank line.
    pub fn finish(&mut self) -> Option<(String, Value)> {
        if !self.buffer.is_empty() {
            let rest = std::mem::take(&mut self.buffer);
            let mut events = self.push(&rest);
            events.extend(self.push(b"\n\n"));
            return events.into_iter().next();
        }
        self.dispatch()
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
        assert!(p.push(b"event: message_start\r\ndata: {\"a\":").is_empty());
        let events = p.push(b"1}\r\n\r\ndata: [DONE]\n\n");
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
        let events = p.push(b"data: {\"type\":\"response.created\"}\n\n: ping\n\n");
        assert_eq!(events[0].0, "response.created");
        assert_eq!(events.len(), 1);
    }
}
