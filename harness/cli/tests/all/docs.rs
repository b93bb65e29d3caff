//! The README says what the binary does: its examples run as shown, and the lists and
//! numbers it gives are the binary's own.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use pretty_assertions::assert_eq;

use super::{cordon, json_run, write_temp};

fn repository_file(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::read_to_string(root.join(path)).unwrap()
}

/// The README with its line breaks folded to spaces, for sentences that wrap.
fn readme_prose() -> String {
    repository_file("README.md")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The body of the README's first ```sh block that contains `needle`.
fn sh_block(needle: &str) -> String {
    let readme = repository_file("README.md");
    readme
        .split("```sh\n")
        .skip(1)
        .filter_map(|rest| rest.split("\n```").next())
        .find(|block| block.contains(needle))
        .unwrap_or_else(|| panic!("no ```sh block with {needle:?} in the README"))
        .to_owned()
}

/// Runs `script` with `sh` in `dir`, the `cordon` under test first on `PATH`, no terminal.
fn sh(script: &str, dir: &Path) -> Output {
    let bin = Path::new(crate::cordon_bin()).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("sh")
        .args(["-c", script])
        .current_dir(dir)
        .env("PATH", path)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn the_readme_lists_the_tools_export_formats_the_binary_takes() {
    let prose = readme_prose();
    let listed: Vec<&str> = prose
        .split("cordon tools export tools.json --format ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the README shows `cordon tools export … --format A|B`")
        .trim_matches('`')
        .split('|')
        .collect();
    // The binary's own list, from its refusal of an unknown format.
    let tools = write_temp(
        r#"{"tools": [{"name": "t", "handler": {"kind": "static", "result": 1}}]}"#,
        ".json",
    );
    let file = tools.path().to_str().unwrap();
    let output = cordon(&["tools", "export", file, "--format", "bogus"], "");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let taken: Vec<&str> = stderr
        .split("(use ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .expect("the refusal lists the formats")
        .split(", ")
        .collect();
    assert_eq!(listed, taken);
    for format in listed {
        let output = cordon(&["tools", "export", file, "--format", format], "");
        assert_eq!(output.status.code(), Some(0), "--format {format}");
    }
}

#[test]
fn the_readme_says_tools_call_is_synchronous_as_it_is_in_every_guest() {
    assert!(
        readme_prose().contains(
            "`tools.call(name, args)` is the other way in, and it is **synchronous**: it \
             returns the result itself, so call it without `await`"
        ),
        "the README's tour introduces tools.call as synchronous"
    );
    let tools = write_temp(
        r#"{"tools": [{"name": "weather", "handler": {"kind": "static", "result": {"temp_c": 21}}}]}"#,
        ".json",
    );
    let path = tools.path().to_str().unwrap();
    for (lang, code) in [
        ("python", "tools.call('weather', {})['temp_c']"),
        ("python-lite", "tools.call('weather', {})['temp_c']"),
        ("javascript", "tools.call('weather', {}).temp_c"),
    ] {
        let (exit, result) = json_run(code, &["--lang", lang, "--tools", path]);
        assert_eq!(
            (exit, &result["result"]),
            (0, &21.into()),
            "{lang}: {result}"
        );
    }
}

#[test]
fn the_readme_gives_the_pinned_size_of_the_cpython_download() {
    let artifacts = repository_file("harness/sandbox/src/cpython/artifacts.rs");
    let bytes: u64 = artifacts
        .split("const WHEEL_SIZE: u64 = ")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .expect("artifacts.rs pins WHEEL_SIZE")
        .replace('_', "")
        .parse()
        .unwrap();
    let megabytes = (bytes + 500_000) / 1_000_000;
    let prose = readme_prose();
    assert!(
        prose.contains(&format!("downloads {megabytes} MB")),
        "the README should say {megabytes} MB"
    );
}

#[test]
fn the_readme_workspace_example_runs_as_shown() {
    let dir = tempfile::tempdir().unwrap();
    let output = sh(&sh_block("--file sales.csv=q3.csv"), dir.path());
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let totals = std::fs::read_to_string(dir.path().join("results/totals.csv")).unwrap();
    assert_eq!(totals, "region,amount\nnorth,160\nsouth,80\n");
}

#[test]
fn the_readme_tour_calls_its_ask_tool_and_shows_the_way_through() {
    let dir = tempfile::tempdir().unwrap();
    let tour = format!(
        "{}\n{}",
        sh_block("cat > tools.json"),
        sh_block("transfer(")
    );
    let output = sh(&tour, dir.path());
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // No terminal here: the first `transfer` run is refused and names the flag; the
    // `--approve transfer` run goes through.
    assert!(stderr.contains("pass --approve transfer"), "{stderr}");
    assert!(stdout.contains("{'ok': True}"), "{stdout}\n{stderr}");
    assert!(stdout.contains("\"temp_c\""), "plan.py ran: {stdout}");
}

#[test]
fn mcp_offers_the_server_wide_session_cap_and_its_page_lists_it() {
    let output = cordon(&["mcp", "--help"], "");
    let help = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{help}");
    let flag = help
        .split("--max-sessions <N>")
        .nth(1)
        // Up to the next option: `      --name` or `  -x, --name`.
        .and_then(|rest| rest.split("\n      --").next())
        .and_then(|rest| rest.split("\n  -").next())
        .unwrap_or_else(|| panic!("no --max-sessions in `cordon mcp --help`:\n{help}"));
    // Its help wraps to the terminal's width.
    let flag = flag.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flag.contains("across all connections"), "{flag}");
    assert!(flag.contains("[default: 64]"), "{flag}");
    assert!(repository_file("docs/mcp.md").contains("cordon mcp --max-sessions "));
}
