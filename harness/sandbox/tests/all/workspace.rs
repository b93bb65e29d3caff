//! The workspace: the guest's `/workspace`, its quotas, and the escapes it refuses.

use cordon_protocol::execution::{ExecutionResult, ExecutionStatus, Language, Limits};
use cordon_sandbox::{ExecutionRequest, Quota, SessionSpec, Workspace};
use serde_json::json;

use crate::common::*;

fn workspace() -> Workspace {
    let limits = Limits::default();
    Workspace::new(Quota {
        bytes: limits.workspace_bytes,
        files: limits.workspace_files,
    })
}

async fn run_in(
    language: Language,
    workspace: &Workspace,
    code: &str,
    limits: Limits,
) -> ExecutionResult {
    sandbox()
        .await
        .execute(
            ExecutionRequest::new(language, code, no_tools())
                .limits(limits)
                .workspace(workspace.clone()),
        )
        .wait()
        .await
}

async fn py(workspace: &Workspace, code: &str) -> ExecutionResult {
    run_in(python_language(), workspace, code, Limits::default()).await
}

#[track_caller]
fn completed(result: &ExecutionResult) {
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:#?}");
}

/// The smallest valid PNG (1×1, one red pixel), written by pure Python: zlib and struct.
const WRITE_PNG: &str = r#"
import struct, zlib
def chunk(kind, data):
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xffffffff)
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)) \
    + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b"")
with open("chart.png", "wb") as f:
    f.write(png)
"#;

#[tokio::test]
async fn python_reads_a_csv_and_writes_json_and_a_png() {
    let workspace = workspace();
    workspace
        .write("data/sales.csv", b"city,amount\nParis,3\nOslo,4\nParis,5\n")
        .unwrap();
    let code = format!(
        "{WRITE_PNG}\n{}",
        r#"
import csv, json, os, pathlib
totals = {}
with open("/workspace/data/sales.csv", newline="") as f:
    for row in csv.DictReader(f):
        totals[row["city"]] = totals.get(row["city"], 0) + int(row["amount"])
pathlib.Path("out").mkdir()
with open("out/totals.json", "w") as f:
    json.dump(totals, f)
[os.getcwd(), sorted(os.listdir(".")), sorted(os.listdir("data")), pathlib.Path("data/sales.csv").stat().st_size]
"#
    );
    let result = py(&workspace, &code).await;
    completed(&result);
    assert_eq!(
        result.result,
        json!([
            "/workspace",
            ["chart.png", "data", "out"],
            ["sales.csv"],
            35
        ])
    );
    let totals: serde_json::Value =
        serde_json::from_slice(&workspace.read("out/totals.json").unwrap()).unwrap();
    assert_eq!(totals, json!({"Paris": 8, "Oslo": 4}));
    let png = workspace.read("chart.png").unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{png:?}");
    let listed: Vec<(String, u64)> = workspace
        .list()
        .into_iter()
        .map(|entry| (entry.path, entry.size))
        .collect();
    assert_eq!(
        listed,
        vec![
            ("chart.png".to_owned(), png.len() as u64),
            ("data/sales.csv".to_owned(), 35),
            ("out/totals.json".to_owned(), 23),
        ]
    );
}

#[tokio::test]
async fn files_behave_as_files() {
    let workspace = workspace();
    let result = py(
        &workspace,
        r#"
import os, shutil
with open("a.txt", "w") as f:
    f.write("hello")
with open("a.txt", "a") as f:
    f.write(" world")
with open("a.txt", "r+") as f:
    f.seek(6)
    f.write("W")
    f.seek(0)
    text = f.read()
os.rename("a.txt", "b.txt")
os.makedirs("x/y/z")
shutil.copy("b.txt", "x/y/z/c.txt")
with open("x/y/z/c.txt", "rb") as f:
    f.seek(-5, 2)
    tail = f.read()
os.truncate("b.txt", 2)
os.remove("x/y/z/c.txt")
os.rmdir("x/y/z")
walked = [(d, sorted(fs)) for d, _, fs in os.walk(".")]
[text, tail.decode(), os.path.getsize("b.txt"), os.path.exists("a.txt"), walked]
"#,
    )
    .await;
    completed(&result);
    assert_eq!(
        result.result,
        json!([
            "hello World",
            "World",
            2,
            false,
            [[".", ["b.txt"]], ["./x", []], ["./x/y", []]]
        ])
    );
}

