//! Every pointer and key action of the model reaches a real program as the X events it
//! stands for: `xev` logs what it receives, and the log is compared with what was sent,
//! in screen pixels computed from a scaled model display.

use super::*;
use pretty_assertions::assert_eq;
use serde_json::json;

const XEV: &str = "xev -geometry 600x400+0+0";

/// One event from xev's log.
#[derive(Debug, Clone, PartialEq, Eq)]
struct XEvent {
    kind: String,
    root: (i64, i64),
    state: u32,
    /// Button number or keysym name.
    detail: String,
}

fn parse_xev(log: &str) -> Vec<XEvent> {
    let mut out = Vec::new();
    for block in log.split("\n\n") {
        let Some(kind) = block.split_whitespace().next() else {
            continue;
        };
        if !matches!(
            kind,
            "ButtonPress" | "ButtonRelease" | "KeyPress" | "KeyRelease" | "MotionNotify"
        ) {
            continue;
        }
        let after = |key: &str| {
            block
                .split(key)
                .nth(1)
                .map(|s| s.trim_start().to_owned())
                .unwrap_or_default()
        };
        let root = after("root:(");
        let (x, y) = root.split_once(')').unwrap().0.split_once(',').unwrap();
        let state = after("state 0x");
        let state = u32::from_str_radix(state.split([',', ' ']).next().unwrap(), 16).unwrap();
        let detail = if kind.starts_with("Button") {
            after("button ")
                .split([',', ' '])
                .next()
                .unwrap()
                .to_owned()
        } else if kind.starts_with("Key") {
            // "keysym 0x78, x)"
            after("keysym 0x")
                .split([',', ')'])
                .nth(1)
                .unwrap()
                .trim()
                .to_owned()
        } else {
            String::new()
        };
        out.push(XEvent {
            kind: kind.into(),
            root: (x.trim().parse().unwrap(), y.trim().parse().unwrap()),
            state,
            detail,
        });
    }
    out
}

struct Xev {
    c: Computer<DesktopSession>,
    log: std::path::PathBuf,
    seen: usize,
}

impl Xev {
    async fn start() -> Self {
        let mut session = start(&[XEV]).await;
        let log = session.programs()[0].log.clone();
        let mut c = computer(session, Rules::allow_all());
        // Park the pointer inside the window so that later moves stay in it.
        ok_step(
            &mut c,
            json!({"action": "mouse_move", "coordinate": m(500, 350)}),
        )
        .await;
        let mut x = Self { c, log, seen: 0 };
        x.take(|_| true).await;
        x
    }

    /// Runs `action` and returns the xev events it caused that `keep` keeps.
    async fn events(
        &mut self,
        action: serde_json::Value,
        keep: impl Fn(&XEvent) -> bool,
    ) -> Vec<XEvent> {
        ok_step(&mut self.c, action).await;
        self.take(keep).await
    }

