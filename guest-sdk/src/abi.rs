//! The bridge ABI: names, codes and framing shared by guest and host.
//!
//! All integers are little-endian `u32`. Strings are UTF-8 (the host replaces invalid
//! sequences). A *frame* is a byte buffer; the host hands frames to the guest through the
//! *inbox* (the guest learns the length from an import's return value, then copies the
//! bytes with [`IMPORT_INBOX_READ`]), so the host never writes into guest memory uninvited.

/// Version of this ABI; exported by every guest as [`EXPORT_ABI_VERSION`].
pub const ABI_VERSION: u32 = 1;

/// Module name of every import.
pub const IMPORT_MODULE: &str = "cordon";
/// `inbox_read(ptr: i32, len: i32) -> i32`: copy the inbox into guest memory; returns
/// the number of bytes copied.
pub const IMPORT_INBOX_READ: &str = "inbox_read";
/// `call_tool(name_ptr, name_len, input_ptr, input_len) -> i32`: one tool call. Returns
/// the length of the response frame now in the inbox (see [`encode_response`]).
pub const IMPORT_CALL_TOOL: &str = "call_tool";
/// `call_batch(req_ptr, req_len) -> i32`: several tool calls the guest awaits together
/// (see [`encode_batch_request`]). Returns the length of the batch response frame now in
/// the inbox (see [`encode_batch_response`]); results are in request order.
pub const IMPORT_CALL_BATCH: &str = "call_batch";
/// `output(stream: i32, ptr: i32, len: i32)`: append to stdout (1) or stderr (2).
pub const IMPORT_OUTPUT: &str = "output";
/// `finish(ptr: i32, len: i32)`: report how the execution ended (see [`Outcome`]).
pub const IMPORT_FINISH: &str = "finish";

/// `() -> ()`, called once when the image is snapshotted (pre-initialization).
pub const EXPORT_INITIALIZE: &str = "wizer.initialize";
/// `(request_len: i32) -> ()`: run the execute request waiting in the inbox (see
/// [`encode_execute_request`]), then call `finish`.
pub const EXPORT_EXECUTE: &str = "cordon_execute";
/// `() -> i32`: the [`ABI_VERSION`] the guest was built against.
pub const EXPORT_ABI_VERSION: &str = "cordon_abi_version";

/// Stream numbers for [`IMPORT_OUTPUT`].
pub const STREAM_STDOUT: i32 = 1;
/// See [`STREAM_STDOUT`].
pub const STREAM_STDERR: i32 = 2;

/// Why a tool call failed, as the guest sees it (its `ToolError.kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolErrorKind {
    /// The handler ran and failed (non-zero exit, HTTP error, client said `is_error`).
    Failed,
    /// The arguments violate the tool's input schema.
    InvalidInput,
    /// Policy denied the call, or a human refused the approval.
    Denied,
    /// No tool of that name is declared.
    UnknownTool,
    /// Nobody answered in time (client tool deadline, handler timeout).
    Timeout,
}

impl ToolErrorKind {
    /// The status byte of a response frame.
    pub fn code(self) -> u8 {
        match self {
            ToolErrorKind::Failed => 1,
            ToolErrorKind::InvalidInput => 2,
            ToolErrorKind::Denied => 3,
            ToolErrorKind::UnknownTool => 4,
            ToolErrorKind::Timeout => 5,
        }
    }

    /// Inverse of [`Self::code`]; `None` for 0 (success) and unknown codes.
    pub fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            1 => ToolErrorKind::Failed,
            2 => ToolErrorKind::InvalidInput,
            3 => ToolErrorKind::Denied,
            4 => ToolErrorKind::UnknownTool,
            5 => ToolErrorKind::Timeout,
            _ => return None,
        })
    }

    /// Stable snake_case name, shown to guest code as `ToolError.kind`.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolErrorKind::Failed => "tool_failed",
            ToolErrorKind::InvalidInput => "invalid_input",
            ToolErrorKind::Denied => "denied",
            ToolErrorKind::UnknownTool => "unknown_tool",
            ToolErrorKind::Timeout => "timeout",
        }
    }
}

