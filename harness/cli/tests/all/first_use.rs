//! What a new user runs into first: a tool `cordon run` cannot answer, approvals nobody was
//! asked for, messages that name the flag to pass, temporary files left behind, a bench
//! run overwritten. Each test drives the real binary.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use pretty_assertions::assert_eq;
use serde_json::Value;

use super::{ask_pay_tools, cordon, write_temp};

/// A page whose only button says Delete (the default rules ask before delete-like buttons)
/// and goes to `about:blank#deleted` when it is clicked. 1280x800 shown as 1024x640: the
/// button's centre is model (80, 40). Double quotes only, so it can be single-quoted for a
/// shell; `%23` is the `#` (a bare one would end the data URL).
const DELETE_PAGE: &str = "data:text/html,<body style=\"margin:0\"><button \
style=\"position:absolute;left:0;top:0;width:200px;height:100px\" \
onclick=\"location.href=&quot;about:blank%23deleted&quot;\">Delete</button></body>";

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn json_lines(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// `cordon ARGS` with `TMPDIR` pointed at `tmp`, stdin empty.
fn cordon_with_tmp(args: &[&str], tmp: &Path) -> Output {
    Command::new(crate::cordon_bin())
        .args(args)
        .env("TMPDIR", tmp)
        .stdin(Stdio::null())
        .output()
        .expect("the binary runs")
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().next().map(|uid| uid == "0"))
        .unwrap_or(false)
}

fn computer_args(actions: &str) -> Vec<&str> {
    vec![
        "computer",
        "--no-browser-sandbox",
        "--url",
        DELETE_PAGE,
        "--display",
        "1024x640",
        "--actions",
        actions,
    ]
}

#[test]
fn run_refuses_a_client_tool_at_start_instead_of_waiting_for_nobody() {
    let tools = write_temp(
        r#"{"tools": [{"name": "ask_me", "handler": {"kind": "client"}}]}"#,
        ".json",
    );
    let output = cordon(
        &["run", "--tools", tools.path().to_str().unwrap(), "-"],
        "print(await ask_me(q=1))",
    );
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(output.stdout.is_empty(), "nothing ran");
    for needle in ["`ask_me`", "`client` handler", "cordon serve"] {
        assert!(stderr.contains(needle), "{needle}: {stderr}");
    }
    // `cordon mcp` refuses the same tool, by the same rule.
    let output = cordon(
        &[
            "mcp",
            "--no-computer",
            "--tools",
            tools.path().to_str().unwrap(),
        ],
        "",
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("tool `ask_me` has a `client` handler"),
        "{stderr}"
    );
}

#[test]
fn an_ask_refused_for_want_of_a_terminal_names_the_approve_flag() {
    let tools = ask_pay_tools();
    let path = tools.path().to_str().unwrap();
    let output = cordon(&["run", "--tools", path, "-"], "await pay()");
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains("approval refused"), "{text}");
    assert!(text.contains("pass --approve pay"), "{text}");
    // --json keeps stdout one JSON object; the note goes to stderr.
    let output = cordon(&["run", "--json", "--tools", path, "-"], "await pay()");
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["error"]["type"], "ToolError");
    assert!(stderr(&output).contains("--approve pay"));
    // Approved, nothing to say.
    let output = cordon(
        &["run", "--tools", path, "--approve", "pay", "-"],
        "await pay()",
    );
    assert_eq!(output.status.code(), Some(0));
    assert!(
        !stderr(&output).contains("--approve"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_computer_step_left_waiting_for_approval_fails_and_names_the_flags() {
    let actions = write_temp(
        "{\"action\": \"left_click\", \"coordinate\": [80, 40]}\n\
         {\"action\": \"screenshot\"}\n",
        ".jsonl",
    );
    let output = cordon(&computer_args(actions.path().to_str().unwrap()), "");
    let text = stderr(&output);
    let lines = json_lines(&output.stdout);
    let status: Vec<&str> = lines
        .iter()
        .map(|l| l["status"].as_str().unwrap())
        .collect();
    assert_eq!(status, ["approval_required", "error"], "{lines:#?}\n{text}");
    // The click never happened.
    assert!(
        lines
            .iter()
            .all(|l| l["current_url"] != "about:blank#deleted"),
        "{lines:#?}"
    );
    // The next step says how to settle it, and so does the end of the run.
    let error = lines[1]["error"].as_str().unwrap();
    for message in [error, text.as_str()] {
        for flag in ["--approve-all", "--deny-asks", "{\"approve\": \"*\"}"] {
            assert!(message.contains(flag), "{flag}: {message}");
        }
    }
    assert!(text.contains("still waits for approval"), "{text}");
    assert_eq!(output.status.code(), Some(1), "{text}");

    // Settled by the flag, the step runs and the run succeeds.
    let mut args = computer_args(actions.path().to_str().unwrap());
    args.push("--approve-all");
    let output = cordon(&args, "");
    let lines = json_lines(&output.stdout);
    assert!(
        lines[1]["current_url"]
            .as_str()
            .unwrap()
            .ends_with("#deleted"),
        "{lines:#?}"
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
}

#[test]
fn a_computer_step_waiting_for_approval_is_asked_on_the_terminal() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: no `script` (util-linux) to give the run a terminal");
        return;
    }
    let actions = write_temp(
        "{\"action\": \"left_click\", \"coordinate\": [80, 40]}\n",
        ".jsonl",
    );
    let quoted: Vec<String> = std::iter::once(crate::cordon_bin())
        .chain(computer_args(actions.path().to_str().unwrap()))
        .map(|arg| format!("'{}'", arg.replace('\'', r"'\''")))
        .collect();
    // `script` runs the command on a pseudo-terminal and types what it reads: `y`.
    let mut child = Command::new("script")
        .args(["-qec", &quoted.join(" "), "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script runs");
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), b"y\n").unwrap();
    let output = child.wait_with_output().unwrap();
    let screen = String::from_utf8_lossy(&output.stdout);
    assert!(screen.contains("needs approval"), "{screen}");
    assert!(screen.contains("[y/N]"), "{screen}");
    assert!(
        screen.contains(r#""current_url":"about:blank#deleted""#),
        "approved, the click ran: {screen}"
    );
    assert_eq!(output.status.code(), Some(0), "{screen}");
}

#[test]
fn serve_help_says_it_is_also_the_model_gateway() {
    for args in [&["--help"][..], &["serve", "--help"]] {
        let output = cordon(args, "");
        let help = String::from_utf8_lossy(&output.stdout);
        assert!(help.contains("the model gateway"), "{args:?}: {help}");
    }
}

#[test]
fn a_missing_upstream_script_says_the_os_error_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cordon.db");
    let output = cordon(
        &[
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--db",
            db.to_str().unwrap(),
            "--upstream",
            "script=/nonexistent/tour.jsonl",
        ],
        "",
    );
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(text.contains("/nonexistent/tour.jsonl"), "{text}");
    assert_eq!(
        text.matches("No such file or directory").count(),
        1,
        "{text}"
    );
}

