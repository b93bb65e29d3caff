//! `cordon bench --policy upstream` in each vendor's computer-use dialect, against a
//! stand-in model server speaking that vendor's wire protocol: it checks every screenshot it
//! is sent is a real PNG of the episode's display size, answers with the actions that solve
//! a built-in task (in the vendor's coordinates: display pixels, or Gemini's 0–999 grid),
//! and the run must be solved by the page's own reward. Real Chromium (and Xvfb for the
//! desktop task), started and stopped by `cordon bench`.

mod anthropic;
#[cfg(feature = "desktop")]
mod desktop;
mod gemini;
mod openai;
mod standin;

use std::path::Path;

use serde_json::Value;

use standin::StandIn;

/// The built-in tasks' model display, and the page behind it.
const DISPLAY: (u32, u32) = (1024, 640);
const VIEWPORT: (f64, f64) = (1280.0, 800.0);

/// The points the built-in `form` task's script clicks, in display pixels: the name and
/// email fields, the terms checkbox, the submit button.
const NAME: (i64, i64) = (360, 80);
const EMAIL: (i64, i64) = (360, 136);
const TERMS: (i64, i64) = (212, 184);
const SUBMIT: (i64, i64) = (280, 244);

/// Where a display pixel lands on the page (CSS px): its centre, scaled.
fn css_of_display(p: (i64, i64)) -> (f64, f64) {
    (
        (p.0 as f64 + 0.5) * VIEWPORT.0 / f64::from(DISPLAY.0),
        (p.1 as f64 + 0.5) * VIEWPORT.1 / f64::from(DISPLAY.1),
    )
}

/// Runs `cordon bench --policy upstream` on seed 0 of the built-in suite's `task` against
/// `standin` speaking `api`, with `extra` flags; returns the exit code and the run's results.
fn run_bench(standin: &StandIn, api: &str, task: &str, extra: &[&str]) -> (i32, Value) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let upstream = format!("{api}={}", standin.url);
    let mut args = vec![
        "bench",
        "--no-browser-sandbox",
        "--no-progress-bar",
        "--suite",
        "builtin",
        "--task",
        task,
        "--seeds",
        "0",
        "--policy",
        "upstream",
        "--upstream",
        &upstream,
        "--model",
        "standin-1",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    finish(standin, &args, &out)
}

fn finish(standin: &StandIn, args: &[&str], out: &Path) -> (i32, Value) {
    let output = crate::cordon(args, "");
    let code = output.status.code().unwrap_or(-1);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        standin.failures().is_empty(),
        "the model was sent what it should not have been: {:#?}\n{stderr}",
        standin.failures()
    );
    let text = std::fs::read_to_string(out.join("results.json"))
        .unwrap_or_else(|e| panic!("no results.json ({e}): exit {code}\n{stderr}"));
    (code, serde_json::from_str(&text).unwrap())
}

/// The mark (press) of `step` (1-based) number `index`, as (model, screen).
fn mark(episode: &Value, step: usize, index: usize) -> ((i64, i64), (f64, f64)) {
    let m = &episode["trace"][step - 1]["marks"][index];
    (
        (
            m["model"][0].as_i64().unwrap(),
            m["model"][1].as_i64().unwrap(),
        ),
        (
            m["screen"][0].as_f64().unwrap(),
            m["screen"][1].as_f64().unwrap(),
        ),
    )
}

fn close(a: (f64, f64), b: (f64, f64)) -> bool {
    (a.0 - b.0).abs() < 0.01 && (a.1 - b.1).abs() < 0.01
}
