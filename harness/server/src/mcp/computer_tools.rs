//! The MCP computer tools: `computer_open`, `computer` (an Anthropic-shaped action) and
//! `computer_close`, over the server's one lazily started Chromium.
//!
//! Sessions belong to the MCP connection that opened them (another client cannot drive
//! them) and close when it ends or after [`IDLE_TTL`] without a call. Everything the
//! model can correct — an unknown id, an action that does not decode, a coordinate off
//! screen, a refused approval, a missing Chromium — is a result with `isError: true`.
//! Approval rules come from the server (`cordon mcp --computer-rules`), never from the
//! model. A call cancelled while its step waits for the user's approval denies that step,
//! so the session takes the next call.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use cordon_computer::gate::{Decision, GateContext, Navigation};
use cordon_protocol::computer::{Action, ComputerCall, Vendor};
use rmcp::model::{CallToolResult, ContentBlock, Tool};
use rmcp::service::{ElicitationMode, RequestContext};
use rmcp::{Peer, RoleServer};
use serde_json::{Map, Value, json};

use crate::api::{ComputerStep, CreateComputer, StepStatus};
use crate::computer_pool::{
    ComputerError, ComputerPool, Setup, SharedComputer, Stepped, decode_actions,
};
use crate::periodic::spawn_periodic;
use cordon_core::ids::fresh_id;

/// Sessions one MCP connection may hold open.
pub const MAX_COMPUTERS_PER_CONNECTION: usize = 8;
/// Idle time after which a session is closed.
pub const IDLE_TTL: Duration = Duration::from_secs(900);
/// How often idle sessions are looked for.
const REAP_EVERY: Duration = Duration::from_secs(30);

struct Entry {
    computer: SharedComputer,
    last_used: Instant,
}

/// The computer sessions of one MCP connection.
pub(super) struct ComputerTable {
    pool: Arc<ComputerPool>,
    by_id: Mutex<HashMap<String, Entry>>,
    /// Sessions being opened; they count toward [`MAX_COMPUTERS_PER_CONNECTION`].
    opening: AtomicUsize,
    reaper: std::sync::OnceLock<()>,
    /// Sessions record their trajectory in `<dir>/<id>` (see `McpOptions::trajectories`).
    trajectories: Option<PathBuf>,
}

/// A slot taken for a session being opened, given back when dropped.
struct Opening(Arc<ComputerTable>);

impl Drop for Opening {
    fn drop(&mut self) {
        self.0.opening.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The approval a step waits for, denied when this is dropped undecided: an MCP call
/// cancelled mid-step or while the user is asked must not leave its session waiting for a
/// decision nobody can make (these tools have no way to decide it later).
struct Undecided {
    pool: Arc<ComputerPool>,
    computer: SharedComputer,
    approval: Option<String>,
}

impl Undecided {
    /// The caller decides it: nothing to do when dropped.
    fn decided(&mut self) {
        self.approval = None;
    }
}

impl Drop for Undecided {
    fn drop(&mut self) {
        let Some(approval) = self.approval.take() else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let pool = self.pool.clone();
            let computer = self.computer.clone();
            runtime.spawn(async move {
                let _denied = pool.decide(&computer, approval, false).await;
            });
        }
    }
}

enum Work {
    Step(ComputerCall, Value),
    Decide(String, bool),
}

/// Runs a step (or a decision) on a task of its own, so it is never cut in half; if the
/// caller is gone by the time it ends, a step that asks for approval is denied (see
/// [`Undecided`]).
async fn run(
    pool: &Arc<ComputerPool>,
    computer: &SharedComputer,
    work: Work,
) -> Result<(Stepped, Undecided), ComputerError> {
    let pool = pool.clone();
    let computer = computer.clone();
    let task = tokio::spawn(async move {
        let stepped = match work {
            Work::Step(call, raw) => pool.step(&computer, call, raw).await?,
            Work::Decide(approval, approve) => pool.decide(&computer, approval, approve).await?,
        };
        let approval = stepped
            .step
            .pending_approval
            .as_ref()
            .map(|approval| approval.approval_id.clone());
        Ok((
            stepped,
            Undecided {
                pool,
                computer,
                approval,
            },
        ))
    });
    task.await
        .map_err(|error| ComputerError::Browser(format!("the step failed: {error}")))?
}

impl ComputerTable {
    pub(super) fn new(
        pool: Arc<ComputerPool>,
        trajectories: Option<PathBuf>,
    ) -> Arc<ComputerTable> {
        Arc::new(ComputerTable {
            pool,
            by_id: Mutex::default(),
            opening: AtomicUsize::new(0),
            reaper: std::sync::OnceLock::new(),
            trajectories,
        })
    }

