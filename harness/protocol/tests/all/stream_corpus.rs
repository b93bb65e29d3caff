//! The golden stream corpus (`tests/golden/<api>/*.sse`, vendor streams in their wire
//! format) replayed through every upstream → client translation: each upstream's
//! accumulator yields canonical deltas, each client API's live encoder writes them, and
//! the client stream must be well-formed for its API and carry everything the whole-turn
//! path carries to that API.
//!
//! Adding an API is one line in [`UPSTREAMS`] (its accumulator) and one in [`CLIENTS`]
//! (its live encoder's vendor, a well-formedness check, its accumulator).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use cordon_protocol::conversation::stream::{
    Accumulator, AnthropicAccumulator, ChatAccumulator, Delta, Event, GeminiAccumulator, Progress,
    ResponsesAccumulator, anthropic_events, chat_events, gemini_events, live_encoder,
    responses_events,
};
use cordon_protocol::conversation::{ContentBlock, StopReason, Turn, Vendor};
use serde_json::Value;

/// What replaying a vendor stream through an accumulator gave.
struct Replay {
    deltas: Vec<Delta>,
    /// The turn, or the error that ended the stream.
    turn: Result<Turn, String>,
}

/// Replays a vendor stream through one API's accumulator.
type ReplayFn = fn(&[Event]) -> Replay;

/// Every upstream API: its corpus folder and its accumulator.
const UPSTREAMS: &[(&str, ReplayFn)] = &[
    ("anthropic", replay::<AnthropicAccumulator>),
    ("chat", replay::<ChatAccumulator>),
    ("responses", replay::<ResponsesAccumulator>),
    ("gemini", replay::<GeminiAccumulator>),
];

/// A client API: the vendor whose live encoder writes it, the check of its stream's form
/// (`errored`: the stream must end with the API's error event), its whole-turn encoder,
/// and its accumulator (to read back what a client gets).
type Client = (
    Vendor,
    fn(&[Event], bool) -> Result<(), String>,
    fn(&Turn) -> Vec<Event>,
    ReplayFn,
);

const CLIENTS: &[Client] = &[
    (
        Vendor::Anthropic,
        anthropic_form,
        anthropic_events,
        replay::<AnthropicAccumulator>,
    ),
    (
        Vendor::OpenaiChat,
        chat_form,
        chat_events,
        replay::<ChatAccumulator>,
    ),
    (
        Vendor::OpenaiResponses,
        responses_form,
        responses_events,
        replay::<ResponsesAccumulator>,
    ),
    (
        Vendor::Gemini,
        gemini_form,
        gemini_events,
        replay::<GeminiAccumulator>,
    ),
];

fn replay<A: Accumulator + Default>(events: &[Event]) -> Replay {
    let mut accumulator = A::default();
    let mut deltas = Vec::new();
    for (name, data) in events {
        match accumulator.push_deltas(name, data, &mut deltas) {
            Ok(Progress::Done) => break,
            Ok(_) => {}
            Err(error) => {
                return Replay {
                    deltas,
                    turn: Err(error.to_string()),
                };
            }
        }
    }
    Replay {
        deltas,
        turn: accumulator.finish().map_err(|e| e.to_string()),
    }
}

/// SSE text as events: `event:` names (else the data's `type`), `data:` JSON (else a
/// string, like Chat's `[DONE]`).
fn parse_sse(text: &str) -> Vec<Event> {
    let mut events = Vec::new();
    for chunk in text.split("\n\n").filter(|c| !c.trim().is_empty()) {
        let mut name = String::new();
        let mut data = String::new();
        for line in chunk.lines() {
            if let Some(v) = line.strip_prefix("event: ") {
                name = v.to_owned();
            } else if let Some(v) = line.strip_prefix("data: ") {
                data.push_str(v);
            }
        }
        let value = serde_json::from_str(&data).unwrap_or(Value::String(data));
        if name.is_empty()
            && let Some(kind) = value["type"].as_str()
        {
            name = kind.to_owned();
        }
        events.push((name, value));
    }
    events
}

