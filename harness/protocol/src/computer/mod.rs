//! Computer use: the canonical [`Action`] and lossless codecs for each vendor's shape.
//!
//! A model asks for UI actions in its vendor's shape; [`anthropic`], [`openai`] and
//! [`gemini`] decode those into a [`ComputerCall`] (one or more [`Action`]s plus the call
//! id, the coordinate space and any vendor safety checks) and encode them back. The
//! canonical form keeps every vendor-specific detail it needs to re-encode the same call
//! (scroll units, Gemini's normalized grid, OpenAI's batched form), so
//! `encode(decode(x)) == x` for calls written the way the vendor writes them, and
//! `decode(encode(a)) == a` for every action the vendor can express.
//!
//! Coordinates stay in the space the model used ([`CoordSpace`]); mapping them onto a real
//! screen is the executor's job (`cordon-computer`), because only it knows the image it sent.
//!
//! ```
//! use cordon_protocol::computer::{anthropic, Action, Button, Point};
//! let input = serde_json::json!({"action": "left_click", "coordinate": [100, 200]});
//! let action = anthropic::decode_input(&input, anthropic::Version::V20250124).unwrap();
//! assert_eq!(action, Action::Click {
//!     at: Some(Point { x: 100, y: 200 }), button: Button::Left, count: 1, modifiers: vec![],
//! });
//! assert_eq!(anthropic::encode_input(&action).unwrap(), input);
//! ```

pub mod anthropic;
pub mod gemini;
mod keys;
pub mod openai;
mod result;

pub use keys::Key;
pub use result::{ComputerOutput, Screenshot};

use serde::{Deserialize, Serialize};

/// The vendors whose computer-use shapes this module speaks, plus Cordon's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Vendor {
    Anthropic,
    OpenAi,
    Gemini,
    /// [`Action`] serialized as is (`{"kind": "click", ...}`).
    Native,
}

impl Vendor {
    /// Parses `anthropic | openai | gemini | native`.
    pub fn parse(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "anthropic" | "claude" => Some(Self::Anthropic),
            "openai" => Some(Self::OpenAi),
            "gemini" | "google" => Some(Self::Gemini),
            "native" | "cordon" => Some(Self::Native),
            _ => None,
        }
    }
}

/// A point in the model's coordinate space. Signed so that a model's negative coordinate
/// survives decoding and is rejected by the executor with a message naming the valid range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Point {
    pub x: i64,
    pub y: i64,
}

impl Point {
    pub const fn new(x: i64, y: i64) -> Self {
        Self { x, y }
    }
}

/// A rectangle given by two corners (inclusive top-left, exclusive bottom-right).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Region {
    pub x0: i64,
    pub y0: i64,
    pub x1: i64,
    pub y1: i64,
}

/// Which coordinate space a call's points are in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(tag = "space", rename_all = "snake_case")]
#[non_exhaustive]
pub enum CoordSpace {
    /// Pixels of the screenshot the model was shown (Anthropic, OpenAI).
    #[default]
    Display,
    /// A grid `0..=max` on both axes regardless of the screen (Gemini: `max = 999`).
    Normalized { max: u32 },
}

/// Gemini's grid: 0–999 on both axes.
pub const GEMINI_GRID: CoordSpace = CoordSpace::Normalized { max: 999 };

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Button {
    Left,
    Right,
    Middle,
    Back,
    Forward,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Up,
    Down,
    Left,
    Right,
}

impl Direction {
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "up" => Some(Self::Up),
            "down" => Some(Self::Down),
            "left" => Some(Self::Left),
            "right" => Some(Self::Right),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Up => "up",
            Self::Down => "down",
            Self::Left => "left",
            Self::Right => "right",
        }
    }
}