    fn table(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.by_id.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn get(&self, id: &str) -> Option<SharedComputer> {
        let mut table = self.table();
        let entry = table.get_mut(id)?;
        entry.last_used = Instant::now();
        Some(entry.computer.clone())
    }

    fn spawn_reaper(self: &Arc<Self>) {
        self.reaper.get_or_init(|| {
            spawn_periodic(self, REAP_EVERY, |table| async move {
                let idle: Vec<SharedComputer> = {
                    let mut map = table.table();
                    let ids: Vec<String> = map
                        .iter()
                        .filter(|(_, entry)| entry.last_used.elapsed() >= IDLE_TTL)
                        .map(|(id, _)| id.clone())
                        .collect();
                    ids.iter()
                        .filter_map(|id| map.remove(id).map(|entry| entry.computer))
                        .collect()
                };
                for computer in idle {
                    table
                        .pool
                        .close(&computer, "closed after 15 minutes unused")
                        .await;
                }
            });
        });
    }
}

impl Drop for ComputerTable {
    /// The connection ended: its sessions close (their browser contexts are disposed of).
    fn drop(&mut self) {
        let open: Vec<SharedComputer> = self
            .by_id
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .drain()
            .map(|(_, entry)| entry.computer)
            .collect();
        if open.is_empty() {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let pool = self.pool.clone();
            runtime.spawn(async move {
                for computer in open {
                    pool.close(&computer, "the MCP connection ended").await;
                }
            });
        }
    }
}

fn object(schema: Value) -> Map<String, Value> {
    match schema {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// The three tools.
pub(super) fn tools() -> Vec<Tool> {
    let size = |what: &str| json!({"type": "string", "description": what});
    let open = Tool::new(
        "computer_open",
        "Open an isolated browser (its own cookies and storage) at `url` and return the first \
         screenshot and the session id for the `computer` tool. Coordinates you send are in \
         the screenshot's pixels.",
        object(json!({
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "The page to open (http or https)."},
                "viewport": size("Browser viewport in CSS pixels, WxH (default 1280x800)."),
                "display": size("Size of the screenshots you get and of the coordinates you send: WxH, xga, wxga, fwxga or budget (default: the viewport, scaled down to at most 1568 px on the long edge and 1.15 megapixels)."),
                "dpr": {"type": "number", "enum": [1, 2], "description": "Device pixel ratio (default 1)."},
                "exact_dpr": {"type": "boolean", "description": "Keep the page's devicePixelRatio exactly dpr (default false: a page shown scaled down is drawn at the screenshot's scale, which is quicker, and reads that scale as its devicePixelRatio)."},
                "allow_origins": {"type": "array", "items": {"type": "string"}, "description": "Origins the session may reach, e.g. https://example.com or https://*.example.com (default: all not blocked)."},
                "block_origins": {"type": "array", "items": {"type": "string"}, "description": "Origins the session may never reach."}
            },
            "required": ["url"],
            "additionalProperties": false
        })),
    );
    let point =
        json!({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2});
    let act = Tool::new(
        "computer",
        "Act on a browser opened with computer_open, with the Anthropic computer tool's \
         actions (`{\"id\", \"action\": \"left_click\", \"coordinate\": [x, y]}`, `type` with \
         `text`, `key` with `text` like `ctrl+a`, `scroll` with `scroll_direction` and \
         `scroll_amount`, `screenshot`, …). Returns the screenshot after the action, the \
         page's URL and the status. Some actions (passwords, payment fields, buy/delete \
         buttons, new sites) need the user's approval first.",
        object(json!({
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "The session id from computer_open."},
                "action": {
                    "type": "string",
                    "enum": ["screenshot", "left_click", "right_click", "middle_click", "double_click",
                             "triple_click", "mouse_move", "left_click_drag", "left_mouse_down",
                             "left_mouse_up", "scroll", "type", "key", "hold_key", "wait",
                             "cursor_position", "zoom"]
                },
                "coordinate": point,
                "start_coordinate": point,
                "text": {"type": "string", "description": "Text to type, or keys to press (xdotool names: ctrl+a, Return)."},
                "scroll_direction": {"type": "string", "enum": ["up", "down", "left", "right"]},
                "scroll_amount": {"type": "integer", "minimum": 0},
                "duration": {"type": "number", "description": "Seconds (wait, hold_key)."},
                "region": {"type": "array", "items": {"type": "integer"}, "minItems": 4, "maxItems": 4,
                           "description": "zoom: [x0, y0, x1, y1]."}
            },
            "required": ["id", "action"]
        })),
    );
    let close = Tool::new(
        "computer_close",
        "Close a browser opened with computer_open (its cookies and storage are discarded).",
        object(json!({
            "type": "object",
            "properties": {"id": {"type": "string", "description": "The session id."}},
            "required": ["id"],
            "additionalProperties": false
        })),
    );
    vec![open, act, close]
}