fn corpus() -> Vec<(String, Vec<Event>, ReplayFn)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut files = Vec::new();
    for (folder, replay) in UPSTREAMS {
        let mut paths: Vec<_> = std::fs::read_dir(root.join(folder))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "sse"))
            .collect();
        paths.sort();
        assert!(!paths.is_empty(), "no streams for {folder}");
        for path in paths {
            let text = std::fs::read_to_string(&path).unwrap();
            let name = format!("{folder}/{}", path.file_name().unwrap().to_string_lossy());
            files.push((name, parse_sse(&text), *replay));
        }
    }
    files
}

#[test]
fn every_upstream_stream_reaches_every_client_well_formed_and_whole() {
    let mut pairs = 0;
    for (name, events, replay) in corpus() {
        // Ping events never reach an accumulator (the gateway drops them).
        let events: Vec<Event> = events.into_iter().filter(|(n, _)| n != "ping").collect();
        let upstream = replay(&events);
        canonical_form(&upstream.deltas, upstream.turn.is_err())
            .unwrap_or_else(|e| panic!("{name}: deltas: {e}"));
        let mut deltas = upstream.deltas.clone();
        if let Err(message) = &upstream.turn {
            deltas.push(Delta::Error {
                kind: "api_error".into(),
                message: message.clone(),
            });
        }
        for (vendor, form, whole, read_back) in CLIENTS {
            let mut encoder = live_encoder(*vendor).unwrap();
            let mut out = Vec::new();
            for delta in &deltas {
                encoder.encode(delta, &mut out);
            }
            let errored = upstream.turn.is_err();
            form(&out, errored).unwrap_or_else(|e| panic!("{name} → {vendor:?}: {e}\n{out:#?}"));
            if let Ok(turn) = &upstream.turn {
                let live = read_back(&out)
                    .turn
                    .unwrap_or_else(|e| panic!("{name} → {vendor:?}: unreadable: {e}"));
                let whole = read_back(&whole(turn))
                    .turn
                    .unwrap_or_else(|e| panic!("{name} → {vendor:?} whole: {e}"));
                assert_eq!(
                    carried(&live),
                    carried(&whole),
                    "{name} → {vendor:?}: the live stream carries less than the whole turn"
                );
            }
            pairs += 1;
        }
    }
    assert!(pairs >= 20 * CLIENTS.len(), "{pairs} pairs");
}

/// What a client's turn holds that must survive the trip: text, calls with their
/// arguments, reasoning, server tool blocks, the stop reason and token counts.
#[derive(Debug, PartialEq)]
struct Carried {
    text: String,
    calls: Vec<(String, String, Value)>,
    reasoning: Vec<Value>,
    server_blocks: usize,
    stop_reason: Option<StopReason>,
    tokens: (u64, u64),
}

fn carried(turn: &Turn) -> Carried {
    let mut carried = Carried {
        text: String::new(),
        calls: Vec::new(),
        reasoning: Vec::new(),
        server_blocks: 0,
        stop_reason: turn.stop_reason.clone(),
        tokens: (turn.usage.input_tokens, turn.usage.output_tokens),
    };
    for block in &turn.content {
        match block {
            ContentBlock::Text { text, .. } => carried.text.push_str(text),
            ContentBlock::ToolCall(call) => {
                carried
                    .calls
                    .push((call.id.clone(), call.name.clone(), call.input.clone()))
            }
            ContentBlock::Reasoning { data, .. } => carried.reasoning.push(data.clone()),
            ContentBlock::ServerToolCall { .. } | ContentBlock::ServerToolResult { .. } => {
                carried.server_blocks += 1
            }
            _ => {}
        }
    }
    carried
}