/// How far to scroll, in the unit the vendor used (kept so the call re-encodes exactly).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "unit", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ScrollDelta {
    /// Wheel notches (Anthropic `scroll_direction` + `scroll_amount`).
    Ticks { direction: Direction, amount: u32 },
    /// Pixels of the model's display (OpenAI `scroll_x`/`scroll_y`; positive = right/down).
    Pixels { x: i64, y: i64 },
    /// A distance on the normalized grid (Gemini `scroll_at` `magnitude`, default 800).
    Grid {
        direction: Direction,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        magnitude: Option<u32>,
    },
    /// One viewport of the whole document (Gemini `scroll_document`).
    Page { direction: Direction },
}

/// One UI action, in the model's coordinate space.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Action {
    Screenshot,
    CursorPosition,
    /// Press and release `button` `count` times (2 = double, 3 = triple) with `modifiers` held.
    /// `at: None` clicks where the pointer is.
    Click {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Point>,
        button: Button,
        count: u8,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        modifiers: Vec<Key>,
    },
    MouseDown {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Point>,
        button: Button,
    },
    MouseUp {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Point>,
        button: Button,
    },
    MouseMove {
        to: Point,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        modifiers: Vec<Key>,
    },
    /// Press the left button at `path[0]`, move through the rest, release at the last point.
    Drag {
        path: Vec<Point>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        modifiers: Vec<Key>,
    },
    /// `at: None` scrolls where the pointer is (or the document, for [`ScrollDelta::Page`]).
    Scroll {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Point>,
        delta: ScrollDelta,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        modifiers: Vec<Key>,
    },
    /// Type `text` (Unicode, newlines allowed). Gemini's `type_text_at` also clicks at `at`
    /// first, optionally clears the field, and presses Enter after (both default to true).
    Type {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Point>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        press_enter: Option<bool>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        clear_before: Option<bool>,
    },
    /// Press each chord in turn; the keys of one chord are held together (`ctrl+a`).
    Key {
        chords: Vec<Vec<Key>>,
    },
    HoldKey {
        keys: Vec<Key>,
        duration_secs: f64,
    },
    Wait {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        duration_secs: Option<f64>,
    },
    /// Show `region` at native resolution, scaled into the model's display (Anthropic
    /// `computer_20251124`).
    Zoom {
        region: Region,
    },
    Navigate {
        url: String,
    },
    GoBack,
    GoForward,
    /// Go to the search engine's start page (Gemini `search`).
    Search,
    OpenWebBrowser,
}

impl Action {
    /// The action's kind as a stable snake_case name, used by gate rules and traces.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Screenshot => "screenshot",
            Self::CursorPosition => "cursor_position",
            Self::Click { .. } => "click",
            Self::MouseDown { .. } => "mouse_down",
            Self::MouseUp { .. } => "mouse_up",
            Self::MouseMove { .. } => "mouse_move",
            Self::Drag { .. } => "drag",
            Self::Scroll { .. } => "scroll",
            Self::Type { .. } => "type",
            Self::Key { .. } => "key",
            Self::HoldKey { .. } => "hold_key",
            Self::Wait { .. } => "wait",
            Self::Zoom { .. } => "zoom",
            Self::Navigate { .. } => "navigate",
            Self::GoBack => "go_back",
            Self::GoForward => "go_forward",
            Self::Search => "search",
            Self::OpenWebBrowser => "open_web_browser",
        }
    }

    /// The point the action acts on first (where the pointer will be when it starts).
    pub fn target(&self) -> Option<Point> {
        match self {
            Self::Click { at, .. }
            | Self::MouseDown { at, .. }
            | Self::MouseUp { at, .. }
            | Self::Scroll { at, .. }
            | Self::Type { at, .. } => *at,
            Self::MouseMove { to, .. } => Some(*to),
            Self::Drag { path, .. } => path.first().copied(),
            _ => None,
        }
    }
}