fn failure(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

fn describe(error: &ComputerError) -> String {
    match error {
        ComputerError::Pending(id) => {
            format!("a step of this session still waits for approval {id}")
        }
        other => other.to_string(),
    }
}

/// The tool result for a step: the screenshot, a text summary for the model, the step
/// (without the image bytes) as `structuredContent`, `isError` unless it is `ok`.
fn step_result(step: &ComputerStep, note: Option<&str>) -> CallToolResult {
    let mut text = match step.status {
        StepStatus::Ok => "status: ok".to_owned(),
        StepStatus::Error => "status: error".to_owned(),
        StepStatus::Denied => "status: denied".to_owned(),
        StepStatus::ApprovalRequired => "status: approval_required".to_owned(),
    };
    if let Some(error) = &step.error {
        text.push_str(&format!("\nerror: {error}"));
    }
    if let Some(url) = &step.current_url {
        text.push_str(&format!("\ncurrent_url: {url}"));
    }
    if let Some(output) = &step.text {
        text.push_str(&format!("\ntext: {output}"));
    }
    if let Some(note) = note {
        text.push_str(&format!("\n{note}"));
    }
    let mut content = Vec::new();
    if let Some(shot) = &step.screenshot {
        content.push(ContentBlock::image(
            shot.data.clone(),
            shot.media_type.clone(),
        ));
    }
    content.push(ContentBlock::text(text));
    let mut structured = serde_json::to_value(step).unwrap_or(Value::Null);
    if let Some(shot) = structured
        .get_mut("screenshot")
        .and_then(Value::as_object_mut)
    {
        shot.remove("data");
    }
    let mut result = if step.status == StepStatus::Ok {
        CallToolResult::success(content)
    } else {
        CallToolResult::error(content)
    };
    result.structured_content = Some(structured);
    result
}

fn string_arg<'a>(arguments: &'a Map<String, Value>, name: &str) -> Result<&'a str, String> {
    match arguments.get(name) {
        Some(Value::String(value)) => Ok(value),
        Some(other) => Err(format!("`{name}` must be a string, not {other}")),
        None => Err(format!("`{name}` is required")),
    }
}

/// What the MCP server needs to run the computer tools of one connection.
pub(super) struct ComputerTools<'a> {
    pub(super) table: &'a Arc<ComputerTable>,
    pub(super) rules: &'a Option<Value>,
}

