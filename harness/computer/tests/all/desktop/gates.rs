//! Gates on the desktop: the same `allow | ask | deny` rules, matched on action kinds, key
//! chords and the title of the window an action touches.

use super::*;
use cordon_computer::desktop::default_rules;
use cordon_computer::gate::{Decision, Rule};
use pretty_assertions::assert_eq;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_alt_chords_ask_first_and_a_titled_window_refuses_typing() {
    let session = start(&[
        r#"xterm -T 'secret vault' -geometry 40x10+0+0 -e sh -c 'cat > "$HOME/vault.txt"'"#,
        r#"xterm -T notes -geometry 40x10+600+400 -e sh -c 'cat > "$HOME/notes.txt"'"#,
    ])
    .await;
    let (vault, notes) = (
        session.home().join("vault.txt"),
        session.home().join("notes.txt"),
    );
    let mut rules = default_rules();
    rules.rules.push(
        Rule::new("no-typing-into-secrets", Decision::Deny)
            .actions(&["type", "key"])
            .window_title(&["SECRET"]),
    );
    let mut c = computer(session, rules);

    // Clicking into the vault is fine; keys into it are not.
    let r = ok_step(
        &mut c,
        json!({"action": "left_click", "coordinate": m(100, 50)}),
    )
    .await;
    assert_eq!(r.current_url.as_deref(), Some("x11:secret vault"));
    let r = step(&mut c, json!({"action": "type", "text": "hunter2\n"})).await;
    assert_eq!(r.status, Status::Denied);
    assert_eq!(
        r.error.as_deref(),
        Some("denied by rule `no-typing-into-secrets`: action type, window \"secret vault\"")
    );
    assert_eq!(
        r.gates[0].element.as_deref(),
        Some("window name=XTerm \"secret vault\"")
    );

    // Ctrl+Alt+anything asks; denying it sends nothing.
    ok_step(
        &mut c,
        json!({"action": "left_click", "coordinate": m(700, 450)}),
    )
    .await;
    let r = step(&mut c, json!({"action": "key", "text": "ctrl+alt+u"})).await;
    assert_eq!(r.status, Status::ApprovalRequired);
    let p = r.pending.unwrap();
    assert_eq!(
        (p.rule.as_str(), p.action.as_str()),
        ("ctrl-alt-chord", "key")
    );
    assert_eq!(c.deny(&p.id).await.unwrap().status, Status::Denied);
    // Plain typing into the other window is allowed, and a plain chord too.
    ok_step(&mut c, json!({"action": "type", "text": "note 1\n"})).await;
    ok_step(&mut c, json!({"action": "key", "text": "ctrl+d"})).await;
    assert_eq!(file_becomes(&notes, "note 1\n").await, "note 1\n");
    assert_eq!(std::fs::read_to_string(&vault).unwrap(), "");
    c.into_backend().close().await.unwrap();
}