#[tokio::test]
async fn escapes_fail_with_os_error() {
    let workspace = workspace();
    workspace.write("inside.txt", b"ok").unwrap();
    let result = py(
        &workspace,
        r#"
import os
def attempt(action):
    try:
        action()
        return "allowed"
    except OSError as error:
        return type(error).__name__
[
    attempt(lambda: open("/etc/passwd").read()),
    attempt(lambda: open("/workspace/../etc/passwd").read()),
    attempt(lambda: open("../../../../etc/passwd").read()),
    attempt(lambda: os.listdir("/")),
    attempt(lambda: os.listdir("..")),
    attempt(lambda: os.symlink("/etc/passwd", "link")),
    attempt(lambda: os.symlink("inside.txt", "link2")),
    attempt(lambda: os.link("inside.txt", "hard")),
    attempt(lambda: open("/workspace/inside.txt").read()),
    sorted(os.listdir("/workspace")),
]
"#,
    )
    .await;
    completed(&result);
    let answers = result.result.as_array().unwrap();
    for (index, answer) in answers[..8].iter().enumerate() {
        assert_ne!(
            answer, "allowed",
            "attempt {index} escaped: {:#?}",
            result.result
        );
    }
    assert_eq!(answers[8], "allowed");
    assert_eq!(answers[9], json!(["inside.txt"]));
}

#[tokio::test]
async fn the_byte_quota_is_an_os_error_and_the_execution_goes_on() {
    let workspace = workspace();
    let limits = Limits {
        workspace_bytes: 1000,
        ..Limits::default()
    };
    let result = run_in(
        python_language(),
        &workspace,
        r#"
import errno
with open("small.bin", "wb") as f:
    f.write(b"x" * 600)
try:
    with open("big.bin", "wb") as f:
        f.write(b"y" * 600)
        f.flush()
    outcome = "stored"
except OSError as error:
    outcome = errno.errorcode.get(error.errno, error.errno)
outcome
"#,
        limits,
    )
    .await;
    completed(&result);
    assert_eq!(result.result, json!("ENOSPC"));
    let (bytes, _) = workspace.usage();
    assert!(bytes <= 1000, "the workspace holds {bytes} bytes");
    assert_eq!(workspace.read("small.bin").unwrap().len(), 600);
}

#[tokio::test]
async fn the_file_quota_is_an_os_error_and_the_execution_goes_on() {
    let workspace = workspace();
    let limits = Limits {
        workspace_files: 5,
        ..Limits::default()
    };
    let result = run_in(
        python_language(),
        &workspace,
        r#"
import errno
made = 0
try:
    for i in range(10):
        open(f"f{i}", "w").close()
        made += 1
except OSError as error:
    code = errno.errorcode.get(error.errno, error.errno)
[made, code]
"#,
        limits,
    )
    .await;
    completed(&result);
    assert_eq!(result.result, json!([5, "EDQUOT"]));
    assert_eq!(workspace.list().len(), 5);
}

#[tokio::test]
async fn without_a_workspace_the_guest_sees_no_files() {
    let result = python(
        r#"
def attempt(action):
    try:
        action()
        return "allowed"
    except OSError as error:
        return type(error).__name__
[attempt(lambda: open("/workspace/x", "w")), attempt(lambda: open("x", "w"))]
"#,
    )
    .await;
    completed(&result);
    assert!(
        !result.result.to_string().contains("allowed"),
        "{:?}",
        result.result
    );
}

#[tokio::test]
async fn a_session_keeps_its_files_and_open_handles() {
    let workspace = workspace();
    let session = sandbox()
        .await
        .session(SessionSpec::new(python_language(), no_tools()).workspace(workspace.clone()));
    let first = session
        .execute("log = open('log.txt', 'w')\nlog.write('one\\n')\nlog.flush()")
        .wait()
        .await;
    completed(&first);
    workspace.write("uploaded.txt", b"from the host").unwrap();
    let second = session
        .execute("log.write('two\\n')\nlog.close()\n[open('log.txt').read(), open('uploaded.txt').read()]")
        .wait()
        .await;
    completed(&second);
    assert_eq!(second.result, json!(["one\ntwo\n", "from the host"]));
}

