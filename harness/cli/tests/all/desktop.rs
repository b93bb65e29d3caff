//! `cordon computer --desktop`: a real Xvfb, a real xterm running `cat`, a scripted action
//! file; the output lines, the typed file, the trajectory and the exit code.

use super::{cordon, write_temp};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

#[test]
fn desktop_sessions_run_scripted_actions_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let notes = dir.path().join("notes.txt");
    let trajectory = dir.path().join("trajectory");
    let actions = write_temp(
        r#"{"action": "left_click", "coordinate": [80, 80]}
{"action": "type", "text": "hello äöü €\n"}
{"action": "key", "text": "ctrl+alt+t"}
{"deny": "*"}
{"action": "key", "text": "ctrl+d"}
{"action": "left_click", "coordinate": [2000, 10]}
{"action": "cursor_position"}
"#,
        ".jsonl",
    );
    let launch = format!(
        "xterm -geometry 80x24+0+0 -e sh -c 'cat > {}'",
        notes.display()
    );
    let output = cordon(
        &[
            "computer",
            "--desktop",
            "--launch",
            &launch,
            "--display",
            "1024x640",
            "--format",
            "anthropic",
            "--actions",
            actions.path().to_str().unwrap(),
            "--trajectory",
            trajectory.to_str().unwrap(),
        ],
        "",
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let brief: Vec<(Value, Value)> = lines
        .iter()
        .map(|l| match l.get("event") {
            Some(e) => (e.clone(), l["program"]["code"].clone()),
            None => (l["status"].clone(), l["current_url"].clone()),
        })
        .collect();
    assert_eq!(
        brief,
        [
            (json!("ok"), json!("x11:sh")),
            (json!("ok"), json!("x11:sh")),
            (json!("approval_required"), json!("x11:sh")),
            (json!("denied"), json!(null)),
            (json!("ok"), json!("x11:")),
            (json!("program_exited"), json!(0)),
            (json!("error"), json!("x11:")),
            (json!("ok"), json!("x11:")),
        ],
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(lines[0]["screenshot"]["width"], 1024);
    assert_eq!(lines[0]["screenshot"]["height"], 640);
    assert!(
        std::path::Path::new(lines[0]["screenshot"]["path"].as_str().unwrap()).exists(),
        "the trajectory keeps each screenshot"
    );
    assert_eq!(lines[2]["pending"]["rule"], "ctrl-alt-chord");
    assert_eq!(lines[2]["pending"]["element"], "window name=XTerm \"sh\"");
    assert!(
        lines[6]["error"]
            .as_str()
            .unwrap()
            .contains("outside the screen"),
        "{}",
        lines[6]
    );
    assert_eq!(lines[7]["text"], "X=80,Y=80");
    // The denied step and the refused click make the exit code 1.
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "hello äöü €\n");
    let session: Value =
        serde_json::from_str(&std::fs::read_to_string(trajectory.join("session.json")).unwrap())
            .unwrap();
    assert_eq!(session["desktop"]["launch"], json!([launch]));
    assert_eq!(
        session["desktop"]["screen"],
        json!({"width": 1280, "height": 800})
    );
    let steps = std::fs::read_to_string(trajectory.join("steps.jsonl")).unwrap();
    assert_eq!(steps.lines().count(), 7);
}

#[test]
fn desktop_flags_are_checked() {
    let cases: [(&[&str], &str); 4] = [
        (&["computer", "--actions", "/dev/null"], "--url"),
        (
            &[
                "computer",
                "--desktop",
                "--url",
                "http://x.test/",
                "--actions",
                "/dev/null",
            ],
            "cannot be used with",
        ),
        (
            &[
                "computer",
                "--url",
                "http://x.test/",
                "--launch",
                "xterm",
                "--actions",
                "/dev/null",
            ],
            "need --desktop",
        ),
        (
            &[
                "computer",
                "--desktop",
                "--xvfb",
                "/nonexistent/Xvfb",
                "--actions",
                "/dev/null",
            ],
            "Xvfb not found at /nonexistent/Xvfb",
        ),
    ];
    for (args, want) in cases {
        let output = cordon(args, "");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
}
