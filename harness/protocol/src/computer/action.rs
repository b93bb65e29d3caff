//! The canonical computer-use vocabulary every vendor codec decodes into: the [`Action`],
//! its points, buttons and scroll deltas, and the [`ComputerCall`] that carries actions.

use super::keys::Key;
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
    /// OpenAI's check id; for Gemini the fixed id
    /// [`gemini::SAFETY_CHECK_ID`](super::gemini::SAFETY_CHECK_ID).
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