impl ComputerTools<'_> {
    pub(super) async fn open(
        &self,
        arguments: Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let mut body = Value::Object(arguments);
        if let Some(map) = body.as_object_mut() {
            // The model chooses where to go, the operator what needs approval.
            if map.contains_key("rules") || map.contains_key("ttl_seconds") {
                return failure(
                    "computer_open takes url, viewport, display, dpr, exact_dpr, allow_origins, \
                     block_origins",
                );
            }
            if let Some(rules) = self.rules {
                map.insert("rules".into(), rules.clone());
            }
        }
        let body: CreateComputer = match serde_json::from_value(body) {
            Ok(body) => body,
            Err(error) => return failure(format!("invalid arguments: {error}")),
        };
        let mut setup = match Setup::parse(&body) {
            Ok(setup) => setup,
            Err(error) => return failure(describe(&error)),
        };
        // The model wrote allow_origins: it narrows the session, but only the operator may
        // open private networks to it.
        setup.policy.allow_is_model_chosen = true;
        // The start page is a navigation the model chose: it passes the origin policy
        // (private networks included) and then the same gate as one (with the default
        // rules a new origin asks the user). Nobody is asked about a page that is refused.
        if let Some(why) = self.table.pool.refusal(&setup.policy, &setup.url) {
            return failure(format!("blocked: {} ({why})", setup.url));
        }
        if let Some(refused) = gate_start(&self.table.pool, &setup, context).await {
            return refused;
        }
        {
            // Counted under the table's lock, so concurrent calls cannot pass the cap.
            let table = self.table.table();
            if table.len() + self.table.opening.load(Ordering::SeqCst)
                >= MAX_COMPUTERS_PER_CONNECTION
            {
                return failure(format!(
                    "at most {MAX_COMPUTERS_PER_CONNECTION} browsers may be open at once; close \
                     one with computer_close"
                ));
            }
            self.table.opening.fetch_add(1, Ordering::SeqCst);
        }
        let slot = Opening(self.table.clone());
        let id = fresh_id("cmp");
        // On a task of its own: a cancelled call must not drop an opened session unseen.
        let opening = id.clone();
        let task = tokio::spawn(async move {
            let table = &slot.0;
            let record = table.trajectories.as_ref().map(|dir| dir.join(&opening));
            let (computer, first) = table.pool.open(opening.clone(), &setup, record).await?;
            let sizes = {
                let live = computer.lock().await;
                (live.display, live.viewport)
            };
            table.table().insert(
                opening,
                Entry {
                    computer,
                    last_used: Instant::now(),
                },
            );
            table.spawn_reaper();
            drop(slot);
            Ok::<_, ComputerError>((first, sizes))
        });
        let (first, (display, viewport)) = match task.await {
            Ok(Ok(opened)) => opened,
            Ok(Err(error)) => return failure(describe(&error)),
            Err(error) => return failure(format!("opening the browser failed: {error}")),
        };
        let mut result = step_result(
            &first.step,
            Some(&format!(
                "id: {id}\ndisplay: {display} (screenshots are this size; send coordinates in it)\n\
                 viewport: {viewport} CSS px"
            )),
        );
        if let Some(Value::Object(structured)) = &mut result.structured_content {
            structured.insert("id".into(), json!(id));
            structured.insert(
                "display".into(),
                json!({"width": display.width, "height": display.height}),
            );
        }
        result
    }

    pub(super) async fn act(
        &self,
        mut arguments: Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let id = match string_arg(&arguments, "id") {
            Ok(id) => id.to_owned(),
            Err(message) => return failure(message),
        };
        let Some(computer) = self.table.get(&id) else {
            return failure(format!(
                "no open browser with id {id:?}; open one with computer_open"
            ));
        };
        arguments.remove("id");
        // `{"id", "action": {...}}` carries the input whole; otherwise the other
        // arguments are the input (`{"id", "action": "left_click", "coordinate": [x, y]}`).
        let input = match arguments.remove("action") {
            Some(Value::Object(input)) => Value::Object(input),
            Some(action) => {
                arguments.insert("action".into(), action);
                Value::Object(arguments)
            }
            None => {
                return failure(
                    "`action` is required (left_click, type, key, scroll, screenshot, …)",
                );
            }
        };
        let call = match decode_actions(Vendor::Anthropic, std::slice::from_ref(&input), None) {
            Ok(call) => call,
            Err(message) => return failure(message),
        };
        let raw = json!({"format": "anthropic", "actions": [input]});
        let pool = &self.table.pool;
        let (mut stepped, mut undecided) = match run(pool, &computer, Work::Step(call, raw)).await {
            Ok(stepped) => stepped,
            Err(error) => return self.failed(&id, &error),
        };
        let mut note = None;
        // A call may ask more than once (a later action of the same call); each is decided.
        while let Some(approval) = stepped.step.pending_approval.clone() {
            let asked = tokio::select! {
                asked = ask(&context.peer, &approval) => asked,
                () = context.ct.cancelled() => {
                    // Nobody reads the answer any more, and the session takes no other
                    // step until this one is decided: `undecided` denies it as it goes.
                    return failure("cancelled; the step waiting for approval was denied");
                }
            };
            let approve = match asked {
                Some(approve) => approve,
                None => {
                    note = Some(format!(
                        "[refused] this action needs the user's approval (rule {}: {}), and this \
                         MCP client does not support elicitation, so nobody could be asked",
                        approval.rule, approval.reason
                    ));
                    false
                }
            };
            undecided.decided();
            let decide = Work::Decide(approval.approval_id, approve);
            (stepped, undecided) = match run(pool, &computer, decide).await {
                Ok(stepped) => stepped,
                Err(error) => return self.failed(&id, &error),
            };
        }
        step_result(&stepped.step, note.as_deref())
    }

    /// The result for a step that failed; a session whose browser is gone is forgotten.
    fn failed(&self, id: &str, error: &ComputerError) -> CallToolResult {
        if matches!(error, ComputerError::Lost(_) | ComputerError::Closed(_)) {
            self.table.table().remove(id);
        }
        failure(describe(error))
    }

    pub(super) async fn close(&self, arguments: Map<String, Value>) -> CallToolResult {
        let id = match string_arg(&arguments, "id") {
            Ok(id) => id.to_owned(),
            Err(message) => return failure(message),
        };
        let removed = self.table.table().remove(&id);
        match removed {
            Some(entry) => {
                self.table
                    .pool
                    .close(&entry.computer, "closed by computer_close")
                    .await;
                CallToolResult::success(vec![ContentBlock::text(format!("closed {id}"))])
            }
            None => failure(format!("no open browser with id {id:?}")),
        }
    }
}

