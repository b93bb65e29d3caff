//! Trajectories record every step with the image the model saw; replay re-runs them on a
//! fresh session and says where they diverge.

#![allow(clippy::unwrap_used, reason = "tests")]

use crate::common::*;
use cordon_computer::Status;
use cordon_computer::display::{DisplaySpec, Size};
use cordon_computer::gate::Rules;
use cordon_computer::trajectory::{TrajectoryWriter, read_session, replay};
use cordon_protocol::computer::Vendor;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_then_replay_matches_and_a_changed_page_diverges() {
    let server = PageServer::start(None).await;
    let dir = tempfile::tempdir().unwrap();
    let traj = dir.path().join("t");
    with_browser(|browser| async move {
        let display = DisplaySpec::Fixed {
            size: Size::new(1024, 640),
        };
        let opts = || {
            session_opts(
                Size::new(1280, 800),
                1.0,
                display,
                Some(server.url("/form")),
            )
        };
        let mut c = computer(&browser, opts(), Rules::default()).await;
        c.record(
            TrajectoryWriter::create(&traj, &json!({"start_url": server.url("/form")})).unwrap(),
        );
        left_click(&mut c, [200, 96]).await;
        ok_step(
            &mut c,
            Vendor::Anthropic,
            json!({"action": "type", "text": "hi"}),
        )
        .await;
        let r = step(
            &mut c,
            Vendor::Anthropic,
            json!({"action": "left_click", "coordinate": [160, 288]}),
        )
        .await;
        c.approve(&r.pending.unwrap().id).await.unwrap();
        c.into_backend().close().await.unwrap();

        let lines: Vec<serde_json::Value> = std::fs::read_to_string(traj.join("steps.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(
            lines[0]["sent"],
            json!({"action": "left_click", "coordinate": [200, 96]})
        );
        assert_eq!(lines[0]["screen_ops"][0]["op"], "down");
        assert_eq!(
            lines[0]["screen_ops"][0]["at"],
            json!({"x": 250.625, "y": 120.625})
        );
        assert_eq!(lines[2]["status"], "approval_required");
        assert_eq!(lines[3]["resolves"], lines[2]["pending"]["id"]);
        assert!(lines[0]["timings_ms"]["total"].as_f64().unwrap() > 0.0);
        let shot = lines[1]["screenshot"]["path"].as_str().unwrap();
        assert!(traj.join(shot).exists());
        assert_eq!(
            read_session(&traj).unwrap()["start_url"],
            server.url("/form")
        );

        // Same start: no divergence.
        let mut c = computer(&browser, opts(), Rules::default()).await;
        let rep = replay(&mut c, &traj).await.unwrap();
        assert_eq!(rep.first_divergence, None, "{rep:?}");
        assert_eq!(eval(&c, "log").await, json!(["delete"]));
        c.into_backend().close().await.unwrap();

        // Another start page: diverges at once.
        let other = session_opts(
            Size::new(1280, 800),
            1.0,
            display,
            Some(server.url("/targets")),
        );
        let mut c = computer(&browser, other, Rules::default()).await;
        let rep = replay(&mut c, &traj).await.unwrap();
        assert_eq!(rep.first_divergence, Some(1), "{rep:?}");
        c.into_backend().close().await.unwrap();
    })
    .await;
}

/// Every file under `dir`, recursively.
fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

fn mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

const SECRET: &str = "hunter2-Secret-4417";
const NAME: &str = "Visible Name 0051";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn password_text_is_redacted_on_disk_and_replays_as_nothing() {
    let server = PageServer::start(None).await;
    let dir = tempfile::tempdir().unwrap();
    // A parent Cordon creates too: both 0700.
    let traj = dir.path().join("runs").join("t");
    with_browser(|browser| async move {
        let opts = || page_opts(1.0, server.url("/form"));
        let mut c = computer(&browser, opts(), Rules::default()).await;
        c.record(TrajectoryWriter::create(&traj, &json!({})).unwrap());
        // The name field (CSS 250,120) and the password field (CSS 250,300), at 0.8.
        left_click(&mut c, [200, 96]).await;
        let typed = ok_step(&mut c, Vendor::Anthropic, json!({"action": "type", "text": NAME})).await;
        assert!(typed.redacted_actions.is_empty(), "{typed:?}");
        // The default rules ask before touching a password field: click, then type.
        let r = step(&mut c, Vendor::Anthropic, json!({"action": "left_click", "coordinate": [200, 240]})).await;
        c.approve(&r.pending.unwrap().id).await.unwrap();
        let r = step(&mut c, Vendor::Anthropic, json!({"action": "type", "text": SECRET})).await;
        assert_eq!(r.status, Status::ApprovalRequired, "{r:?}");
        assert_eq!(r.redacted_actions, [0], "the asking step is redacted too");
        let done = c.approve(&r.pending.unwrap().id).await.unwrap();
        assert_eq!(done.status, Status::Ok, "{done:?}");
        assert_eq!(done.redacted_actions, [0]);
        assert!(!format!("{:?}", done.screen_ops).contains(SECRET), "{:?}", done.screen_ops);
        // Gemini's type_text_at clicks the field itself; its vendor JSON is scrubbed too.
        ok_step(&mut c, Vendor::Gemini, json!({"name": "type_text_at", "args": {"x": 195, "y": 150, "text": NAME, "press_enter": false}})).await;
        let r = step(&mut c, Vendor::Gemini, json!({"name": "type_text_at", "args": {"x": 195, "y": 375, "text": SECRET, "press_enter": false}})).await;
        let done = c.approve(&r.pending.unwrap().id).await.unwrap();
        assert_eq!(done.status, Status::Ok, "{done:?}");
        assert_eq!(eval(&c, "document.getElementById('pw').value").await, json!(SECRET));
        c.into_backend().close().await.unwrap();

        // Nowhere on disk, while the name is kept.
        let lines = std::fs::read_to_string(traj.join("steps.jsonl")).unwrap();
        assert!(lines.contains(NAME), "{lines}");
        assert!(lines.contains("[redacted]"), "{lines}");
        for file in files_under(dir.path()) {
            let bytes = std::fs::read(&file).unwrap();
            assert!(!contains(&bytes, SECRET), "{} holds the password", file.display());
            assert_eq!(mode(&file), 0o600, "{}", file.display());
        }
        assert_eq!(mode(&traj), 0o700);
        assert_eq!(mode(traj.parent().unwrap()), 0o700);
        let recorded: Vec<serde_json::Value> = lines.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let secret_steps: Vec<_> = recorded.iter().filter(|l| l["redacted_actions"] == json!([0])).collect();
        assert_eq!(secret_steps.len(), 4, "two asks and two approved runs: {lines}");
        for line in &secret_steps {
            assert_eq!(line["call"]["actions"][0]["text"], "[redacted]", "{line}");
        }

        // Replay types nothing for the redacted actions and says so; the rest replays.
        let mut c = computer(&browser, opts(), Rules::default()).await;
        let rep = replay(&mut c, &traj).await.unwrap();
        assert_eq!(rep.steps.len(), recorded.len(), "{rep:?}");
        assert!(rep.steps.iter().all(|s| s.status == s.recorded_status), "{rep:?}");
        assert_eq!(rep.steps.iter().filter(|s| s.redacted_actions == [0]).count(), 4, "{rep:?}");
        assert_eq!(eval(&c, "document.getElementById('pw').value").await, json!(""));
        assert_eq!(eval(&c, "document.getElementById('name').value").await, json!(NAME));
        c.into_backend().close().await.unwrap();
    })
    .await;
}

#[test]
fn existing_files_are_tightened_and_an_existing_directory_keeps_its_mode() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let traj = dir.path().join("mine");
    std::fs::create_dir(&traj).unwrap();
    std::fs::set_permissions(&traj, std::fs::Permissions::from_mode(0o750)).unwrap();
    for name in ["steps.jsonl", "session.json"] {
        std::fs::write(traj.join(name), "").unwrap();
        std::fs::set_permissions(traj.join(name), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    std::fs::set_permissions(
        traj.join("steps.jsonl"),
        std::fs::Permissions::from_mode(0o604),
    )
    .unwrap();
    TrajectoryWriter::create(&traj, &json!({})).unwrap();
    assert_eq!(
        mode(&traj),
        0o750,
        "a directory Cordon did not create keeps its mode"
    );
    assert_eq!(mode(&traj.join("session.json")), 0o600);
    assert_eq!(mode(&traj.join("steps.jsonl")), 0o600);
    std::fs::set_permissions(
        traj.join("steps.jsonl"),
        std::fs::Permissions::from_mode(0o400),
    )
    .unwrap();
    let _ = TrajectoryWriter::create(&traj, &json!({}));
    assert_eq!(mode(&traj.join("steps.jsonl")), 0o400, "never widened");
}

#[test]
fn redaction_scrubs_vendor_json_and_leaves_other_actions_alone() {
    use cordon_computer::trajectory::{REDACTED, redact_call, redact_value, secrets};
    use cordon_protocol::computer::Action;
    let mut call = cordon_protocol::computer::ComputerCall::native(Action::Type {
        text: SECRET.into(),
        at: None,
        press_enter: None,
        clear_before: None,
    });
    call.actions.push(Action::Type {
        text: NAME.into(),
        at: None,
        press_enter: None,
        clear_before: None,
    });
    let redacted = redact_call(&call, &[0, 7]);
    assert_eq!(
        serde_json::to_value(&redacted.actions).unwrap(),
        json!([{"kind": "type", "text": REDACTED}, {"kind": "type", "text": NAME}])
    );
    let mut sent = json!({"actions": [{"type": "type", "text": SECRET}, {"note": format!("was {SECRET}!"), SECRET: 1}], "n": NAME});
    redact_value(&mut sent, &secrets(&call, &[0]));
    assert!(!sent.to_string().contains(SECRET), "{sent}");
    assert_eq!(sent["actions"][1]["note"], format!("was {REDACTED}!"));
    assert_eq!(sent["n"], NAME);
}
