//! Black-box tests of the `cordon` binary: exit codes, `--json`, bad input files.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a failed test should stop right there"
)]

use std::io::Write;
use std::process::{Command, Output, Stdio};

mod adapters;
mod bench;
mod bench_upstream;
mod browser;
#[cfg(feature = "desktop")]
mod desktop;
mod docs;
mod envs_remote;
mod files;
mod first_use;
mod gateway;
mod gateway_restart;
mod gateway_streaming;
mod packs;
// The throwaway PostgreSQL cluster of `cordon-server`'s tests, for `--db postgres://…`.
#[path = "../../../server/tests/all/postgres_cluster.rs"]
mod postgres_cluster;
mod replica_routing;
mod replicas;
mod serve;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

/// The `cordon` binary, after `cordon prepare` has run once for this test binary: on a
/// fresh machine the CPython image takes minutes to fetch and build, which must not count
/// against any test's own time bound.
pub(crate) fn cordon_bin() -> &'static str {
    static PREPARED: std::sync::Once = std::sync::Once::new();
    PREPARED.call_once(|| {
        let status = Command::new(env!("CARGO_BIN_EXE_cordon"))
            .arg("prepare")
            .status()
            .expect("the binary runs");
        assert!(status.success(), "`cordon prepare` failed: {status}");
    });
    env!("CARGO_BIN_EXE_cordon")
}

/// Upper bound for one client script of `tests/e2e`; a hang fails the test instead of
/// blocking CI.
const SCRIPT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// Runs `tests/e2e/<script> args…` with python3 to completion (bounded), failing the test
/// with its status. A killed script's server gets SIGTERM from the kernel (PDEATHSIG).
pub(crate) fn e2e_script(script: &str, args: &[&str]) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/e2e")
        .join(script);
    let mut child = Command::new("python3")
        .arg(path)
        .args(args)
        .stdin(Stdio::null())
        .spawn()
        .expect("python3 runs (tests/bootstrap.sh installs the clients)");
    let deadline = std::time::Instant::now() + SCRIPT_TIMEOUT;
    loop {
        if let Some(status) = child.try_wait().expect("wait for the script") {
            assert!(status.success(), "{script} {args:?} failed: {status}");
            return;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{script} {args:?} did not finish within {SCRIPT_TIMEOUT:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

pub(crate) fn cordon(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(crate::cordon_bin())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn json_run(code: &str, extra: &[&str]) -> (i32, Value) {
    let mut args = vec!["run", "--json"];
    args.extend_from_slice(extra);
    args.push("-");
    let output = cordon(&args, code);
    let text = String::from_utf8_lossy(&output.stdout);
    let value = serde_json::from_str(&text).unwrap_or_else(|error| {
        panic!(
            "not JSON ({error}): {text}\nstderr: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output.status.code().unwrap(), value)
}

fn write_temp(contents: &str, suffix: &str) -> tempfile::NamedTempFile {
    let mut file = tempfile::Builder::new().suffix(suffix).tempfile().unwrap();
    file.write_all(contents.as_bytes()).unwrap();
    file
}

/// A tools file with one `ask` tool, `pay`, whose static handler returns `"paid"`.
fn ask_pay_tools() -> tempfile::NamedTempFile {
    write_temp(
        r#"{"tools": [{"name": "pay", "policy": "ask", "handler": {"kind": "static", "result": "paid"}}]}"#,
        ".json",
    )
}

#[test]
fn completed_run_prints_every_documented_field_and_exits_0() {
    let (code, result) = json_run("print('hi')\n6 * 7", &[]);
    assert_eq!(code, 0);
    assert_eq!(result["status"], "completed");
    assert_eq!(result["stdout"], "hi\n");
    assert_eq!(result["result"], 42);
    for field in ["limit", "stderr", "error", "tool_calls", "usage"] {
        assert!(result.get(field).is_some(), "missing {field}: {result}");
    }
    for field in ["wall_ms", "cpu_ms", "peak_memory_bytes"] {
        assert!(result["usage"][field].is_u64(), "usage.{field}: {result}");
    }
}

#[test]
fn a_30_mb_exception_prints_about_max_output_bytes_marked_truncated() {
    let code = "raise ValueError('x' * 30_000_000)";
    let args = ["--max-output-bytes", "100000", "--memory-mb", "1024"];
    let mut all = vec!["run", "--json"];
    all.extend_from_slice(&args);
    all.push("-");
    let output = cordon(&all, code);
    assert!(
        output.stdout.len() < 110_000,
        "{} bytes",
        output.stdout.len()
    );
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["status"], "error");
    assert_eq!(result["error"]["type"], "ValueError");
    assert_eq!(result["truncated"], true);
    // Streamed to a pipe (not a terminal), the traceback is cut the same way.
    let mut all = vec!["run"];
    all.extend_from_slice(&args);
    all.push("-");
    let output = cordon(&all, code);
    assert!(
        output.stderr.len() < 110_000,
        "{} bytes",
        output.stderr.len()
    );
}

#[test]
fn exceptions_exit_1_with_type_message_and_traceback() {
    let (code, result) = json_run("raise ValueError('bad value')", &[]);
    assert_eq!(code, 1);
    assert_eq!(result["status"], "error");
    assert_eq!(result["error"]["type"], "ValueError");
    assert_eq!(result["error"]["message"], "bad value");
    assert!(
        result["error"]["traceback"]
            .as_str()
            .unwrap()
            .contains("ValueError")
    );
}

#[test]
fn limits_exit_3_and_name_the_limit() {
    let (code, result) = json_run("while True: pass", &["--cpu-ms", "100"]);
    assert_eq!(
        (code, result["status"].clone(), result["limit"].clone()),
        (3, json!("limit_exceeded"), json!("cpu"))
    );
    let (code, result) = json_run("print('x' * 100)", &["--max-output-bytes", "10"]);
    assert_eq!((code, result["limit"].clone()), (3, json!("output")));
}

#[test]
fn tools_file_tools_are_callable_and_recorded() {
    let tools = write_temp(
        r#"{"tools": [{"name": "add", "input_schema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]},
            "handler": {"kind": "command", "argv": ["python3", "-c", "import json,sys; d=json.load(sys.stdin); print(json.dumps(d['a'] + d['b']))"], "timeout_ms": 10000}}]}"#,
        ".json",
    );
    let (code, result) = json_run(
        "await add(a=2, b=3)",
        &["--tools", tools.path().to_str().unwrap()],
    );
    assert_eq!(code, 0, "{result}");
    assert_eq!(result["result"], 5);
    assert_eq!(result["tool_calls"][0]["name"], "add");
    assert_eq!(result["tool_calls"][0]["input"], json!({"a": 2, "b": 3}));
    assert_eq!(result["tool_calls"][0]["is_error"], false);
}

#[test]
fn malformed_tools_files_exit_2_saying_what_and_where() {
    let tools = write_temp("{\"tools\": [\n  {\"name\": \"x\",, }\n]}", ".json");
    let output = cordon(
        &["run", "--tools", tools.path().to_str().unwrap(), "-"],
        "1",
    );
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    // `file:line:column: what`, as compilers report it.
    let location = format!("{}:2:", tools.path().display());
    assert!(stderr.contains(&location), "{stderr}");
    assert!(stderr.contains("not valid JSON"), "{stderr}");
}

#[test]
fn missing_program_files_and_bad_languages_exit_2() {
    let output = cordon(&["run", "/nonexistent/program.py"], "");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("/nonexistent/program.py"));
    let output = cordon(&["run", "--lang", "cobol", "-"], "1");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("cobol"));
}

#[test]
fn non_utf8_programs_are_rejected_with_the_offset() {
    let mut file = tempfile::Builder::new().suffix(".py").tempfile().unwrap();
    file.write_all(b"print(1)\n\xff\n").unwrap();
    let output = cordon(&["run", file.path().to_str().unwrap()], "");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("offset 9"));
}

