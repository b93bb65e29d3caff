//! `cordon run --workspace DIR`, `--file NAME=PATH` and `--out DIR`: real files in, the
//! program's files out, nothing written outside the directories given.

use std::path::Path;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::cordon;

/// Reads `sales.csv` with `csv`, writes `out/totals.json` and `chart.png` (pure Python).
const REPORT: &str = r#"
import csv, json, os, struct, zlib
totals = {}
with open("sales.csv", newline="") as f:
    for row in csv.DictReader(f):
        totals[row["city"]] = totals.get(row["city"], 0) + int(row["amount"])
os.makedirs("out", exist_ok=True)
with open("out/totals.json", "w") as f:
    json.dump(totals, f, sort_keys=True)
def chunk(kind, data):
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xffffffff)
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)) \
    + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b"")
with open("chart.png", "wb") as f:
    f.write(png)
sorted(totals.items())
"#;

const SALES: &str = "city,amount\nParis,3\nOslo,4\nParis,5\n";

fn run_json(args: &[&str], code: &str) -> (i32, Value) {
    let mut all = vec!["run", "--json"];
    all.extend_from_slice(args);
    all.push("-");
    let output = cordon(&all, code);
    let text = String::from_utf8_lossy(&output.stdout);
    let value = serde_json::from_str(&text).unwrap_or_else(|error| {
        panic!(
            "not JSON ({error}): {text}\nstderr: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output.status.code().unwrap(), value)
}

fn check_report(dir: &Path) {
    let totals: Value =
        serde_json::from_slice(&std::fs::read(dir.join("out/totals.json")).unwrap()).unwrap();
    assert_eq!(totals, json!({"Oslo": 4, "Paris": 8}));
    let png = std::fs::read(dir.join("chart.png")).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{png:?}");
}

#[test]
fn file_in_and_out_dir_round_trip_a_csv_to_json_and_png() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("input.csv");
    std::fs::write(&csv, SALES).unwrap();
    let out = dir.path().join("out-dir");
    let file = format!("sales.csv={}", csv.display());
    let (code, result) = run_json(&["--file", &file, "--out", out.to_str().unwrap()], REPORT);
    assert_eq!(code, 0, "{result}");
    assert_eq!(result["result"], json!([["Oslo", 4], ["Paris", 8]]));
    check_report(&out);
    // Only what the program wrote goes out, not what came in.
    assert!(!out.join("sales.csv").exists());
}

#[test]
fn a_workspace_dir_is_read_and_written_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    std::fs::write(workspace.join("sales.csv"), SALES).unwrap();
    std::fs::write(workspace.join("old.txt"), "delete me").unwrap();
    let code = format!("{REPORT}\nimport os\nos.remove('old.txt')");
    let (status, result) = run_json(&["--workspace", workspace.to_str().unwrap()], &code);
    assert_eq!(status, 0, "{result}");
    check_report(&workspace);
    assert!(!workspace.join("old.txt").exists());
    assert_eq!(
        std::fs::read_to_string(workspace.join("sales.csv")).unwrap(),
        SALES
    );
}

#[cfg(unix)]
#[test]
fn links_out_of_the_workspace_dir_are_neither_read_nor_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "secret").unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), workspace.join("secret.txt")).unwrap();
    std::os::unix::fs::symlink(&outside, workspace.join("escape")).unwrap();
    std::fs::write(workspace.join("inside.txt"), "inside").unwrap();
    std::os::unix::fs::symlink(workspace.join("inside.txt"), workspace.join("alias.txt")).unwrap();
    let code = r#"
import os
def attempt(action):
    try:
        return action()
    except OSError as error:
        return type(error).__name__
seen = [
    attempt(lambda: open("secret.txt").read()),
    attempt(lambda: os.listdir("escape")),
    attempt(lambda: open("alias.txt").read()),
]
os.makedirs("escape", exist_ok=True)
with open("escape/planted.txt", "w") as f:
    f.write("planted")
seen
"#;
    let output = cordon(
        &[
            "run",
            "--json",
            "--workspace",
            workspace.to_str().unwrap(),
            "-",
        ],
        code,
    );
    let result: Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
    assert_eq!(
        result["result"],
        json!(["FileNotFoundError", "FileNotFoundError", "inside"]),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // The write back refused to go through the link: nothing appeared outside.
    assert!(!outside.join("planted.txt").exists());
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.txt")).unwrap(),
        "secret"
    );
    assert_ne!(output.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("symbolic link"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn a_workspace_dir_over_the_quota_is_refused_before_running() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("big.bin"), vec![0u8; 2000]).unwrap();
    let output = cordon(
        &[
            "run",
            "--workspace",
            dir.path().to_str().unwrap(),
            "--workspace-bytes",
            "1000",
            "-",
        ],
        "print('ran')",
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stdout).is_empty());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("quota"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Every program gets a workspace, as over HTTP and MCP: a relative write works with no file
/// option in every language, and without `--out` or `--workspace` it leaves nothing behind.
#[test]
fn every_run_has_a_workspace_discarded_without_out() {
    let dir = tempfile::tempdir().unwrap();
    let python = "open('out.csv', 'w').write('a,b\\n1,2\\n')\nopen('out.csv').read()";
    let javascript =
        "fs.writeFileSync('out.csv', 'a,b\\n1,2\\n'); fs.readFileSync('out.csv', 'utf8')";
    for (lang, code) in [
        ("python", python),
        ("python-lite", python),
        ("javascript", javascript),
    ] {
        let output = std::process::Command::new(crate::cordon_bin())
            .args(["run", "--json", "--lang", lang, "-"])
            .current_dir(dir.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write as _;
                child.stdin.take().unwrap().write_all(code.as_bytes())?;
                child.wait_with_output()
            })
            .unwrap();
        let value: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
            panic!(
                "{lang}: not JSON ({error}): {}\nstderr: {}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )
        });
        assert_eq!(value["status"], "completed", "{lang}: {value}");
        assert_eq!(value["result"], "a,b\n1,2\n", "{lang}: {value}");
    }
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "nothing is written outside: {left:?}");
}