/// A failed tool call: its kind and a message for the guest (and the model) to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFailure {
    /// Why it failed.
    pub kind: ToolErrorKind,
    /// What went wrong, in words a model can act on.
    pub message: String,
}

/// The result of one call: JSON text on success.
pub type CallResult = Result<String, ToolFailure>;

/// How an execution ended, as reported by the guest through [`IMPORT_FINISH`].
///
/// Limits are never reported by the guest: the host stops the guest when one is hit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The code ran to its end.
    Completed {
        /// The final expression's value as JSON text, when it had one that encodes.
        result_json: Option<String>,
        /// `repr()` of the final expression's value when it is not JSON-encodable.
        result_repr: Option<String>,
    },
    /// The code raised (or failed to compile).
    Error {
        /// Exception type name, e.g. `ZeroDivisionError` or `SyntaxError`.
        error_type: String,
        /// The exception's message.
        message: String,
        /// The formatted traceback.
        traceback: String,
    },
}

/// A frame that does not follow the ABI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameError(pub &'static str);

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed bridge frame: {}", self.0)
    }
}

impl std::error::Error for FrameError {}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_u32(out, len_u32(bytes.len()));
    out.extend_from_slice(bytes);
}

fn put_u32(out: &mut Vec<u8>, value: u32) {
    out.extend_from_slice(&value.to_le_bytes());
}

/// Frames are bounded by wasm32's 4 GiB address space and by the payload limit.
fn len_u32(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// Reads a frame front to back.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn u8(&mut self) -> Result<u8, FrameError> {
        let (&first, rest) = self.rest.split_first().ok_or(FrameError("truncated"))?;
        self.rest = rest;
        Ok(first)
    }

    fn u32(&mut self) -> Result<u32, FrameError> {
        if self.rest.len() < 4 {
            return Err(FrameError("truncated length"));
        }
        let (head, rest) = self.rest.split_at(4);
        self.rest = rest;
        Ok(u32::from_le_bytes([head[0], head[1], head[2], head[3]]))
    }

    fn bytes(&mut self) -> Result<&'a [u8], FrameError> {
        let len = self.u32()? as usize;
        if self.rest.len() < len {
            return Err(FrameError("length runs past the end"));
        }
        let (head, rest) = self.rest.split_at(len);
        self.rest = rest;
        Ok(head)
    }

    fn str(&mut self) -> Result<&'a str, FrameError> {
        std::str::from_utf8(self.bytes()?).map_err(|_| FrameError("string is not UTF-8"))
    }

    fn finish(self) -> Result<(), FrameError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(FrameError("trailing bytes"))
        }
    }
}

/// Execute request: `count` tool names (each length-prefixed), then the length-prefixed
/// source code. The names are the tools declared for this execution; the guest exposes
/// each one to the code (as a global async function in Python and JavaScript).
pub fn encode_execute_request(tools: &[&str], code: &str) -> Vec<u8> {
    let mut out = Vec::new();
    put_u32(&mut out, len_u32(tools.len()));
    for name in tools {
        put_bytes(&mut out, name.as_bytes());
    }
    put_bytes(&mut out, code.as_bytes());
    out
}

/// Inverse of [`encode_execute_request`]: `(tool names, code)`.
pub fn decode_execute_request(frame: &[u8]) -> Result<(Vec<&str>, &str), FrameError> {
    let mut reader = Reader { rest: frame };
    let count = reader.u32()? as usize;
    if count > frame.len() / 4 {
        return Err(FrameError("tool count larger than the frame"));
    }
    let mut tools = Vec::with_capacity(count);
    for _ in 0..count {
        tools.push(reader.str()?);
    }
    let code = reader.str()?;
    reader.finish()?;
    Ok((tools, code))
}