/// The approval gate for a session's start page, as for a navigation to a new origin
/// (an origin the operator named with `--allow-origin` is approved already). `Some`: the
/// result refusing it.
async fn gate_start(
    pool: &ComputerPool,
    setup: &Setup,
    context: &RequestContext<RoleServer>,
) -> Option<CallToolResult> {
    if pool.operator_allows(&setup.url) {
        return None;
    }
    let action = Action::Navigate {
        url: setup.url.clone(),
    };
    let verdict = setup.rules.evaluate(&GateContext {
        action: &action,
        element: None,
        navigation: Some(Navigation {
            to: setup.url.clone(),
            new_origin: true,
        }),
        chords: Vec::new(),
    });
    let rule = verdict.rule.clone().unwrap_or_default();
    match verdict.decision {
        Decision::Allow => None,
        Decision::Deny => Some(failure(format!(
            "[denied] opening {} is denied by rule `{rule}`: {}",
            setup.url, verdict.reason
        ))),
        Decision::Ask => {
            let approval = crate::api::ComputerApproval {
                approval_id: String::new(),
                rule: rule.clone(),
                reason: verdict.reason.clone(),
                element: None,
                action_index: 0,
                action: format!("open {}", setup.url),
            };
            let asked = tokio::select! {
                asked = ask(&context.peer, &approval) => asked,
                () = context.ct.cancelled() => return Some(failure("cancelled")),
            };
            match asked {
                Some(true) => None,
                Some(false) => Some(failure(format!(
                    "[refused] the user declined opening {} (rule {rule}: {})",
                    setup.url, verdict.reason
                ))),
                None => Some(failure(format!(
                    "[refused] opening {} needs the user's approval (rule {rule}: {}), and this \
                     MCP client does not support elicitation, so nobody could be asked",
                    setup.url, verdict.reason
                ))),
            }
        }
    }
}

/// Asks the user through an elicitation; `None` when the client cannot be asked.
async fn ask(peer: &Peer<RoleServer>, approval: &crate::api::ComputerApproval) -> Option<bool> {
    if !peer
        .supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
    {
        return None;
    }
    let target = approval
        .element
        .as_deref()
        .map(|element| format!(" on {element}"))
        .unwrap_or_default();
    let message = format!(
        "The assistant's browser wants to {}{target}.\nRule `{}`: {}.\nAccept to allow this \
         action; decline to refuse it.",
        approval.action, approval.rule, approval.reason
    );
    Some(
        super::approval::elicit(peer, message).await
            == cordon_protocol::execution::Decision::Approve,
    )
}