#[test]
fn plain_mode_streams_output_and_prints_the_result() {
    let output = cordon(
        &["run", "-"],
        "import sys\nprint('out')\nprint('err', file=sys.stderr)\n[1, 2]",
    );
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "out\n[1,2]\n");
    assert_eq!(String::from_utf8_lossy(&output.stderr), "err\n");
}

#[test]
fn ask_tools_are_refused_without_a_terminal_unless_approved() {
    let tools = ask_pay_tools();
    let path = tools.path().to_str().unwrap();
    let code = "try:\n    r = await pay()\nexcept ToolError as e:\n    r = e.kind\nr";
    let (_, refused) = json_run(code, &["--tools", path]);
    assert_eq!(refused["result"], "denied");
    let (_, approved) = json_run(code, &["--tools", path, "--approve", "pay"]);
    assert_eq!(approved["result"], "paid");
}

#[test]
fn the_demo_runs_end_to_end() {
    let output = cordon(&["demo"], "");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("Paris"), "{stdout}");
    assert!(
        stdout.contains("mean 21.0 °C"),
        "pandas tabulated the reports: {stdout}"
    );
    assert!(
        stdout.contains("caught ToolError (invalid_input)"),
        "{stdout}"
    );
    assert!(String::from_utf8_lossy(&output.stderr).contains("limit exceeded (cpu)"));
}

#[test]
fn python_is_cpython_and_python_lite_is_rustpython() {
    let code = "import sys\nsys.implementation.name";
    for (lang, implementation) in [
        (None, "cpython"),
        (Some("python"), "cpython"),
        (Some("cpython"), "cpython"),
        (Some("python-lite"), "rustpython"),
    ] {
        let mut args = Vec::new();
        if let Some(lang) = lang {
            args.extend(["--lang", lang]);
        }
        let (code_, value) = json_run(code, &args);
        assert_eq!(code_, 0, "{lang:?}: {value}");
        assert_eq!(value["result"], implementation, "{lang:?}: {value}");
    }
}

#[test]
fn prepare_builds_the_named_images_and_refuses_unknown_languages() {
    let output = cordon(&["prepare", "ruby"], "");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("unknown language `ruby` (use python, python-lite or javascript)"),
        "{stderr}"
    );
    let output = cordon(&["prepare", "javascript", "python-lite"], "");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    for language in ["javascript", "python-lite"] {
        assert!(
            stderr.contains(&format!("cordon: {language} is ready")),
            "{stderr}"
        );
    }
}