/// Batch request: `count`, then per call `name` and `input` (JSON text), each length-prefixed.
pub fn encode_batch_request(calls: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    put_u32(&mut out, len_u32(calls.len()));
    for (name, input) in calls {
        put_bytes(&mut out, name.as_bytes());
        put_bytes(&mut out, input.as_bytes());
    }
    out
}

/// Inverse of [`encode_batch_request`]; the host treats any error as a bridge violation.
pub fn decode_batch_request(frame: &[u8]) -> Result<Vec<(&str, &str)>, FrameError> {
    let mut reader = Reader { rest: frame };
    let count = reader.u32()? as usize;
    // Each call needs at least 8 bytes of lengths: reject absurd counts before allocating.
    if count > frame.len() / 8 {
        return Err(FrameError("call count larger than the frame"));
    }
    let mut calls = Vec::with_capacity(count);
    for _ in 0..count {
        let name = reader.str()?;
        let input = reader.str()?;
        calls.push((name, input));
    }
    reader.finish()?;
    Ok(calls)
}

/// One call's response: status byte (0 = ok, else [`ToolErrorKind::code`]) then the
/// length-prefixed payload (JSON result, or the error message).
pub fn encode_response(result: &CallResult) -> Vec<u8> {
    let mut out = Vec::new();
    put_response(&mut out, result);
    out
}

fn put_response(out: &mut Vec<u8>, result: &CallResult) {
    match result {
        Ok(json) => {
            out.push(0);
            put_bytes(out, json.as_bytes());
        }
        Err(failure) => {
            out.push(failure.kind.code());
            put_bytes(out, failure.message.as_bytes());
        }
    }
}

fn read_response(reader: &mut Reader<'_>) -> Result<CallResult, FrameError> {
    Ok(read_response_text(reader)?.map(str::to_owned))
}

/// A response whose JSON text is left in the frame.
fn read_response_text<'a>(
    reader: &mut Reader<'a>,
) -> Result<Result<&'a str, ToolFailure>, FrameError> {
    let status = reader.u8()?;
    let payload = reader.str()?;
    if status == 0 {
        return Ok(Ok(payload));
    }
    let kind = ToolErrorKind::from_code(status).ok_or(FrameError("unknown status"))?;
    Ok(Err(ToolFailure {
        kind,
        message: payload.to_owned(),
    }))
}

/// Inverse of [`encode_response`].
pub fn decode_response(frame: &[u8]) -> Result<CallResult, FrameError> {
    Ok(decode_response_text(frame)?.map(str::to_owned))
}

/// [`decode_response`] with a result's JSON text borrowed from `frame` (no copy).
pub fn decode_response_text(frame: &[u8]) -> Result<Result<&str, ToolFailure>, FrameError> {
    let mut reader = Reader { rest: frame };
    let result = read_response_text(&mut reader)?;
    reader.finish()?;
    Ok(result)
}

/// Batch response: `count`, then one [`encode_response`] body per call, in request order.
pub fn encode_batch_response(results: &[CallResult]) -> Vec<u8> {
    let mut out = Vec::new();
    put_u32(&mut out, len_u32(results.len()));
    for result in results {
        put_response(&mut out, result);
    }
    out
}

/// Inverse of [`encode_batch_response`].
pub fn decode_batch_response(frame: &[u8]) -> Result<Vec<CallResult>, FrameError> {
    let mut reader = Reader { rest: frame };
    let count = reader.u32()? as usize;
    if count > frame.len() / 5 {
        return Err(FrameError("result count larger than the frame"));
    }
    let mut results = Vec::with_capacity(count);
    for _ in 0..count {
        results.push(read_response(&mut reader)?);
    }
    reader.finish()?;
    Ok(results)
}

/// Outcome frame: tag 0 = completed (`result_json`, `result_repr`, each with a presence
/// byte), tag 1 = error (`type`, `message`, `traceback`).
pub fn encode_outcome(outcome: &Outcome) -> Vec<u8> {
    let mut out = Vec::new();
    match outcome {
        Outcome::Completed {
            result_json,
            result_repr,
        } => {
            out.push(0);
            for field in [result_json, result_repr] {
                match field {
                    Some(text) => {
                        out.push(1);
                        put_bytes(&mut out, text.as_bytes());
                    }
                    None => out.push(0),
                }
            }
        }
        Outcome::Error {
            error_type,
            message,
            traceback,
        } => {
            out.push(1);
            put_bytes(&mut out, error_type.as_bytes());
            put_bytes(&mut out, message.as_bytes());
            put_bytes(&mut out, traceback.as_bytes());
        }
    }
    out
}

