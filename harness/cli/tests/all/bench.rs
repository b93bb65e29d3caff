//! `cordon bench`: the built-in suite with the scripted policy at DPR 1 and 2, the report
//! rendered by a real headless Chromium (the marked click must show), resuming a run, and a
//! suite with a malformed task (that episode is an error, the others still run).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::cordon;

fn bench(args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["bench", "--no-browser-sandbox"];
    all.extend_from_slice(args);
    let output = cordon(&all, "");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn results(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap()
}

/// Runs Chromium headless on `args` (a screenshot, a DOM dump) with a fresh profile, and
/// stops it after 60 s at most.
fn chromium(args: &[String]) -> std::process::Output {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new("/usr/lib/chromium/chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium runs (tests/bootstrap.sh installs it)");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

fn check_report_renders(dir: &Path) {
    let report = dir.join("report.html");
    let url = format!("file://{}", report.display());
    // The DOM: a marker on the first click of the autocomplete episode, in model pixels.
    let dom = chromium(&["--dump-dom".into(), url.clone()]);
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.contains(r#"class="mark click" data-model-x="200" data-model-y="96""#),
        "no marker in the DOM ({} bytes)",
        dom.len()
    );
    assert!(dom.contains("<img alt=\"before step 1\" src=\"data:image/png;base64,"));
    // The pixels: the page as a person sees it, with the magenta marker drawn over the
    // first screenshot.
    let shot = tempfile::tempdir().unwrap();
    let png = shot.path().join("report.png");
    chromium(&[
        "--window-size=1400,1400".into(),
        format!("--screenshot={}", png.display()),
        url,
    ]);
    let image = image::open(&png)
        .expect("a screenshot of the report")
        .to_rgb8();
    let magenta: Vec<(u32, u32)> = image
        .enumerate_pixels()
        .filter(|(_, _, p)| p[0] > 230 && p[1] < 40 && p[2] > 230)
        .map(|(x, y, _)| (x, y))
        .collect();
    assert!(magenta.len() > 50, "{} marker pixels", magenta.len());
    // The first marker sits on the first screenshot (left column, below the tables).
    let (x, y) = magenta[0];
    assert!(x < 700 && y > 400, "marker at ({x}, {y})");
    // And the screenshot under it was drawn: it has the page's white and the field's border.
    let dark = image
        .pixels()
        .filter(|p| p[0] < 100 && p[1] < 100 && p[2] < 100)
        .count();
    assert!(dark > 500, "the report looks empty ({dark} dark pixels)");
}

#[test]
fn the_builtin_suite_passes_with_the_scripted_policy_at_dpr_1_and_2_and_the_report_renders() {
    for dpr in ["1", "2"] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run");
        let out_s = out.to_str().unwrap();
        let (code, stdout, stderr) = bench(&[
            "--suite", "builtin", "--policy", "script", "--out", out_s, "--jobs", "2", "--dpr", dpr,
        ]);
        assert_eq!(code, 0, "DPR {dpr}\nstdout:\n{stdout}\nstderr:\n{stderr}");
        assert!(stdout.contains("6/6 succeeded"), "{stdout}");
        // Not a terminal: one plain progress line per episode.
        assert_eq!(stderr.matches("bench: [").count(), 6, "{stderr}");
        let run = results(&out);
        assert_eq!(run["summary"]["success_rate"], 1.0);
        assert_eq!(run["dpr"].as_f64(), Some(dpr.parse().unwrap()));
        for episode in run["episodes"].as_array().unwrap() {
            assert_eq!(
                episode["screen"]["dpr"].as_f64(),
                Some(dpr.parse().unwrap())
            );
            assert!(
                episode["trace"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|s| s["status"] == "ok")
            );
        }
        // Gate decisions are recorded: the form's submit button asked and was approved.
        let form = run["episodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["id"] == "form-s0")
            .unwrap();
        let gates: Vec<&Value> = form["trace"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|s| s["gates"].as_array().unwrap())
            .collect();
        assert!(
            gates
                .iter()
                .any(|g| g["decision"] == "ask" && g["answer"] == "approved"),
            "{gates:?}"
        );
        if dpr == "2" {
            check_report_renders(&out);
        }
    }
}

#[test]
fn a_run_resumes_with_only_the_episodes_it_had_not_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let out_s = out.to_str().unwrap();
    let (code, _, stderr) = bench(&[
        "--suite", "builtin", "--policy", "script", "--out", out_s, "--task", "drag", "--task",
        "scroll", "--seeds", "2",
    ]);
    assert_eq!(code, 0, "{stderr}");
    std::fs::remove_dir_all(out.join("episodes/scroll-s2")).unwrap();
    // The run's own tasks and seeds: only the missing episode runs, nothing else.
    let (code, _, stderr) = bench(&["--resume", out_s]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("1 episodes already done, 1 to run"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("bench: [").count(), 1, "{stderr}");
    let run = results(&out);
    assert_eq!(run["summary"]["episodes"], 2);
    assert_eq!(run["summary"]["succeeded"], 2);
    // The rate is over the one episode this run ran, not the kept one too.
    assert_eq!(run["summary"]["episodes_run"], 1);
    let rate = run["summary"]["episodes_per_minute"].as_f64().unwrap();
    let seconds = run["summary"]["run_seconds"].as_f64().unwrap();
    assert!(
        (rate * seconds / 60.0 - 1.0).abs() < 0.05,
        "{rate}/min over {seconds} s"
    );
    let ids: Vec<&str> = run["episodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["drag-s2", "scroll-s2"]);
    // Nothing left: no rate (not a kept count over a moment), and the summary says so.
    let (code, stdout, stderr) = bench(&["--resume", out_s]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("nothing left to run"), "{stdout}");
    let run = results(&out);
    assert_eq!(run["summary"]["episodes_run"], 0);
    assert_eq!(run["summary"]["episodes_per_minute"], Value::Null);
    assert!(
        std::fs::read_to_string(out.join("report.html"))
            .unwrap()
            .contains("— (none run this time)")
    );
}

#[test]
fn a_malformed_task_is_an_error_episode_and_the_others_still_run() {
    let suite = tempfile::tempdir().unwrap();
    let good = suite.path().join("good");
    std::fs::create_dir(&good).unwrap();
    std::fs::write(
        good.join("task.json"),
        r##"{"kind": "web", "prompt": "Press the button.", "pages": ".",
             "reward": {"selector": "#b", "text": "pressed"}, "max_steps": 3}"##,
    )
    .unwrap();
    std::fs::write(
        good.join("index.html"),
        "<button id=b style='position:absolute;left:0;top:0;width:400px;height:400px' \
         onclick=\"this.textContent='pressed'\">press</button>",
    )
    .unwrap();
    std::fs::write(
        good.join("script.jsonl"),
        "{\"action\": \"teleport\"}\n{\"action\": \"left_click\", \"coordinate\": [5000, 5]}\n\
         {\"action\": \"left_click\", \"coordinate\": [100, 100]}\n",
    )
    .unwrap();
    let bad = suite.path().join("bad");
    std::fs::create_dir(&bad).unwrap();
    std::fs::write(
        bad.join("task.json"),
        r#"{"kind": "web", "prompt": "p", "reward": {"js": "1"}}"#,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let (code, stdout, stderr) = bench(&[
        "--suite",
        suite.path().to_str().unwrap(),
        "--policy",
        "script",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "not every episode succeeded\n{stdout}\n{stderr}");
    assert!(stderr.contains("task bad cannot run"), "{stderr}");
    let run = results(&out);
    let episodes = run["episodes"].as_array().unwrap();
    assert_eq!(episodes[0]["id"], "bad-s0");
    assert!(
        episodes[0]["error"]
            .as_str()
            .unwrap()
            .contains("needs `url` or `pages`")
    );
    assert_eq!(episodes[1]["id"], "good-s0");
    assert_eq!(episodes[1]["success"], true, "{}", episodes[1]);
    let trace = episodes[1]["trace"].as_array().unwrap();
    assert!(
        trace[0]["error"].as_str().unwrap().contains("teleport"),
        "{}",
        trace[0]
    );
    assert!(
        trace[1]["error"].as_str().unwrap().contains("0..=1023"),
        "{}",
        trace[1]
    );
    assert!(out.join("report.html").is_file());
}

#[test]
fn bench_without_a_run_directory_says_what_to_give() {
    let (code, _, stderr) = bench(&["--suite", "builtin", "--policy", "script"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--out RUN_DIR"), "{stderr}");
    let (code, _, stderr) = bench(&[
        "--suite",
        "/nonexistent/suite",
        "--policy",
        "script",
        "--out",
        "/tmp/x",
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("/nonexistent/suite"), "{stderr}");
}

#[test]
fn a_code_task_is_scored_by_its_checker_in_the_sandbox() {
    let suite = tempfile::tempdir().unwrap();
    for (name, solution) in [
        (
            "sum",
            "import csv\nrows = list(csv.DictReader(open('data.csv')))\nopen('total.txt', 'w').write(str(sum(int(r['n']) for r in rows)))\n",
        ),
        ("wrong", "open('total.txt', 'w').write('41')\n"),
    ] {
        let task = suite.path().join(name);
        std::fs::create_dir_all(task.join("workspace")).unwrap();
        std::fs::write(
            task.join("task.json"),
            r#"{"kind": "code", "prompt": "Write the sum of column n of data.csv to total.txt.",
                "workspace": "workspace", "checker": "check.py"}"#,
        )
        .unwrap();
        std::fs::write(task.join("workspace/data.csv"), "n\n20\n22\n").unwrap();
        std::fs::write(
            task.join("check.py"),
            "assert open('total.txt').read().strip() == '42', 'total.txt is not 42'\n",
        )
        .unwrap();
        std::fs::write(task.join("solution.py"), solution).unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let (code, stdout, stderr) = bench(&[
        "--suite",
        suite.path().to_str().unwrap(),
        "--policy",
        "script",
        "--out",
        out.to_str().unwrap(),
        "--jobs",
        "2",
    ]);
    assert_eq!(code, 1, "one of two fails\n{stdout}\n{stderr}");
    let run = results(&out);
    let episodes = run["episodes"].as_array().unwrap();
    assert_eq!(
        (episodes[0]["id"].as_str(), episodes[0]["success"].as_bool()),
        (Some("sum-s0"), Some(true)),
        "{}",
        episodes[0]
    );
    assert_eq!(episodes[0]["code"][0]["status"], "completed");
    assert_eq!(
        (episodes[1]["id"].as_str(), episodes[1]["reward"].as_f64()),
        (Some("wrong-s0"), Some(0.0))
    );
    assert!(
        episodes[1]["code"][0]["checker"]
            .as_str()
            .unwrap()
            .contains("total.txt is not 42"),
        "{}",
        episodes[1]
    );
}

/// POSTs JSON to `url` (http://127.0.0.1:PORT/…) and returns the status and body.
fn post(url: &str, body: &str) -> (u16, String) {
    post_as(url, None, body)
}

/// [`post`] with another `Host` header, as a page reaching loopback by DNS rebinding sends.
fn post_as(url: &str, host_header: Option<&str>, body: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let header = host_header.unwrap_or(host);
    let mut stream = std::net::TcpStream::connect(host).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    write!(
        stream,
        "POST /{path} HTTP/1.1\r\nHost: {header}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer[9..12].parse().unwrap();
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

#[test]
fn the_external_policy_scores_what_another_agent_did_over_http() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let mut child = Command::new(crate::cordon_bin())
        .args([
            "bench",
            "--no-browser-sandbox",
            "--suite",
            "builtin",
            "--policy",
            "external",
        ])
        .args(["--task", "drag", "--task", "scroll", "--jobs", "2", "--out"])
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = 0;
    while seen < 2 {
        let line = lines.next().expect("an announced episode").unwrap();
        let Ok(episode) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let url = episode["url"].as_str().unwrap();
        seen += 1;
        if episode["task"] == "drag" {
            let drag = r#"{"actions": [{"action": "left_click", "coordinate": [10, 10]}]}"#;
            let (status, body) = post_as(&format!("{url}/step"), Some("rebound.example:80"), drag);
            assert_eq!(status, 403, "a foreign Host reached the episode: {body}");
            let (status, body) = post(
                &format!("{url}/step"),
                r#"{"actions": [{"action": "left_click_drag", "start_coordinate": [200, 280], "coordinate": [640, 320]}]}"#,
            );
            assert_eq!(status, 200, "{body}");
            let step: Value = serde_json::from_str(&body).unwrap();
            assert_eq!(
                (step["reward"].as_f64(), step["done"].as_bool()),
                (Some(1.0), Some(true)),
                "{step}"
            );
        } else {
            // The agent gives up on this one.
            let (status, body) = post(&format!("{url}/finish"), "");
            assert_eq!(status, 200, "{body}");
        }
    }
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1), "scroll was not solved: {rest:?}");
    let run = results(&out);
    assert_eq!(run["policy"], "external");
    let episodes = run["episodes"].as_array().unwrap();
    assert_eq!(
        (
            episodes[0]["id"].as_str(),
            episodes[0]["success"].as_bool(),
            episodes[0]["steps"].as_u64()
        ),
        (Some("drag-s0"), Some(true), Some(1))
    );
    assert_eq!(
        (
            episodes[1]["id"].as_str(),
            episodes[1]["success"].as_bool(),
            episodes[1]["steps"].as_u64()
        ),
        (Some("scroll-s0"), Some(false), Some(0))
    );
}

#[test]
fn the_upstream_policy_drives_an_episode_through_the_stand_in_model() {
    crate::e2e_script("bench_upstream.py", &["--cordon", crate::cordon_bin()]);
}

#[cfg(feature = "desktop")]
#[test]
fn a_desktop_task_is_scored_by_its_checker_on_the_display() {
    let suite = tempfile::tempdir().unwrap();
    for (name, typed) in [("right", "hello\\n"), ("wrong", "bye\\n")] {
        let task = suite.path().join(name);
        std::fs::create_dir(&task).unwrap();
        std::fs::write(
            task.join("task.json"),
            r#"{"kind": "desktop", "prompt": "Type hello into the terminal and press Enter.",
                "launch": "xterm -geometry 80x24+0+0 -e sh -c 'cat > \"$HOME/answer.txt\"'",
                "checker": "grep -qx hello answer.txt", "max_steps": 5, "max_seconds": 60}"#,
        )
        .unwrap();
        // Without a window manager focus follows the pointer: move into the terminal first.
        std::fs::write(
            task.join("script.jsonl"),
            format!(
                "{{\"action\": \"mouse_move\", \"coordinate\": [100, 100]}}\n{{\"action\": \"type\", \"text\": \"{typed}\"}}\n"
            ),
        )
        .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let (code, stdout, stderr) = bench(&[
        "--suite",
        suite.path().to_str().unwrap(),
        "--policy",
        "script",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "one of two fails\n{stdout}\n{stderr}");
    let run = results(&out);
    let episodes = run["episodes"].as_array().unwrap();
    assert_eq!(
        (episodes[0]["id"].as_str(), episodes[0]["reward"].as_f64()),
        (Some("right-s0"), Some(1.0)),
        "{}",
        episodes[0]
    );
    assert_eq!(episodes[0]["kind"], "desktop");
    assert_eq!(episodes[0]["steps"], 2);
    assert!(
        out.join("episodes/right-s0")
            .join(episodes[0]["first"].as_str().unwrap())
            .is_file()
    );
    assert_eq!(
        (episodes[1]["id"].as_str(), episodes[1]["reward"].as_f64()),
        (Some("wrong-s0"), Some(0.0))
    );
}

#[test]
fn the_miniwob_suite_lists_its_task_types_and_runs_at_dpr_2_from_the_command_line() {
    // The pages come from the published package, fetched into the cache on first use.
    let (code, listed, stderr) = bench(&["--list", "miniwob"]);
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines.len(), 128, "{listed}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("click-checkboxes\t") && l.contains("solves it")),
        "{listed}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("flight.AA\t")),
        "{listed}"
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let (code, stdout, stderr) = bench(&[
        "--suite",
        "miniwob:click-checkboxes,enter-password",
        "--seeds",
        "0,1",
        "--dpr",
        "2",
        "--policy",
        "script",
        "--no-progress-bar",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let run = results(&out);
    let episodes = run["episodes"].as_array().unwrap();
    let ids: Vec<&str> = episodes.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            "click-checkboxes-s0",
            "click-checkboxes-s1",
            "enter-password-s0",
            "enter-password-s1"
        ]
    );
    for episode in episodes {
        assert_eq!(episode["success"], true, "{episode}");
        assert_eq!(episode["screen"]["dpr"], 2.0, "{episode}");
        // The policy was given the page's own utterance.
        let prompt = episode["prompt"].as_str().unwrap();
        assert!(
            prompt.starts_with("Select ") || prompt.starts_with("Enter the password"),
            "{prompt}"
        );
    }
    let (code, _, stderr) = bench(&[
        "--suite",
        "miniwob:click-nothing",
        "--policy",
        "script",
        "--out",
        dir.path().join("other").to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("click-nothing") && stderr.contains("--list miniwob"),
        "{stderr}"
    );
}