/// The canonical deltas: one `TurnStart` first, blocks numbered in start order, each
/// started once and stopped once, argument pieces joining to the stopped call's input,
/// `TurnEnd` last (unless the stream failed).
fn canonical_form(deltas: &[Delta], errored: bool) -> Result<(), String> {
    if !matches!(deltas.first(), Some(Delta::TurnStart { .. })) {
        return Err("no TurnStart first".into());
    }
    let mut open: HashMap<usize, String> = HashMap::new();
    let mut next = 0;
    for delta in &deltas[1..] {
        match delta {
            Delta::BlockStart { index, .. } => {
                if *index != next {
                    return Err(format!("block {index} started, {next} expected"));
                }
                next += 1;
                open.insert(*index, String::new());
            }
            Delta::ToolArguments { index, json } => open
                .get_mut(index)
                .ok_or(format!("arguments for block {index}, not open"))?
                .push_str(json),
            Delta::Text { index, .. }
            | Delta::Thinking { index, .. }
            | Delta::Signature { index, .. } => {
                if !open.contains_key(index) {
                    return Err(format!("piece for block {index}, not open"));
                }
            }
            Delta::BlockStop { index, block } => {
                let arguments = open
                    .remove(index)
                    .ok_or(format!("block {index} stopped, not open"))?;
                let input = match block {
                    ContentBlock::ToolCall(call) => Some(&call.input),
                    ContentBlock::ServerToolCall { input, .. } => Some(input),
                    _ => None,
                };
                if let Some(input) = input {
                    let joined: Value = serde_json::from_str(&arguments)
                        .map_err(|e| format!("block {index}: arguments {arguments:?}: {e}"))?;
                    if &joined != input {
                        return Err(format!("block {index}: {joined} joined, {input} stopped"));
                    }
                }
            }
            Delta::TurnEnd { .. } if !open.is_empty() => {
                return Err(format!("turn ended with blocks open: {open:?}"));
            }
            Delta::TurnStart { .. } => return Err("a second TurnStart".into()),
            _ => {}
        }
    }
    let ended = matches!(deltas.last(), Some(Delta::TurnEnd { .. }));
    if ended == errored {
        return Err(format!("ended {ended}, errored {errored}"));
    }
    Ok(())
}