/// Inverse of [`encode_outcome`]. Strings are decoded lossily: a guest's final value may
/// hold lone surrogates, and the host must still report it.
pub fn decode_outcome(frame: &[u8]) -> Result<Outcome, FrameError> {
    let mut reader = Reader { rest: frame };
    let lossy = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    let outcome = match reader.u8()? {
        0 => {
            let mut fields = [None, None];
            for field in &mut fields {
                if reader.u8()? == 1 {
                    *field = Some(lossy(reader.bytes()?));
                }
            }
            let [result_json, result_repr] = fields;
            Outcome::Completed {
                result_json,
                result_repr,
            }
        }
        1 => Outcome::Error {
            error_type: lossy(reader.bytes()?),
            message: lossy(reader.bytes()?),
            traceback: lossy(reader.bytes()?),
        },
        _ => return Err(FrameError("unknown outcome tag")),
    };
    reader.finish()?;
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_request_round_trips() {
        let calls = [("a", "{}"), ("weather", r#"{"city":"Zürich"}"#)];
        let frame = encode_batch_request(&calls);
        assert_eq!(decode_batch_request(&frame).unwrap(), calls.to_vec());
    }

    #[test]
    fn batch_response_round_trips_errors_and_values() {
        let results = vec![
            Ok("42".to_owned()),
            Err(ToolFailure {
                kind: ToolErrorKind::Denied,
                message: "no".into(),
            }),
            Err(ToolFailure {
                kind: ToolErrorKind::Timeout,
                message: String::new(),
            }),
        ];
        let frame = encode_batch_response(&results);
        assert_eq!(decode_batch_response(&frame).unwrap(), results);
    }

    #[test]
    fn execute_request_round_trips() {
        let frame = encode_execute_request(&["a", "ns.b"], "print(1)");
        assert_eq!(
            decode_execute_request(&frame).unwrap(),
            (vec!["a", "ns.b"], "print(1)")
        );
    }

    #[test]
    fn outcome_round_trips() {
        for outcome in [
            Outcome::Completed {
                result_json: Some("[1]".into()),
                result_repr: None,
            },
            Outcome::Completed {
                result_json: None,
                result_repr: Some("<object>".into()),
            },
            Outcome::Error {
                error_type: "ValueError".into(),
                message: "bad".into(),
                traceback: "Traceback ...".into(),
            },
        ] {
            assert_eq!(decode_outcome(&encode_outcome(&outcome)).unwrap(), outcome);
        }
    }

    #[test]
    fn hostile_frames_are_rejected_not_trusted() {
        // A count claiming 4 billion calls in a 4-byte frame.
        assert!(decode_batch_request(&u32::MAX.to_le_bytes()).is_err());
        // A length running past the end.
        let mut frame = 1u32.to_le_bytes().to_vec();
        frame.extend_from_slice(&100u32.to_le_bytes());
        assert!(decode_batch_request(&frame).is_err());
        // Invalid UTF-8 in a tool name.
        let mut frame = 1u32.to_le_bytes().to_vec();
        frame.extend_from_slice(&1u32.to_le_bytes());
        frame.push(0xff);
        frame.extend_from_slice(&0u32.to_le_bytes());
        assert!(decode_batch_request(&frame).is_err());
        // Trailing garbage.
        let mut frame = encode_batch_request(&[("a", "{}")]);
        frame.push(0);
        assert!(decode_batch_request(&frame).is_err());
        assert!(decode_response(&[9, 0, 0, 0, 0]).is_err());
        assert!(decode_outcome(&[7]).is_err());
    }
}
