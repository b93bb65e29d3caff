//! Lowering: a model-space [`Action`] becomes a list of screen-space [`Op`]s (CSS pixels),
//! which is all a backend has to know how to run. Pure, so it is tested without a browser.

use crate::display::{CapturePlan, CssPoint, Scaler};
use crate::error::ActionError;
use crate::op::{Op, modifier_bit};
use cordon_protocol::computer::{Action, Button, CoordSpace, Direction, Key, ScrollDelta};
use std::time::Duration;

/// Longest wait or key hold a model may ask for in one action.
pub const MAX_WAIT: Duration = Duration::from_secs(30);
/// CSS pixels per wheel notch (Chromium's notch on Linux is 100 px at zoom 1... close enough
/// to what models expect from "scroll 3").
pub const PX_PER_TICK: f64 = 100.0;
/// Gemini's `scroll_at` magnitude when none is given.
pub const GEMINI_DEFAULT_MAGNITUDE: u32 = 800;
/// Most characters one `type` action may carry: a long paste. More is refused (not cut),
/// so a runaway model cannot tie a session up for minutes of typing.
pub const MAX_TYPED_CHARS: usize = 20_000;
/// Most key chords one action may press in sequence.
pub const MAX_KEY_CHORDS: usize = 200;
/// Most points one drag path may have.
pub const MAX_DRAG_POINTS: usize = 1_000;

fn too_many(what: &str, got: usize, most: usize) -> ActionError {
    ActionError::Invalid(format!(
        "{what}: {got} is more than the {most} one action may have; split it into several actions"
    ))
}

/// What to capture after the action.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Capture {
    Screen,
    Zoom(CapturePlan),
}

/// An action in screen terms.
#[derive(Debug, Clone, PartialEq)]
pub struct Lowered {
    pub ops: Vec<Op>,
    pub capture: Capture,
    /// Text answer (cursor_position).
    pub text: Option<String>,
    /// The point the action touches first, for the gates.
    pub target: Option<CssPoint>,
    /// The URL it navigates to, if it does so explicitly.
    pub navigates_to: Option<String>,
}

/// Where the pointer is, and how to lower against it.
#[derive(Debug, Clone)]
pub struct Lowerer {
    pub scaler: Scaler,
    pub space: CoordSpace,
    pub pointer: CssPoint,
    pub search_url: String,
}

fn press(ops: &mut Vec<Op>, keys: &[Key]) -> u8 {
    let mut mask = 0;
    for k in keys {
        mask |= modifier_bit(k);
        ops.push(Op::KeyDown {
            key: k.clone(),
            modifiers: mask,
        });
    }
    mask
}

fn release(ops: &mut Vec<Op>, keys: &[Key], mut mask: u8) {
    for k in keys.iter().rev() {
        ops.push(Op::KeyUp {
            key: k.clone(),
            modifiers: mask,
        });
        mask &= !modifier_bit(k);
    }
}

fn chord(ops: &mut Vec<Op>, keys: &[Key]) {
    let mask = press(ops, keys);
    release(ops, keys, mask);
}

fn key(name: &str) -> Result<Key, ActionError> {
    Key::parse(name).map_err(ActionError::Decode)
}

fn duration(secs: f64) -> Result<u64, ActionError> {
    if !secs.is_finite() || secs < 0.0 || secs > MAX_WAIT.as_secs_f64() {
        return Err(ActionError::Invalid(format!(
            "duration must be between 0 and {} seconds, got {secs}",
            MAX_WAIT.as_secs()
        )));
    }
    Ok((secs * 1000.0).round() as u64)
}

/// A bare host typed by a model (`example.com`) gets `https://`.
pub fn normalize_url(url: &str) -> String {
    const KEEP: &[&str] = &[
        "about:",
        "data:",
        "blob:",
        "javascript:",
        "file:",
        "chrome:",
        "chrome-extension:",
        "view-source:",
        "devtools:",
    ];
    let url = url.trim();
    let lower = url.to_ascii_lowercase();
    if url.contains("://") || KEEP.iter().any(|k| lower.starts_with(k)) {
        // Dangerous schemes are kept as given so the policy refuses them by name.
        url.to_owned()
    } else {
        format!("https://{url}")
    }
}

