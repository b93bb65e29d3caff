//! Typed text arrives byte for byte: `xterm` runs `cat > $HOME/out.txt`, the model clicks
//! into it, types, and ends with Ctrl+D; the file must hold exactly what was typed.

use super::*;
use pretty_assertions::assert_eq;
use serde_json::json;

const CAT: &str = r#"xterm -geometry 80x24+0+0 -e sh -c 'cat > "$HOME/out.txt"'"#;

/// A session running `o`, clicked into its terminal: focus follows the pointer without a
/// window manager.
async fn clicked_into(o: DesktopOptions) -> Computer<DesktopSession> {
    let session = DesktopSession::start(o).await.unwrap();
    let mut c = computer(session, Rules::allow_all());
    ok_step(
        &mut c,
        json!({"action": "left_click", "coordinate": m(200, 150)}),
    )
    .await;
    c
}

/// Types `steps` into a fresh `cat`, ends the input, and returns the file.
async fn typed(
    before: impl AsyncFnOnce(&mut Computer<DesktopSession>),
    steps: &[serde_json::Value],
) -> String {
    let mut c = clicked_into(opts(&[CAT])).await;
    let out = c.backend().home().join("out.txt");
    before(&mut c).await;
    for s in steps {
        ok_step(&mut c, s.clone()).await;
    }
    // Ctrl+D twice: the first hands over a partial line, the second ends `cat`.
    ok_step(&mut c, json!({"action": "key", "text": "ctrl+d"})).await;
    ok_step(&mut c, json!({"action": "key", "text": "ctrl+d"})).await;
    let p = exited(c.backend_mut(), 0).await;
    assert_eq!(exit_code(&p), Some(0), "{p:?}");
    let text = std::fs::read_to_string(&out).unwrap();
    c.into_backend().close().await.unwrap();
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unicode_text_and_newlines_arrive_byte_for_byte() {
    let text = "Hello, World! äöü €\nShifted: ~`!@#$%^&*()_+{}|:\"<>? ABC xyz\n\tindented ß ñ ø Ω 日本\nno newline at the end";
    let got = typed(async |_| {}, &[json!({"action": "type", "text": text})]).await;
    assert_eq!(got, text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_distinct_characters_outlast_the_spare_keycodes() {
    // More distinct keysyms than the keymap has spare keycodes: enigo has to rebind them,
    // which loses characters unless clients catch up first.
    let greek: String = ('α'..='ω').chain('Α'..='Ρ').collect();
    let cyrillic: String = ('а'..='я').chain('А'..='Я').collect();
    let arrows: String = ('←'..='⇿').collect();
    let text = format!("{greek}\n{cyrillic}\n{arrows}\n{greek}{cyrillic}\n");
    let got = typed(async |_| {}, &[json!({"action": "type", "text": text})]).await;
    assert_eq!(got, text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typing_follows_a_changed_keyboard_layout() {
    let text = "yz YZ @ # [] {} äöü ß";
    let got = typed(
        async |c| {
            // German: y and z swap places, @ and the brackets move to AltGr, äöü get keys.
            x_tool(c.backend(), &["setxkbmap", "-layout", "de"]);
        },
        &[json!({"action": "type", "text": text})],
    )
    .await;
    assert_eq!(got, text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_chords_and_held_keys_reach_the_program() {
    let got = typed(
        async |_| {},
        &[
            json!({"action": "type", "text": "wrong line"}),
            // The terminal's kill-line: the typed line is discarded.
            json!({"action": "key", "text": "ctrl+u"}),
            json!({"action": "type", "text": "abcd"}),
            json!({"action": "key", "text": "BackSpace"}),
            json!({"action": "key", "text": "Return"}),
            // Holding Shift alone types nothing and is released afterwards.
            json!({"action": "hold_key", "text": "shift", "duration": 0.05}),
            json!({"action": "type", "text": "lower"}),
            json!({"action": "key", "text": "A"}),
            json!({"action": "key", "text": "space"}),
            json!({"action": "key", "text": "Return"}),
        ],
    )
    .await;
    assert_eq!(got, "abc\nlowerA \n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn characters_without_a_key_are_refused_before_anything_is_typed() {
    let mut c = clicked_into(opts(&[CAT])).await;
    let out = c.backend().home().join("out.txt");
    let r = step(&mut c, json!({"action": "type", "text": "abc\u{7}def"})).await;
    assert_eq!(r.status, Status::Error);
    let e = r.error.unwrap();
    assert!(e.contains("U+0007") && e.contains("cannot be typed"), "{e}");
    // Nothing of the refused step arrived; the session carries on.
    ok_step(&mut c, json!({"action": "type", "text": "ok\n"})).await;
    assert_eq!(file_becomes(&out, "ok\n").await, "ok\n");
    c.into_backend().close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settling_waits_for_the_command_a_terminal_runs() {
    // The shell is not a launched program but a child of xterm's: the step must still
    // wait until the command it runs is done (a busy loop of a few seconds, then a file).
    let mut o = opts(&["xterm -geometry 80x24+0+0 -e sh"]);
    o.settle_cap = Duration::from_secs(30);
    let mut c = clicked_into(o).await;
    let done = c.backend().home().join("done");
    let r = ok_step(
        &mut c,
        json!({"action": "type", "text":
            "i=0; while [ $i -lt 3000000 ]; do i=$((i+1)); done; echo $i > \"$HOME/done\"\n"}),
    )
    .await;
    assert!(r.settled, "{:?}", r.timings_ms);
    assert_eq!(
        std::fs::read_to_string(&done).unwrap_or_default(),
        "3000000\n"
    );
    c.into_backend().close().await.unwrap();
}