/// Anthropic: `message_start`, blocks numbered from 0 started and stopped once with
/// deltas only between, tool input pieces joining to JSON, `message_delta` then
/// `message_stop` last; or an `error` event last.
fn anthropic_form(events: &[Event], errored: bool) -> Result<(), String> {
    if events.first().map(|e| e.0.as_str()) != Some("message_start") {
        return Err("no message_start first".into());
    }
    let mut open: BTreeMap<u64, (String, String)> = BTreeMap::new();
    let mut next = 0;
    let mut message_delta = false;
    for (n, (name, data)) in events.iter().enumerate().skip(1) {
        let index = data["index"].as_u64();
        let last = n == events.len() - 1;
        match name.as_str() {
            "content_block_start" => {
                if index != Some(next) || message_delta {
                    return Err(format!("start of {index:?}, {next} expected"));
                }
                next += 1;
                let kind = data["content_block"]["type"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned();
                open.insert(next - 1, (kind, String::new()));
            }
            "content_block_delta" => {
                let (kind, json) = open
                    .get_mut(&index.unwrap_or(u64::MAX))
                    .ok_or(format!("delta for {index:?}, not open"))?;
                let delta_kind = data["delta"]["type"].as_str().unwrap_or("");
                let fits = match delta_kind {
                    "text_delta" | "citations_delta" => kind == "text",
                    "thinking_delta" | "signature_delta" => kind == "thinking",
                    "input_json_delta" => kind.ends_with("tool_use"),
                    _ => false,
                };
                if !fits {
                    return Err(format!("{delta_kind} in a {kind} block"));
                }
                json.push_str(data["delta"]["partial_json"].as_str().unwrap_or(""));
            }
            "content_block_stop" => {
                let (kind, json) = open
                    .remove(&index.unwrap_or(u64::MAX))
                    .ok_or(format!("stop of {index:?}, not open"))?;
                if kind.ends_with("tool_use") {
                    serde_json::from_str::<Value>(&json)
                        .map_err(|e| format!("tool input {json:?}: {e}"))?;
                }
            }
            "message_delta" => {
                if !open.is_empty() || message_delta {
                    return Err("message_delta with blocks open, or twice".into());
                }
                message_delta = true;
            }
            "message_stop" if last && message_delta && !errored => {}
            "error" if last && errored => {}
            other => return Err(format!("unexpected {other} at {n}")),
        }
    }
    Ok(())
}

/// Chat: chunks of one id, the role first, each call's first piece with its id and name
/// (calls numbered from 0), its arguments joining to JSON, one finish reason, a usage
/// chunk and `[DONE]` last; or an `error` chunk last.
fn chat_form(events: &[Event], errored: bool) -> Result<(), String> {
    let id = events
        .first()
        .map(|e| e.1["id"].clone())
        .unwrap_or_default();
    if events.first().map(|e| &e.1["choices"][0]["delta"]["role"])
        != Some(&Value::from("assistant"))
    {
        return Err("no role first".into());
    }
    let mut calls: Vec<String> = Vec::new();
    let mut finishes = 0;
    let mut usage = false;
    for (n, (name, data)) in events.iter().enumerate() {
        let last = n == events.len() - 1;
        if !name.is_empty() {
            return Err(format!("a named chunk {name}"));
        }
        if data == "[DONE]" {
            if !last || errored || finishes != 1 || !usage {
                return Err(format!("[DONE] at {n}, finishes {finishes}, usage {usage}"));
            }
            continue;
        }
        if data.get("error").is_some() {
            if !last || !errored {
                return Err("an error chunk not last".into());
            }
            continue;
        }
        if data["object"] != "chat.completion.chunk" || data["id"] != id {
            return Err(format!("chunk {n} is not of the stream: {data}"));
        }
        if data["usage"].is_object() {
            usage = true;
        }
        let choice = &data["choices"][0];
        if !choice["finish_reason"].is_null() {
            finishes += 1;
        }
        for call in choice["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let index = call["index"].as_u64().ok_or("a call without index")? as usize;
            if index == calls.len() {
                if !call["id"].is_string() || !call["function"]["name"].is_string() {
                    return Err(format!("call {index} starts without id and name"));
                }
                calls.push(String::new());
            }
            let known = calls.len();
            calls
                .get_mut(index)
                .ok_or(format!("call {index} before {known}"))?
                .push_str(call["function"]["arguments"].as_str().unwrap_or(""));
        }
    }
    if !errored {
        for arguments in &calls {
            serde_json::from_str::<Value>(arguments)
                .map_err(|e| format!("arguments {arguments:?}: {e}"))?;
        }
    }
    Ok(())
}

/// Responses: numbered events, `response.created` first, items added at output indexes
/// 0, 1, … and done once with the same id, deltas only for open items, argument pieces
/// equal to the arguments done, `response.completed` (or `.incomplete`) last holding every
/// item done; or an `error` event last.
fn responses_form(events: &[Event], errored: bool) -> Result<(), String> {
    if events.first().map(|e| e.0.as_str()) != Some("response.created") {
        return Err("no response.created first".into());
    }
    let mut open: HashMap<u64, (Value, String)> = HashMap::new();
    let mut done: Vec<Value> = Vec::new();
    let mut added = 0;
    for (n, (name, data)) in events.iter().enumerate() {
        if data["sequence_number"] != n || data["type"] != name.as_str() {
            return Err(format!("event {n} ({name}) misnumbered or mistyped"));
        }
        let last = n == events.len() - 1;
        let at = data["output_index"].as_u64();
        let item_of = |open: &HashMap<u64, (Value, String)>| {
            at.and_then(|i| open.get(&i))
                .filter(|(id, _)| data.get("item_id").is_none_or(|item| item == id))
                .is_some()
        };
        match name.as_str() {
            "response.created" | "response.in_progress" if n < 2 => {}
            "response.output_item.added" => {
                if at != Some(added) || data["item"]["id"].as_str().is_none_or(str::is_empty) {
                    return Err(format!("item added at {at:?}, {added} expected"));
                }
                added += 1;
                open.insert(added - 1, (data["item"]["id"].clone(), String::new()));
            }
            "response.function_call_arguments.delta" => {
                if !item_of(&open) {
                    return Err(format!("arguments for {at:?}, not open"));
                }
                if let Some((_, arguments)) = at.and_then(|i| open.get_mut(&i)) {
                    arguments.push_str(data["delta"].as_str().unwrap_or(""));
                }
            }
            "response.function_call_arguments.done" => {
                let (_, arguments) = at.and_then(|i| open.get(&i)).ok_or("done, not open")?;
                if data["arguments"] != arguments.as_str() {
                    return Err(format!(
                        "pieces {arguments:?} vs done {}",
                        data["arguments"]
                    ));
                }
                serde_json::from_str::<Value>(arguments)
                    .map_err(|e| format!("arguments {arguments:?}: {e}"))?;
            }
            "response.output_text.delta"
            | "response.output_text.done"
            | "response.content_part.added"
            | "response.content_part.done"
            | "response.reasoning_summary_part.added"
            | "response.reasoning_summary_part.done"
            | "response.reasoning_summary_text.delta"
            | "response.reasoning_summary_text.done" => {
                if !item_of(&open) {
                    return Err(format!("{name} for {at:?}, not open"));
                }
            }
            "response.output_item.done" => {
                let (id, _) = at
                    .and_then(|i| open.remove(&i))
                    .ok_or(format!("item done at {at:?}, not open"))?;
                if data["item"]["type"] != "reasoning" && data["item"]["id"] != id {
                    return Err(format!(
                        "item done with id {}, added {id}",
                        data["item"]["id"]
                    ));
                }
                done.push(data["item"].clone());
            }
            "response.completed" | "response.incomplete" if last && !errored => {
                if !open.is_empty() {
                    return Err("completed with items open".into());
                }
                if data["response"]["output"] != Value::Array(done.clone()) {
                    return Err("the completed output is not the items done".into());
                }
            }
            "error" if last && errored => {}
            other => return Err(format!("unexpected {other} at {n}")),
        }
    }
    Ok(())
}

/// Gemini: unnamed chunks of one response id, each the first candidate's next parts (a
/// function call whole, its arguments an object), one finish reason, on the last chunk
/// with the usage; or an `error` chunk last.
fn gemini_form(events: &[Event], errored: bool) -> Result<(), String> {
    let id = events
        .first()
        .map(|e| e.1["responseId"].clone())
        .unwrap_or_default();
    let mut finished = false;
    for (n, (name, data)) in events.iter().enumerate() {
        let last = n == events.len() - 1;
        if !name.is_empty() {
            return Err(format!("a named chunk {name}"));
        }
        if data.get("error").is_some() {
            if !last || !errored || !data["error"]["code"].is_u64() {
                return Err(format!("an error chunk at {n}: {data}"));
            }
            continue;
        }
        if finished || data["responseId"] != id {
            return Err(format!(
                "chunk {n} after the end, or of another response: {data}"
            ));
        }
        let candidate = &data["candidates"][0];
        let parts = candidate["content"]["parts"]
            .as_array()
            .ok_or(format!("chunk {n} without parts"))?;
        for part in parts {
            if let Some(call) = part.get("functionCall")
                && (!call["name"].is_string() || !call["args"].is_object())
            {
                return Err(format!("a function call without name or args: {part}"));
            }
        }
        if candidate.get("finishReason").is_some() {
            if !data["usageMetadata"].is_object() {
                return Err("the finish reason comes without usage".into());
            }
            finished = true;
        }
    }
    if finished == errored {
        return Err(format!("finished {finished}, errored {errored}"));
    }
    Ok(())
}