#[test]
fn chromium_as_root_is_refused_naming_the_flag_not_a_library_field() {
    if !is_root() {
        eprintln!("skipped: Chromium's sandbox runs for a normal user");
        return;
    }
    let actions = write_temp("{\"action\": \"screenshot\"}\n", ".jsonl");
    let output = cordon(
        &[
            "computer",
            "--url",
            "about:blank",
            "--actions",
            actions.path().to_str().unwrap(),
        ],
        "",
    );
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(text.contains("--no-browser-sandbox"), "{text}");
    assert!(!text.contains("BrowserOptions"), "{text}");
}

#[test]
fn computer_runs_without_trajectory_leave_no_temporary_directory() {
    let tmp = tempfile::tempdir().unwrap();
    // An error path: the actions file is missing, after the directory was made.
    let output = cordon_with_tmp(
        &[
            "computer",
            "--no-browser-sandbox",
            "--url",
            "about:blank",
            "--actions",
            "/nonexistent/steps.jsonl",
        ],
        tmp.path(),
    );
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    // A run to the end.
    let actions = write_temp("{\"action\": \"screenshot\"}\n", ".jsonl");
    let output = cordon_with_tmp(&computer_args(actions.path().to_str().unwrap()), tmp.path());
    let lines = json_lines(&output.stdout);
    assert_eq!(lines[0]["status"], "ok", "{}", stderr(&output));
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .filter(|name| name.to_string_lossy().starts_with("cordon-computer-"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[cfg(feature = "desktop")]
#[test]
fn a_desktop_program_exit_carries_its_output_not_a_deleted_log_path() {
    let tmp = tempfile::tempdir().unwrap();
    let actions = write_temp(
        "{\"action\": \"wait\", \"duration\": 1}\n{\"action\": \"wait\", \"duration\": 1}\n",
        ".jsonl",
    );
    let output = cordon_with_tmp(
        &[
            "computer",
            "--desktop",
            "--launch",
            "sh -c 'echo last words; exit 3'",
            "--actions",
            actions.path().to_str().unwrap(),
        ],
        tmp.path(),
    );
    let lines = json_lines(&output.stdout);
    let exited = lines
        .iter()
        .find(|l| l["event"] == "program_exited")
        .unwrap_or_else(|| panic!("no exit reported: {lines:#?}\n{}", stderr(&output)));
    assert_eq!(exited["program"]["code"], 3, "{exited}");
    assert_eq!(exited["program"]["output"], "last words", "{exited}");
    assert!(exited["program"].get("log").is_none(), "{exited}");
}

#[test]
fn bench_refuses_to_overwrite_a_run_and_a_finished_resume_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let out_s = out.to_str().unwrap();
    let first = [
        "bench",
        "--no-browser-sandbox",
        "--suite",
        "builtin",
        "--policy",
        "script",
        "--task",
        "drag",
        "--out",
        out_s,
    ];
    let output = cordon(&first, "");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let results = std::fs::read(out.join("results.json")).unwrap();
    // The same --out again: refused before anything is written.
    let output = cordon(&first, "");
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(text.contains("already holds a bench run"), "{text}");
    assert!(text.contains(&format!("--resume {out_s}")), "{text}");
    assert_eq!(std::fs::read(out.join("results.json")).unwrap(), results);
    // A resume with nothing left: no rate made up from nothing.
    let output = cordon(
        &[
            "bench",
            "--no-browser-sandbox",
            "--resume",
            out_s,
            "--task",
            "drag",
        ],
        "",
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stdout.contains("nothing left to run"), "{stdout}");
    assert!(!stdout.contains("episodes/min"), "{stdout}");
}
