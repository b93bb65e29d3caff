//! [`Op`]: one screen-level input operation in CSS pixels, which is all a backend has to
//! know how to run; and the modifier bits ops carry.

use crate::display::CssPoint;
use cordon_protocol::computer::{Button, Key};
use serde::{Deserialize, Serialize};

/// Modifier bits as CDP wants them.
pub mod modifier {
    pub const ALT: u8 = 1;
    pub const CTRL: u8 = 2;
    pub const META: u8 = 4;
    pub const SHIFT: u8 = 8;
}

pub(crate) fn modifier_bit(k: &Key) -> u8 {
    match k.as_str() {
        "Alt" => modifier::ALT,
        "Control" => modifier::CTRL,
        "Meta" => modifier::META,
        "Shift" => modifier::SHIFT,
        _ => 0,
    }
}

/// One screen-level input operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Op {
    Move {
        to: CssPoint,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pressed: Option<Button>,
    },
    Down {
        at: CssPoint,
        button: Button,
        count: u8,
        modifiers: u8,
    },
    Up {
        at: CssPoint,
        button: Button,
        count: u8,
        modifiers: u8,
    },
    Wheel {
        at: CssPoint,
        dx: f64,
        dy: f64,
        modifiers: u8,
    },
    KeyDown {
        key: Key,
        modifiers: u8,
    },
    KeyUp {
        key: Key,
        modifiers: u8,
    },
    /// Insert text as if typed (no per-key events).
    Text {
        text: String,
    },
    Navigate {
        url: String,
    },
    /// -1 back, +1 forward.
    History {
        delta: i32,
    },
    /// A wait the model asked for (never used for settling).
    Sleep {
        ms: u64,
    },
}