/// A vendor safety check the model raised and the caller must acknowledge to proceed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SafetyCheck {
    /// OpenAI's check id; for Gemini the fixed id [`gemini::SAFETY_CHECK_ID`].
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One computer-use call from a model: the actions to run, then one screenshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComputerCall {
    pub vendor: Vendor,
    /// The id the result must carry (`tool_use.id`, `call_id`, Gemini's optional `id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    pub actions: Vec<Action>,
    #[serde(default)]
    pub coords: CoordSpace,
    /// Checks the vendor wants acknowledged before the actions run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub safety_checks: Vec<SafetyCheck>,
    /// OpenAI only: the call used the batched `actions[]` form (kept to re-encode exactly).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub batched: bool,
}

impl ComputerCall {
    /// A native call with one action in display coordinates.
    pub fn native(action: Action) -> Self {
        Self {
            vendor: Vendor::Native,
            call_id: None,
            actions: vec![action],
            coords: CoordSpace::Display,
            safety_checks: Vec::new(),
            batched: false,
        }
    }
}

/// A vendor shape that could not be decoded. The model can fix these, so executors return
/// them to it as error results.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    #[error("expected a JSON object{0}")]
    NotAnObject(&'static str),
    #[error("unknown action `{action}` for {vendor}; known actions: {known}")]
    UnknownAction {
        vendor: &'static str,
        action: String,
        known: &'static str,
    },
    #[error("action `{action}` needs `{field}`")]
    MissingField { action: String, field: &'static str },
    #[error("action `{action}`: `{field}` {reason}")]
    InvalidField {
        action: String,
        field: &'static str,
        reason: String,
    },
    #[error("unknown key name `{0}`")]
    UnknownKey(String),
}

/// A canonical action the target vendor has no way to express.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{vendor} cannot express {what}")]
pub struct EncodeError {
    pub vendor: &'static str,
    pub what: String,
}

impl EncodeError {
    fn new(vendor: &'static str, what: impl Into<String>) -> Self {
        Self {
            vendor,
            what: what.into(),
        }
    }
}

/// Decodes one JSON value in `vendor`'s shape. Accepts the envelope (Anthropic `tool_use`
/// block, OpenAI `computer_call` item, Gemini `function_call`) or the bare action.
pub fn decode(vendor: Vendor, value: &serde_json::Value) -> Result<ComputerCall, DecodeError> {
    match vendor {
        Vendor::Anthropic => anthropic::decode_tool_use(value, anthropic::Version::V20251124),
        Vendor::OpenAi => openai::decode_call(value),
        Vendor::Gemini => gemini::decode_function_call(value),
        Vendor::Native => decode_native(value),
    }
}

/// Encodes a call in `vendor`'s envelope shape.
pub fn encode(call: &ComputerCall, vendor: Vendor) -> Result<serde_json::Value, EncodeError> {
    match vendor {
        Vendor::Anthropic => anthropic::encode_tool_use(call),
        Vendor::OpenAi => openai::encode_call(call),
        Vendor::Gemini => gemini::encode_function_call(call),
        Vendor::Native => serde_json::to_value(call)
            .map_err(|e| EncodeError::new("native", format!("this call: {e}"))),
    }
}

/// Native shape: a [`ComputerCall`], or a bare [`Action`], or `{"actions": [...]}`.
fn decode_native(value: &serde_json::Value) -> Result<ComputerCall, DecodeError> {
    let invalid = |e: serde_json::Error| DecodeError::InvalidField {
        action: "native".into(),
        field: "kind",
        reason: e.to_string(),
    };
    if value.get("kind").is_some() {
        let action: Action = serde_json::from_value(value.clone()).map_err(invalid)?;
        return Ok(ComputerCall::native(action));
    }
    if value.get("actions").is_some() {
        let actions: Vec<Action> =
            serde_json::from_value(value["actions"].clone()).map_err(invalid)?;
        let mut call = ComputerCall::native(Action::Screenshot);
        call.actions = actions;
        if let Some(id) = value.get("call_id").and_then(|v| v.as_str()) {
            call.call_id = Some(id.to_owned());
        }
        if let Some(c) = value.get("coords") {
            call.coords = serde_json::from_value(c.clone()).map_err(invalid)?;
        }
        return Ok(call);
    }
    Err(DecodeError::NotAnObject(
        " with `kind` (one action) or `actions` (a list)",
    ))
}

// Small helpers shared by the vendor codecs.
pub(crate) mod util {
    use super::{DecodeError, Point};
    use serde_json::{Map, Value};

    pub fn obj<'a>(
        v: &'a Value,
        what: &'static str,
    ) -> Result<&'a Map<String, Value>, DecodeError> {
        v.as_object().ok_or(DecodeError::NotAnObject(what))
    }

    pub fn str_field<'a>(
        o: &'a Map<String, Value>,
        action: &str,
        field: &'static str,
    ) -> Result<&'a str, DecodeError> {
        match o.get(field) {
            None | Some(Value::Null) => Err(DecodeError::MissingField {
                action: action.into(),
                field,
            }),
            Some(Value::String(s)) => Ok(s),
            Some(_) => Err(invalid(action, field, "must be a string")),
        }
    }

    pub fn opt_str<'a>(
        o: &'a Map<String, Value>,
        action: &str,
        field: &'static str,
    ) -> Result<Option<&'a str>, DecodeError> {
        match o.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(invalid(action, field, "must be a string")),
        }
    }

    pub fn invalid(action: &str, field: &'static str, reason: impl Into<String>) -> DecodeError {
        DecodeError::InvalidField {
            action: action.into(),
            field,
            reason: reason.into(),
        }
    }

    /// An integer coordinate. Models sometimes send `12.0`; whole floats are accepted,
    /// fractional ones are rejected rather than silently rounded.
    pub fn int(v: &Value, action: &str, field: &'static str) -> Result<i64, DecodeError> {
        if let Some(i) = v.as_i64() {
            return Ok(i);
        }
        match v.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => Ok(f as i64),
            Some(f) => Err(invalid(
                action,
                field,
                format!("must be a whole number, got {f}"),
            )),
            None => Err(invalid(action, field, "must be a number")),
        }
    }

    pub fn int_field(
        o: &Map<String, Value>,
        action: &str,
        field: &'static str,
    ) -> Result<i64, DecodeError> {
        match o.get(field) {
            None | Some(Value::Null) => Err(DecodeError::MissingField {
                action: action.into(),
                field,
            }),
            Some(v) => int(v, action, field),
        }
    }

    pub fn opt_f64(
        o: &Map<String, Value>,
        action: &str,
        field: &'static str,
    ) -> Result<Option<f64>, DecodeError> {
        match o.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => match v.as_f64() {
                Some(f) if f.is_finite() && f >= 0.0 => Ok(Some(f)),
                _ => Err(invalid(action, field, "must be a non-negative number")),
            },
        }
    }

    pub fn opt_bool(
        o: &Map<String, Value>,
        action: &str,
        field: &'static str,
    ) -> Result<Option<bool>, DecodeError> {
        match o.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(invalid(action, field, "must be true or false")),
        }
    }

    /// `[x, y]`
    pub fn pair(v: &Value, action: &str, field: &'static str) -> Result<Point, DecodeError> {
        match v.as_array().map(Vec::as_slice) {
            Some([x, y]) => Ok(Point {
                x: int(x, action, field)?,
                y: int(y, action, field)?,
            }),
            _ => Err(invalid(action, field, "must be [x, y]")),
        }
    }

    /// A number as JSON, integral when it is a whole number (so `5.0` seconds re-encodes as `5`
    /// only if it was sent as `5`; we keep what serde_json parsed).
    pub fn num(f: f64) -> Value {
        if f.fract() == 0.0 && f.abs() < 1e15 {
            Value::from(f as i64)
        } else {
            Value::from(f)
        }
    }
}

#[cfg(test)]
mod tests;
