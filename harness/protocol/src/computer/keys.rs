//! Key names: one canonical spelling (the DOM `KeyboardEvent.key` value, e.g. `Control`,
//! `Enter`, `ArrowUp`, `a`, ` `) and each vendor's spelling of it.
//!
//! Vendors disagree: Anthropic uses xdotool keysyms (`ctrl+a`, `Return`, `Page_Down`),
//! OpenAI upper-case names in arrays (`["CTRL", "A"]`, `ENTER`), Gemini DOM-like names
//! joined with `+` (`Control+C`). Decoding accepts every alias case-insensitively; encoding
//! writes each vendor's usual spelling.

use super::DecodeError;
use serde::{Deserialize, Serialize};

/// A key in canonical (DOM `key`) spelling.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Key(String);

/// (canonical, xdotool, OpenAI, aliases accepted on input besides those three)
const TABLE: &[(&str, &str, &str, &[&str])] = &[
    (
        "Control",
        "ctrl",
        "CTRL",
        &["control", "control_l", "control_r", "ctl"],
    ),
    ("Shift", "shift", "SHIFT", &["shift_l", "shift_r"]),
    ("Alt", "alt", "ALT", &["alt_l", "alt_r", "option", "opt"]),
    (
        "Meta",
        "super",
        "META",
        &[
            "meta", "super_l", "super_r", "cmd", "command", "win", "windows", "meta_l", "meta_r",
        ],
    ),
    ("Enter", "Return", "ENTER", &["enter", "kp_enter"]),
    ("Tab", "Tab", "TAB", &[]),
    ("Escape", "Escape", "ESC", &["esc"]),
    ("Backspace", "BackSpace", "BACKSPACE", &[]),
    ("Delete", "Delete", "DELETE", &["del"]),
    ("Insert", "Insert", "INSERT", &["ins"]),
    ("Home", "Home", "HOME", &[]),
    ("End", "End", "END", &[]),
    (
        "PageUp",
        "Page_Up",
        "PAGEUP",
        &["prior", "pgup", "page_up", "pageup"],
    ),
    (
        "PageDown",
        "Page_Down",
        "PAGEDOWN",
        &["next", "pgdn", "page_down", "pagedown"],
    ),
    ("ArrowUp", "Up", "ARROWUP", &["up", "arrowup", "arrow_up"]),
    (
        "ArrowDown",
        "Down",
        "ARROWDOWN",
        &["down", "arrowdown", "arrow_down"],
    ),
    (
        "ArrowLeft",
        "Left",
        "ARROWLEFT",
        &["left", "arrowleft", "arrow_left"],
    ),
    (
        "ArrowRight",
        "Right",
        "ARROWRIGHT",
        &["right", "arrowright", "arrow_right"],
    ),
    ("CapsLock", "Caps_Lock", "CAPSLOCK", &["capslock"]),
    (" ", "space", "SPACE", &["spacebar"]),
    ("-", "minus", "-", &[]),
    ("=", "equal", "=", &[]),
    ("+", "plus", "+", &[]),
    (",", "comma", ",", &[]),
    (".", "period", ".", &[]),
    ("/", "slash", "/", &[]),
    ("\\", "backslash", "\\", &[]),
    (";", "semicolon", ";", &[]),
    ("'", "apostrophe", "'", &[]),
    ("`", "grave", "`", &[]),
    ("[", "bracketleft", "[", &[]),
    ("]", "bracketright", "]", &[]),
];

impl Key {
    /// The canonical name (DOM `KeyboardEvent.key`).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Parses any spelling (xdotool, OpenAI, Gemini, DOM), case-insensitively for names.
    /// A single character stays as given, so `A` (xdotool: shifted a) keeps its case;
    /// use [`Key::parse_openai`] where upper case only names the key.
    pub fn parse(name: &str) -> Result<Self, DecodeError> {
        if name.chars().count() == 1 {
            return Ok(Self(name.to_owned()));
        }
        let lower = name.to_ascii_lowercase();
        for (canon, xdo, oai, aliases) in TABLE {
            if canon.eq_ignore_ascii_case(&lower)
                || xdo.eq_ignore_ascii_case(&lower)
                || oai.eq_ignore_ascii_case(&lower)
                || aliases.contains(&lower.as_str())
            {
                return Ok(Self((*canon).to_owned()));
            }
        }
        // F1..F24
        if let Some(n) = lower.strip_prefix('f')
            && let Ok(n) = n.parse::<u8>()
            && (1..=24).contains(&n)
        {
            return Ok(Self(format!("F{n}")));
        }
        Err(DecodeError::UnknownKey(name.to_owned()))
    }

    /// OpenAI names keys in upper case (`["CTRL", "A"]` means Control+a, not Shift).
    pub fn parse_openai(name: &str) -> Result<Self, DecodeError> {
        let key = Self::parse(name)?;
        if key.0.chars().count() == 1 {
            return Ok(Self(key.0.to_lowercase()));
        }
        Ok(key)
    }

    /// Parses an xdotool chord (`ctrl+shift+t`, `Return`, `ctrl++`).
    pub fn parse_chord(chord: &str) -> Result<Vec<Self>, DecodeError> {
        let chord = chord.trim();
        if chord.is_empty() {
            return Err(DecodeError::UnknownKey(String::new()));
        }
        if chord == "+" {
            return Ok(vec![Self("+".into())]);
        }
        let mut keys = Vec::new();
        let (body, plus_last) = match chord.strip_suffix("++") {
            Some(rest) => (rest, true),
            None => (chord, false),
        };
        for part in body.split('+') {
            keys.push(Self::parse(part.trim())?);
        }
        if plus_last {
            keys.push(Self("+".into()));
        }
        Ok(keys)
    }

    /// xdotool spelling (Anthropic).
    pub fn to_xdotool(&self) -> String {
        self.lookup(|(_, xdo, _, _)| (*xdo).to_owned())
    }

    /// OpenAI spelling: upper case.
    pub fn to_openai(&self) -> String {
        self.lookup(|(_, _, oai, _)| (*oai).to_owned())
            .to_uppercase()
    }

    /// Gemini spelling: the canonical name (`Control`, `Enter`, `a`).
    pub fn to_gemini(&self) -> String {
        if self.0 == " " {
            return "Space".into();
        }
        self.0.clone()
    }

    fn lookup(&self, f: impl Fn(&(&str, &str, &str, &[&str])) -> String) -> String {
        TABLE
            .iter()
            .find(|row| row.0 == self.0)
            .map(f)
            .unwrap_or_else(|| self.0.clone())
    }

    /// Modifier keys, which chords hold while the others are pressed.
    pub fn is_modifier(&self) -> bool {
        matches!(self.0.as_str(), "Control" | "Shift" | "Alt" | "Meta")
    }
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Joins a chord in xdotool spelling: `ctrl+a`.
pub(crate) fn chord_xdotool(keys: &[Key]) -> String {
    keys.iter()
        .map(Key::to_xdotool)
        .collect::<Vec<_>>()
        .join("+")
}