    async fn take(&mut self, keep: impl Fn(&XEvent) -> bool) -> Vec<XEvent> {
        // The step settled, so xev has handled everything; give its log writes a moment.
        let mut last = usize::MAX;
        let mut all = Vec::new();
        for _ in 0..50 {
            all = parse_xev(&std::fs::read_to_string(&self.log).unwrap());
            if all.len() == last {
                break;
            }
            last = all.len();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let new = all[self.seen..].to_vec();
        self.seen = all.len();
        new.into_iter().filter(|e| keep(e)).collect()
    }
}

fn buttons(e: &XEvent) -> bool {
    e.kind.starts_with("Button")
}

fn ev(kind: &str, root: (i64, i64), state: u32, detail: &str) -> XEvent {
    XEvent {
        kind: kind.into(),
        root,
        state,
        detail: detail.into(),
    }
}

fn click(root: (i64, i64), button: u32, state: u32) -> Vec<XEvent> {
    let b = button.to_string();
    // Buttons 1–5 have state bits (Button1Mask = 0x100 …); 8 and 9 have none.
    let held = if button <= 5 { 1 << (button + 7) } else { 0 };
    vec![
        ev("ButtonPress", root, state, &b),
        ev("ButtonRelease", root, state | held, &b),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_button_and_click_count_lands_on_the_intended_pixel() {
    let mut x = Xev::start().await;
    // Each kind of click at a pixel of its own: X has no click count, so a double click is
    // two press/release pairs in one place.
    for (action, px, button, times) in [
        ("left_click", 100, 1, 1),
        ("right_click", 105, 3, 1),
        ("middle_click", 110, 2, 1),
        ("double_click", 115, 1, 2),
        ("triple_click", 120, 1, 3),
    ] {
        let got = x
            .events(json!({"action": action, "coordinate": m(px, 100)}), buttons)
            .await;
        assert_eq!(
            got,
            vec![click((px, 100), button, 0); times].concat(),
            "{action}"
        );
    }
    // Shift held around a click (Anthropic's `text` modifier).
    let got = x
        .events(
            json!({"action": "left_click", "coordinate": m(125, 100), "text": "shift"}),
            buttons,
        )
        .await;
    assert_eq!(got, click((125, 100), 1, 0x1));
    // Back and forward: buttons 8 and 9, in OpenAI's shape.
    for (name, b) in [("back", 8), ("forward", 9)] {
        let [mx, my] = m(130, 100);
        let item = json!({"type": "computer_call", "call_id": "c1",
            "action": {"type": "click", "button": name, "x": mx, "y": my}});
        let call = decode(Vendor::OpenAi, &item).unwrap();
        let r = x.c.step(call, Some(&item)).await.unwrap();
        assert_eq!(r.status, Status::Ok, "{:?}", r.error);
        let got = x.take(buttons).await;
        assert_eq!(got, click((130, 100), b, 0), "{name}");
    }
    x.c.into_backend().close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrolls_drags_and_held_buttons_are_real_pointer_events() {
    let mut x = Xev::start().await;
    let notches = |events: &[XEvent], button: &str| {
        events
            .iter()
            .filter(|e| e.kind == "ButtonPress" && e.detail == button)
            .count()
    };
    // X buttons 4–7 are the wheel; a huge amount is capped (at 100 notches) instead of
    // keeping the step pressing buttons for hours.
    for (direction, amount, button, want) in [
        ("down", 3, "5", 3),
        ("up", 2, "4", 2),
        ("left", 1, "6", 1),
        ("right", 4, "7", 4),
        ("down", 4_000_000_000_u32, "5", 100),
    ] {
        let got = x
            .events(
                json!({"action": "scroll", "coordinate": m(200, 200), "scroll_direction": direction, "scroll_amount": amount}),
                buttons,
            )
            .await;
        assert_eq!(
            (notches(&got, button), got.len()),
            (want, 2 * want),
            "{direction} {amount}: {got:?}"
        );
        assert!(got.iter().all(|e| e.root == (200, 200)), "{got:?}");
    }

    // Press, move with the button held, release: a drag by hand.
    let got = x
        .events(
            json!({"action": "left_mouse_down", "coordinate": m(300, 300)}),
            |_| true,
        )
        .await;
    assert_eq!(got.last(), Some(&ev("ButtonPress", (300, 300), 0, "1")));
    let got = x
        .events(
            json!({"action": "mouse_move", "coordinate": m(350, 320)}),
            |_| true,
        )
        .await;
    assert_eq!(
        got.last(),
        Some(&ev("MotionNotify", (350, 320), 0x100, "")),
        "Button1 held while moving: {got:?}"
    );
    let got = x
        .events(
            json!({"action": "left_mouse_up", "coordinate": m(360, 325)}),
            buttons,
        )
        .await;
    assert_eq!(got, [ev("ButtonRelease", (360, 325), 0x100, "1")]);

    // The one-shot drag goes through the midpoint with the button held.
    let got = x
        .events(
            json!({"action": "left_click_drag", "start_coordinate": m(100, 50), "coordinate": m(400, 250)}),
            |_| true,
        )
        .await;
    let presses: Vec<_> = got.iter().filter(|e| buttons(e)).cloned().collect();
    assert_eq!(
        presses,
        [
            ev("ButtonPress", (100, 50), 0, "1"),
            ev("ButtonRelease", (400, 250), 0x100, "1")
        ]
    );
    assert!(
        got.iter()
            .any(|e| e.kind == "MotionNotify" && e.root == (250, 150) && e.state == 0x100),
        "{got:?}"
    );
    x.c.into_backend().close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chords_hold_their_modifiers_and_the_cursor_position_is_the_real_pointer() {
    let mut x = Xev::start().await;
    let keys = |e: &XEvent| e.kind.starts_with("Key");
    let got = x
        .events(json!({"action": "key", "text": "ctrl+alt+x"}), keys)
        .await;
    let names: Vec<(&str, &str, u32)> = got
        .iter()
        .map(|e| (e.kind.as_str(), e.detail.as_str(), e.state))
        .collect();
    assert_eq!(
        names,
        [
            ("KeyPress", "Control_L", 0),
            ("KeyPress", "Alt_L", 0x4),
            ("KeyPress", "x", 0xc),
            ("KeyRelease", "x", 0xc),
            ("KeyRelease", "Alt_L", 0xc),
            ("KeyRelease", "Control_L", 0x4),
        ]
    );
    // `A` is Shift+a on this layout: one keycode, Shift held around it.
    let got = x.events(json!({"action": "key", "text": "A"}), keys).await;
    let names: Vec<(&str, &str)> = got
        .iter()
        .map(|e| (e.kind.as_str(), e.detail.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("KeyPress", "Shift_L"),
            ("KeyPress", "A"),
            ("KeyRelease", "A"),
            ("KeyRelease", "Shift_L")
        ]
    );
    // A key held for a while goes down once and up once.
    let got = x
        .events(
            json!({"action": "hold_key", "text": "ctrl", "duration": 0.2}),
            keys,
        )
        .await;
    assert_eq!(got.len(), 2, "{got:?}");
    // The pointer is where the last action left it, in model coordinates.
    ok_step(
        &mut x.c,
        json!({"action": "mouse_move", "coordinate": m(455, 305)}),
    )
    .await;
    let r = ok_step(&mut x.c, json!({"action": "cursor_position"})).await;
    let [mx, my] = m(455, 305);
    assert_eq!(r.text, Some(format!("X={mx},Y={my}")));
    // A program may move the pointer itself: the report follows the real one.
    x_tool(x.c.backend(), &["xdotool", "mousemove", "20", "30"]);
    let r = ok_step(&mut x.c, json!({"action": "cursor_position"})).await;
    assert_eq!(r.text, Some("X=16,Y=24".to_owned()));
    x.c.into_backend().close().await.unwrap();
}

/// The buttons of each `xmessage` on screen, left to right, as screen rectangles
/// (x, y, width, height), read from `xwininfo -tree`.
fn xmessage_buttons(session: &DesktopSession) -> Vec<Vec<(i64, i64, i64, i64)>> {
    let tree = x_tool(session, &["xwininfo", "-root", "-tree"]);
    // "0x200037 (has no name): ()  26x17+36+29  +637+430"
    let rect = |line: &str| -> Option<(i64, i64, i64, i64)> {
        let mut it = line.split_whitespace().rev();
        let abs = it.next()?;
        let geo = it.next()?;
        let (w, rest) = geo.split_once('x')?;
        let h = rest.split(['+', '-']).next()?;
        let mut abs = abs.trim_start_matches('+').split('+');
        Some((
            abs.next()?.parse().ok()?,
            abs.next()?.parse().ok()?,
            w.parse().ok()?,
            h.parse().ok()?,
        ))
    };
    let mut out = Vec::new();
    for top in tree
        .lines()
        .filter(|l| l.contains("(\"xmessage\" \"Xmessage\")"))
    {
        let (tx, ty, tw, th) = rect(top).unwrap();
        let inside: Vec<_> = tree
            .lines()
            .filter(|l| l.contains("(has no name)"))
            .filter_map(rect)
            .filter(|(x, y, w, h)| *x >= tx && *y >= ty && x + w <= tx + tw && y + h <= ty + th)
            .collect();
        // The buttons are the one row of three same-sized windows.
        let mut row: Vec<_> = inside
            .iter()
            .copied()
            .filter(|r| inside.iter().filter(|o| o.1 == r.1 && o.3 == r.3).count() == 3)
            .collect();
        row.sort();
        assert_eq!(row.len(), 3, "buttons of {top}: {inside:?}");
        out.push(row);
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clicks_computed_in_a_scaled_display_hit_the_intended_button() {
    let session = start(&[
        "xmessage -geometry +100+500 -buttons one:11,two:12,three:13 first",
        "xmessage -geometry +700+150 -buttons one:21,two:22,three:23 second",
    ])
    .await;
    let rows = xmessage_buttons(&session);
    assert_eq!(rows.len(), 2, "{rows:?}");
    let mut c = computer(session, Rules::allow_all());
    let scaler = c.scaler();
    let centre = |(x, y, w, h): (i64, i64, i64, i64)| cordon_computer::display::CssPoint {
        x: (x + w / 2) as f64,
        y: (y + h / 2) as f64,
    };
    // Anthropic, in the 1024×640 image: "two" of the first window.
    let p = scaler.to_model(centre(rows[0][1]));
    ok_step(
        &mut c,
        json!({"action": "left_click", "coordinate": [p.x, p.y]}),
    )
    .await;
    let first = exited(c.backend_mut(), 0).await;
    assert_eq!(exit_code(&first), Some(12), "{first:?}");
    // Gemini, on its 0–999 grid: "three" of the second window.
    let b = centre(rows[1][2]);
    let call = json!({"name": "click_at", "args": {
        "x": (b.x * 1000.0 / 1280.0) as i64, "y": (b.y * 1000.0 / 800.0) as i64}});
    let r = c
        .step(decode(Vendor::Gemini, &call).unwrap(), Some(&call))
        .await
        .unwrap();
    assert_eq!(r.status, Status::Ok, "{:?}", r.error);
    let second = exited(c.backend_mut(), 1).await;
    assert_eq!(exit_code(&second), Some(23), "{second:?}");
    let exits = c.backend_mut().take_exits();
    assert_eq!(exits.len(), 2, "{exits:?}");
    c.into_backend().close().await.unwrap();
}
