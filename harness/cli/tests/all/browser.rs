//! `cordon computer` on a real Chromium: a scripted action file against a page given as a
//! `data:` URL, the output lines, uploads through a file chooser, the trajectory, replay.

use super::{cordon, write_temp};
use pretty_assertions::assert_eq;
use serde_json::Value;

/// A button (CSS 0,0..200,100) that opens a file chooser from script, and a title that
/// names the chosen files.
const PAGE: &str = "data:text/html,<title>none</title><body style='margin:0'>\
<button style='position:absolute;left:0;top:0;width:200px;height:100px' \
onclick='document.getElementById(\"f\").click()'>Attach</button>\
<input type=file id=f style='position:absolute;top:300px' \
onchange='document.title=[...this.files].map(f=>f.name).join()'></body>";

fn lines(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn browser_sessions_run_scripted_actions_upload_and_replay() {
    let dir = tempfile::tempdir().unwrap();
    let upload = dir.path().join("report.txt");
    std::fs::write(&upload, "contents").unwrap();
    let trajectory = dir.path().join("trajectory");
    // 1280x800 shown as 1024x640: the button's centre is model (80, 40).
    let actions = write_temp(
        r#"{"action": "left_click", "coordinate": [80, 40]}
{"action": "left_click", "coordinate": [1024, 10]}
{"action": "screenshot"}
"#,
        ".jsonl",
    );
    fn with_upload<'a>(mut a: Vec<&'a str>, upload: Option<&'a str>) -> Vec<&'a str> {
        if let Some(u) = upload {
            a.extend(["--upload", u]);
        }
        a
    }
    // CI runs as root, where Chromium's sandbox cannot run: opted out explicitly.
    let base = vec![
        "computer",
        "--no-browser-sandbox",
        "--url",
        PAGE,
        "--display",
        "1024x640",
        "--actions",
        actions.path().to_str().unwrap(),
        "--trajectory",
        trajectory.to_str().unwrap(),
    ];
    let args = |upload| with_upload(base.clone(), upload);
    let output = cordon(&args(Some(upload.to_str().unwrap())), "");
    let out = lines(&output.stdout);
    let status: Vec<&str> = out.iter().map(|l| l["status"].as_str().unwrap()).collect();
    assert_eq!(status, ["ok", "error", "ok"], "{out:#?}");
    assert!(
        out[0]["text"].as_str().unwrap().contains("report.txt"),
        "{:?}",
        out[0]
    );
    // An off-display coordinate names the valid range.
    assert!(
        out[1]["error"].as_str().unwrap().contains("0..=1023"),
        "{:?}",
        out[1]
    );
    let shot = &out[2]["screenshot"];
    assert_eq!(
        (shot["width"].as_u64(), shot["height"].as_u64()),
        (Some(1024), Some(640))
    );
    assert!(std::path::Path::new(shot["path"].as_str().unwrap()).is_file());
    // A step that ended in error makes the exit code 1.
    assert_eq!(
        output.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    // The recorded trajectory replays against a fresh session without diverging.
    let replay = cordon(
        &[
            "replay",
            "--no-browser-sandbox",
            trajectory.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(
        replay.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&replay.stdout),
        String::from_utf8_lossy(&replay.stderr)
    );

    // Without --upload the chooser is refused, and the model is told.
    let output = cordon(&args(None), "");
    let out = lines(&output.stdout);
    assert!(
        out[0]["text"].as_str().unwrap().contains("refused"),
        "{:?}",
        out[0]
    );
    // A missing upload file is a usage error before any browser starts.
    let output = cordon(&args(Some("/nonexistent/file")), "");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--upload /nonexistent/file"));
}