#[tokio::test]
async fn javascript_has_a_node_like_fs() {
    let workspace = workspace();
    workspace.write("in.csv", b"a,b\n1,2\n").unwrap();
    let result = run_in(
        Language::Javascript,
        &workspace,
        r#"
const rows = fs.readFileSync("in.csv", "utf8").trim().split("\n").map(l => l.split(","));
fs.mkdirSync("out/deep", {recursive: true});
fs.writeFileSync("out/rows.json", JSON.stringify(rows));
fs.appendFileSync("out/rows.json", "\n");
fs.writeFileSync("out/bytes.bin", new Uint8Array([0, 1, 255]));
const codes = [];
for (const attempt of [
    () => fs.readFileSync("missing.txt"),
    () => fs.readFileSync("/etc/passwd"),
    () => fs.readFileSync("../outside"),
]) {
    try { attempt(); codes.push("allowed"); } catch (e) { codes.push(e.code); }
}
const bytes = fs.readFileSync("out/bytes.bin");
[fs.readdirSync("out"), Array.from(bytes), fs.statSync("out").isDirectory(),
 fs.statSync("in.csv").size, fs.existsSync("nope"), codes]
"#,
        Limits::default(),
    )
    .await;
    completed(&result);
    assert_eq!(
        result.result,
        json!([
            ["bytes.bin", "deep", "rows.json"],
            [0, 1, 255],
            true,
            8,
            false,
            ["ENOENT", "ENOENT", "ENOTCAPABLE"]
        ])
    );
    assert_eq!(
        workspace.read("out/rows.json").unwrap(),
        b"[[\"a\",\"b\"],[\"1\",\"2\"]]\n"
    );
}

/// The seek-and-write that wrapped the quota sum: two seeks to 2^64 - 2 (the second was
/// refused to the guest but moved the host's position), then one byte.
const SEEK_TO_THE_TOP: &str = r#"
import errno, os
def code(action):
    try:
        return action()
    except OSError as error:
        return errno.errorcode.get(error.errno, error.errno)
with open("other.bin", "wb") as f:
    f.write(b"12345")
fd = os.open("f.bin", os.O_RDWR | os.O_CREAT)
outcome = [
    code(lambda: os.lseek(fd, 2**63 - 1, os.SEEK_SET)),
    code(lambda: os.lseek(fd, 2**63 - 1, os.SEEK_CUR)),
    code(lambda: os.lseek(fd, 0, os.SEEK_CUR)),
    code(lambda: os.write(fd, b"x")),
    code(lambda: os.lseek(fd, -1, os.SEEK_SET)),
    code(lambda: os.lseek(fd, 0, os.SEEK_CUR)),
]
outcome
"#;

#[tokio::test]
async fn a_write_at_the_top_of_u64_is_an_os_error_and_the_session_goes_on() {
    for language in [Language::PythonLite, Language::Python] {
        let workspace = workspace();
        let session = sandbox()
            .await
            .session(SessionSpec::new(language, no_tools()).workspace(workspace.clone()));
        let caught = session.execute(SEEK_TO_THE_TOP).wait().await;
        completed(&caught);
        let top = json!(i64::MAX);
        assert_eq!(
            caught.result,
            json!([top, "EOVERFLOW", top, "EFBIG", "EINVAL", top]),
            "{language:?}"
        );
        // Uncaught, the same write ends the execution with the guest's own OSError.
        let uncaught = session.execute("os.write(fd, b'x')").wait().await;
        assert_eq!(uncaught.status, ExecutionStatus::Error, "{uncaught:#?}");
        let error = uncaught.error.as_ref().unwrap();
        assert!(error.error_type.contains("OSError"), "{uncaught:#?}");
        // The session, its instance and the workspace go on as before.
        let after = session
            .execute("os.lseek(fd, 0, os.SEEK_SET)\nos.write(fd, b'ok')\nos.close(fd)\n[open('f.bin').read(), open('other.bin').read()]")
            .wait()
            .await;
        completed(&after);
        assert_eq!(after.result, json!(["ok", "12345"]), "{language:?}");
        assert_eq!(workspace.usage(), (7, 2));
    }
}