impl Lowerer {
    fn css(&self, p: cordon_protocol::computer::Point) -> Result<CssPoint, ActionError> {
        self.scaler.to_css(p, self.space)
    }

    fn center(&self) -> CssPoint {
        CssPoint {
            x: f64::from(self.scaler.viewport.width) / 2.0,
            y: f64::from(self.scaler.viewport.height) / 2.0,
        }
    }

    /// Lowers one action and moves the tracked pointer.
    pub fn lower(&mut self, action: &Action) -> Result<Lowered, ActionError> {
        let mut ops = Vec::new();
        let mut capture = Capture::Screen;
        let mut text = None;
        let mut navigates_to = None;
        let target = match action.target() {
            Some(p) => Some(self.css(p)?),
            None => match action {
                Action::Click { .. } | Action::MouseDown { .. } | Action::MouseUp { .. } => {
                    Some(self.pointer)
                }
                _ => None,
            },
        };
        match action {
            Action::Screenshot | Action::OpenWebBrowser => {}
            Action::CursorPosition => {
                let p = self.scaler.to_model(self.pointer);
                text = Some(format!("X={},Y={}", p.x, p.y));
            }
            Action::Click {
                button,
                count,
                modifiers,
                ..
            } => {
                if !(1..=3).contains(count) {
                    return Err(ActionError::Invalid(format!(
                        "click count must be 1, 2 or 3, got {count}"
                    )));
                }
                let p = target.unwrap_or(self.pointer);
                let mask = press(&mut ops, modifiers);
                // No separate mouseMoved: Chromium holds it to the next frame (~13 ms,
                // FIELD-NOTES) and a press at a new position updates hover state itself.
                for i in 1..=*count {
                    ops.push(Op::Down {
                        at: p,
                        button: *button,
                        count: i,
                        modifiers: mask,
                    });
                    ops.push(Op::Up {
                        at: p,
                        button: *button,
                        count: i,
                        modifiers: mask,
                    });
                }
                release(&mut ops, modifiers, mask);
                self.pointer = p;
            }
            Action::MouseDown { at, button } | Action::MouseUp { at, button } => {
                let p = target.unwrap_or(self.pointer);
                if at.is_some() {
                    ops.push(Op::Move {
                        to: p,
                        pressed: None,
                    });
                }
                let (at, button, count, modifiers) = (p, *button, 1, 0);
                ops.push(if matches!(action, Action::MouseDown { .. }) {
                    Op::Down {
                        at,
                        button,
                        count,
                        modifiers,
                    }
                } else {
                    Op::Up {
                        at,
                        button,
                        count,
                        modifiers,
                    }
                });
                self.pointer = p;
            }
            Action::MouseMove { modifiers, .. } => {
                let p = target.unwrap_or(self.pointer);
                let mask = press(&mut ops, modifiers);
                ops.push(Op::Move {
                    to: p,
                    pressed: None,
                });
                release(&mut ops, modifiers, mask);
                self.pointer = p;
            }
            Action::Drag { path, modifiers } => {
                if path.len() < 2 {
                    return Err(ActionError::Invalid(
                        "a drag needs at least two points".into(),
                    ));
                }
                if path.len() > MAX_DRAG_POINTS {
                    return Err(too_many("drag path points", path.len(), MAX_DRAG_POINTS));
                }
                let pts = path
                    .iter()
                    .map(|p| self.css(*p))
                    .collect::<Result<Vec<_>, _>>()?;
                let mask = press(&mut ops, modifiers);
                ops.push(Op::Move {
                    to: pts[0],
                    pressed: None,
                });
                ops.push(Op::Down {
                    at: pts[0],
                    button: Button::Left,
                    count: 1,
                    modifiers: mask,
                });
                for w in pts.windows(2) {
                    // A midpoint as well: drag-and-drop code often needs more than one move
                    // event before it considers a drag started.
                    let mid = CssPoint {
                        x: (w[0].x + w[1].x) / 2.0,
                        y: (w[0].y + w[1].y) / 2.0,
                    };
                    for to in [mid, w[1]] {
                        ops.push(Op::Move {
                            to,
                            pressed: Some(Button::Left),
                        });
                    }
                }
                let last = pts[pts.len() - 1];
                ops.push(Op::Up {
                    at: last,
                    button: Button::Left,
                    count: 1,
                    modifiers: mask,
                });
                release(&mut ops, modifiers, mask);
                self.pointer = last;
            }
            Action::Scroll {
                at,
                delta,
                modifiers,
            } => {
                let vw = f64::from(self.scaler.viewport.width);
                let vh = f64::from(self.scaler.viewport.height);
                let signed = |d: Direction, amount: f64| match d {
                    Direction::Up => (0.0, -amount),
                    Direction::Down => (0.0, amount),
                    Direction::Left => (-amount, 0.0),
                    Direction::Right => (amount, 0.0),
                };
                let (dx, dy) = match *delta {
                    ScrollDelta::Ticks { direction, amount } => {
                        signed(direction, f64::from(amount) * PX_PER_TICK)
                    }
                    ScrollDelta::Pixels { x, y } => {
                        self.scaler.distance_to_css(x, y, CoordSpace::Display)
                    }
                    ScrollDelta::Grid {
                        direction,
                        magnitude,
                    } => {
                        let m = f64::from(magnitude.unwrap_or(GEMINI_DEFAULT_MAGNITUDE)) / 1000.0;
                        let along = match direction {
                            Direction::Up | Direction::Down => vh,
                            _ => vw,
                        };
                        signed(direction, m * along)
                    }
                    ScrollDelta::Page { direction } => {
                        let along = match direction {
                            Direction::Up | Direction::Down => vh,
                            _ => vw,
                        };
                        signed(direction, along)
                    }
                    _ => {
                        return Err(ActionError::Unsupported {
                            what: "this scroll unit".into(),
                            backend: "any",
                        });
                    }
                };
                let p = match (at, delta) {
                    (None, ScrollDelta::Page { .. }) => self.center(),
                    _ => target.unwrap_or(self.pointer),
                };
                let mask = press(&mut ops, modifiers);
                ops.push(Op::Move {
                    to: p,
                    pressed: None,
                });
                ops.push(Op::Wheel {
                    at: p,
                    dx,
                    dy,
                    modifiers: mask,
                });
                release(&mut ops, modifiers, mask);
                self.pointer = p;
            }
            Action::Type {
                text: t,
                at,
                press_enter,
                clear_before,
            } => {
                let chars = t.chars().count();
                if chars > MAX_TYPED_CHARS {
                    return Err(too_many("characters to type", chars, MAX_TYPED_CHARS));
                }
                if let Some(p) = target {
                    // Gemini's type_text_at: focus by clicking, clear, type, maybe Enter.
                    ops.push(Op::Move {
                        to: p,
                        pressed: None,
                    });
                    ops.push(Op::Down {
                        at: p,
                        button: Button::Left,
                        count: 1,
                        modifiers: 0,
                    });
                    ops.push(Op::Up {
                        at: p,
                        button: Button::Left,
                        count: 1,
                        modifiers: 0,
                    });
                    self.pointer = p;
                    if clear_before.unwrap_or(true) {
                        chord(&mut ops, &[key("Control")?, key("a")?]);
                        chord(&mut ops, &[key("Backspace")?]);
                    }
                }
                // Text goes in with insertText (fast, any Unicode); newlines as real Enter
                // presses, because pages (and textareas' own handlers) act on the key.
                for (i, line) in t.split('\n').enumerate() {
                    if i > 0 {
                        chord(&mut ops, &[key("Enter")?]);
                    }
                    let line = line.strip_suffix('\r').unwrap_or(line);
                    if !line.is_empty() {
                        ops.push(Op::Text {
                            text: line.to_owned(),
                        });
                    }
                }
                if at.is_some() && press_enter.unwrap_or(false) {
                    chord(&mut ops, &[key("Enter")?]);
                }
            }
            Action::Key { chords } => {
                if chords.len() > MAX_KEY_CHORDS {
                    return Err(too_many("key chords", chords.len(), MAX_KEY_CHORDS));
                }
                for c in chords {
                    chord(&mut ops, c);
                }
            }
            Action::HoldKey {
                keys,
                duration_secs,
            } => {
                let ms = duration(*duration_secs)?;
                let mask = press(&mut ops, keys);
                ops.push(Op::Sleep { ms });
                release(&mut ops, keys, mask);
            }
            Action::Wait { duration_secs } => {
                ops.push(Op::Sleep {
                    ms: duration(duration_secs.unwrap_or(1.0))?,
                });
            }
            Action::Zoom { region } => {
                let rect = self.scaler.region_to_css(*region, self.space)?;
                capture = Capture::Zoom(self.scaler.zoom_plan(rect));
            }
            Action::Navigate { url } => {
                let url = normalize_url(url);
                navigates_to = Some(url.clone());
                ops.push(Op::Navigate { url });
            }
            Action::Search => {
                navigates_to = Some(self.search_url.clone());
                ops.push(Op::Navigate {
                    url: self.search_url.clone(),
                });
            }
            Action::GoBack => ops.push(Op::History { delta: -1 }),
            Action::GoForward => ops.push(Op::History { delta: 1 }),
            other => {
                return Err(ActionError::Unsupported {
                    what: format!("`{}`", other.kind()),
                    backend: "any",
                });
            }
        }
        Ok(Lowered {
            ops,
            capture,
            text,
            target,
            navigates_to,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use crate::display::Size;
    use cordon_protocol::computer::Point;

    fn lowerer() -> Lowerer {
        Lowerer {
            scaler: Scaler::new(Size::new(1024, 640), Size::new(1280, 800), 2.0),
            space: CoordSpace::Display,
            pointer: CssPoint { x: 0.0, y: 0.0 },
            search_url: "https://search.test/".into(),
        }
    }

    #[test]
    fn shift_click_holds_the_modifier_around_the_click() {
        let mut l = lowerer();
        let out = l
            .lower(&Action::Click {
                at: Some(Point::new(100, 200)),
                button: Button::Left,
                count: 2,
                modifiers: vec![Key::parse("shift").unwrap()],
            })
            .unwrap();
        let at = CssPoint {
            x: 125.625,
            y: 250.625,
        };
        assert_eq!(
            out.ops,
            vec![
                Op::KeyDown {
                    key: Key::parse("Shift").unwrap(),
                    modifiers: 8
                },
                Op::Down {
                    at,
                    button: Button::Left,
                    count: 1,
                    modifiers: 8
                },
                Op::Up {
                    at,
                    button: Button::Left,
                    count: 1,
                    modifiers: 8
                },
                Op::Down {
                    at,
                    button: Button::Left,
                    count: 2,
                    modifiers: 8
                },
                Op::Up {
                    at,
                    button: Button::Left,
                    count: 2,
                    modifiers: 8
                },
                Op::KeyUp {
                    key: Key::parse("Shift").unwrap(),
                    modifiers: 8
                },
            ]
        );
        // the pointer stays, so a coordinate-less click lands there
        let out = l
            .lower(&Action::Click {
                at: None,
                button: Button::Right,
                count: 1,
                modifiers: vec![],
            })
            .unwrap();
        assert_eq!(out.target, Some(at));
        assert_eq!(
            l.lower(&Action::CursorPosition).unwrap().text.as_deref(),
            Some("X=100,Y=200")
        );
    }

    #[test]
    fn typing_splits_newlines_into_enter_presses() {
        let mut l = lowerer();
        let out = l
            .lower(&Action::Type {
                text: "a€\nb".into(),
                at: None,
                press_enter: None,
                clear_before: None,
            })
            .unwrap();
        let kinds: Vec<String> = out
            .ops
            .iter()
            .map(|o| match o {
                Op::Text { text } => format!("text:{text}"),
                Op::KeyDown { key, .. } => format!("down:{key}"),
                Op::KeyUp { key, .. } => format!("up:{key}"),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(kinds, ["text:a€", "down:Enter", "up:Enter", "text:b"]);
    }

    #[test]
    fn scroll_units_become_css_pixels() {
        let mut l = lowerer();
        let wheel = |out: Lowered| {
            out.ops
                .into_iter()
                .find_map(|o| match o {
                    Op::Wheel { dx, dy, .. } => Some((dx, dy)),
                    _ => None,
                })
                .unwrap()
        };
        let ticks = l
            .lower(&Action::Scroll {
                at: Some(Point::new(10, 10)),
                delta: ScrollDelta::Ticks {
                    direction: Direction::Down,
                    amount: 3,
                },
                modifiers: vec![],
            })
            .unwrap();
        assert_eq!(wheel(ticks), (0.0, 300.0));
        let px = l
            .lower(&Action::Scroll {
                at: Some(Point::new(10, 10)),
                delta: ScrollDelta::Pixels { x: -100, y: 0 },
                modifiers: vec![],
            })
            .unwrap();
        assert_eq!(wheel(px), (-125.0, 0.0));
        let page = l
            .lower(&Action::Scroll {
                at: None,
                delta: ScrollDelta::Page {
                    direction: Direction::Up,
                },
                modifiers: vec![],
            })
            .unwrap();
        assert_eq!(wheel(page), (0.0, -800.0));
    }

    #[test]
    fn bad_values_are_model_visible() {
        let mut l = lowerer();
        let e = l
            .lower(&Action::Wait {
                duration_secs: Some(100.0),
            })
            .unwrap_err();
        assert!(e.to_string().contains("between 0 and 30"), "{e}");
        let e = l
            .lower(&Action::Drag {
                path: vec![Point::new(1, 1), Point::new(5000, 1)],
                modifiers: vec![],
            })
            .unwrap_err();
        assert!(matches!(e, ActionError::OutOfRange { .. }));
        assert_eq!(normalize_url("example.com"), "https://example.com");
        assert_eq!(normalize_url("javascript:alert(1)"), "javascript:alert(1)");
        assert_eq!(normalize_url("file:///etc"), "file:///etc");
    }

    #[test]
    fn oversized_actions_are_refused_whole_with_a_hint_to_split() {
        let mut l = lowerer();
        let long = "x".repeat(MAX_TYPED_CHARS + 1);
        let err = l
            .lower(&Action::Type {
                text: long,
                at: None,
                press_enter: None,
                clear_before: None,
            })
            .unwrap_err();
        assert!(err.to_string().contains("split it"), "{err}");
        // Exactly at the limit is fine (newlines count as characters).
        let fits = "é\n".repeat(MAX_TYPED_CHARS / 2);
        assert!(
            l.lower(&Action::Type {
                text: fits,
                at: None,
                press_enter: None,
                clear_before: None,
            })
            .is_ok()
        );
        let chords = vec![vec![Key::parse("a").unwrap()]; MAX_KEY_CHORDS + 1];
        assert!(l.lower(&Action::Key { chords }).is_err());
        let path = vec![Point::new(1, 1); MAX_DRAG_POINTS + 1];
        let err = l
            .lower(&Action::Drag {
                path,
                modifiers: Vec::new(),
            })
            .unwrap_err();
        assert!(err.to_string().contains("drag path points"), "{err}");
    }
}
