//! Pausing a session and resuming it: state, files, random numbers and the clock carry
//! over, in this sandbox or another; a blob from another image, a tampered one or a
//! hostile one is refused with an error; limits hold after a resume.

use cordon_protocol::execution::{ExecutionEvent, ExecutionStatus, Language, LimitKind, Limits};
use cordon_sandbox::{
    BlobError, PauseError, PausedSession, Quota, ResumeError, Sandbox, Session, SessionSpec,
    Workspace,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::common::*;

/// Pauses `session` and reads the stored bytes back, as a store round trip would.
async fn pause_to_bytes(session: &Session) -> Vec<u8> {
    let paused = session.pause().await.expect("the session pauses");
    paused.to_bytes()
}

/// Resumes `bytes` in `sandbox` with `spec`.
async fn resume(sandbox: &Sandbox, bytes: &[u8], spec: SessionSpec) -> Session {
    let paused = PausedSession::from_bytes(bytes).expect("the blob reads back");
    sandbox
        .resume(&paused, spec)
        .await
        .expect("the session resumes")
}

/// Runs `code` in `session` and returns its final value.
async fn value(session: &Session, code: &str) -> Value {
    completed(session.execute(code).wait().await).result
}

fn quota() -> Quota {
    let limits = Limits::default();
    Quota {
        bytes: limits.workspace_bytes,
        files: limits.workspace_files,
    }
}

fn spec(language: Language) -> SessionSpec {
    SessionSpec::new(language, no_tools())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_variables_functions_imports_and_the_clock_survive() {
    let language = python_language();
    let sandbox = sandbox().await;
    let session = sandbox.session(spec(language));
    let setup = "import json, time\nclass Box:\n    def __init__(self, n): self.n = n\n\
                 boxes = [Box(i) for i in range(1000)]\ndef total(): return sum(b.n for b in boxes)\n\
                 before = time.monotonic()\ntotal()";
    assert_eq!(value(&session, setup).await, json!(499500));
    let bytes = pause_to_bytes(&session).await;
    assert!(!session.is_warm().await, "pausing frees the instance");
    let resumed = resume(sandbox, &bytes, spec(language)).await;
    let check = "[total(), json.dumps({'a': 1}), 'json' in __import__('sys').modules, \
                 time.monotonic() >= before]";
    assert_eq!(
        value(&resumed, check).await,
        json!([499500, "{\"a\": 1}", true, true])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn javascript_globals_and_functions_survive() {
    let sandbox = sandbox().await;
    let session = sandbox.session(spec(Language::Javascript));
    let setup = "globalThis.items = Array.from({length: 1000}, (_, i) => ({i}));\n\
                 globalThis.total = () => items.reduce((s, x) => s + x.i, 0);\n\
                 globalThis.started = performance.now();\ntotal()";
    assert_eq!(value(&session, setup).await, json!(499500));
    let bytes = pause_to_bytes(&session).await;
    let resumed = resume(sandbox, &bytes, spec(Language::Javascript)).await;
    assert_eq!(
        value(
            &resumed,
            "[total(), items.length, performance.now() >= started]"
        )
        .await,
        json!([499500, 1000, true])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pandas_dataframe_survives() {
    if python_language() != Language::Python {
        return; // pandas is CPython's; RustPython has no C extensions.
    }
    let sandbox = sandbox().await;
    let session = sandbox.session(spec(Language::Python));
    let setup = "import pandas as pd, numpy as np\n\
                 frame = pd.DataFrame({'x': range(1000), 'y': np.arange(1000) * 0.5})\n\
                 float(frame.y.sum())";
    assert_eq!(value(&session, setup).await, json!(249750.0));
    let bytes = pause_to_bytes(&session).await;
    let resumed = resume(sandbox, &bytes, spec(Language::Python)).await;
    let check = "[len(frame), int(frame.x.sum()), float(frame.y.sum()), \
                 frame.assign(z=frame.x * 2).z.iloc[-1].item()]";
    assert_eq!(
        value(&resumed, check).await,
        json!([1000, 499500, 249750.0, 1998])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_workspace_files_and_a_file_open_across_the_pause_survive() {
    let language = python_language();
    let sandbox = sandbox().await;
    let workspace = Workspace::new(quota());
    workspace.write("in.txt", b"abcdef").unwrap();
    let session = sandbox.session(spec(language).workspace(workspace.clone()));
    let setup = "reader = open('in.txt')\nfirst = reader.read(2)\n\
                 writer = open('log.txt', 'w')\nwriter.write('one,')\nwriter.flush()\n\
                 import os\nos.makedirs('d/e', exist_ok=True)\nopen('d/e/f.txt', 'w').write('deep')\nfirst";
    assert_eq!(value(&session, setup).await, json!("ab"));
    let bytes = pause_to_bytes(&session).await;
    // The store's copy is what counts: the host's workspace may go away with the replica.
    workspace
        .write("in.txt", b"changed after the pause")
        .unwrap();

    let restored = Workspace::new(quota());
    let resumed = resume(sandbox, &bytes, spec(language).workspace(restored.clone())).await;
    let check = "rest = reader.read()\nwriter.write('two')\nwriter.close()\n\
                 [first, rest, open('log.txt').read(), open('d/e/f.txt').read()]";
    assert_eq!(
        value(&resumed, check).await,
        json!(["ab", "cdef", "one,two", "deep"])
    );
    assert_eq!(restored.read("log.txt").unwrap(), b"one,two");
    assert_eq!(restored.read("in.txt").unwrap(), b"abcdef");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpython_tmp_files_survive() {
    if python_language() != Language::Python {
        return; // Only the CPython guest has a `/tmp` of its own.
    }
    let sandbox = sandbox().await;
    let session = sandbox.session(spec(Language::Python));
    let setup =
        "scratch = open('/tmp/scratch.txt', 'w+')\nscratch.write('kept')\nscratch.flush()\n1";
    assert_eq!(value(&session, setup).await, json!(1));
    let bytes = pause_to_bytes(&session).await;
    let resumed = resume(sandbox, &bytes, spec(Language::Python)).await;
    let check = "scratch.seek(0)\n[scratch.read(), open('/tmp/scratch.txt').read()]";
    assert_eq!(value(&resumed, check).await, json!(["kept", "kept"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn javascript_workspace_files_survive() {
    let sandbox = sandbox().await;
    let workspace = Workspace::new(quota());
    let session = sandbox.session(spec(Language::Javascript).workspace(workspace));
    let setup = "fs.mkdirSync('out/deep', {recursive: true});\n\
                 fs.writeFileSync('out/deep/a.txt', 'kept');\n1";
    assert_eq!(value(&session, setup).await, json!(1));
    let bytes = pause_to_bytes(&session).await;
    // No workspace in the spec: the resumed session gets one of its own.
    let resumed = resume(sandbox, &bytes, spec(Language::Javascript)).await;
    assert_eq!(
        value(&resumed, "fs.readFileSync('out/deep/a.txt', 'utf8')").await,
        json!("kept")
    );
    let workspace = resumed
        .workspace()
        .expect("the resumed session has the workspace");
    assert_eq!(workspace.read("out/deep/a.txt").unwrap(), b"kept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_random_numbers_go_on_as_in_an_unpaused_twin() {
    let language = python_language();
    let sandbox = sandbox().await;
    let draw = "[random.random() for _ in range(5)]";
    // Seeded twins: one paused and resumed, one never paused.
    let seeded = "import random\nrandom.seed(1234)\nrandom.random()";
    let paused = sandbox.session(spec(language));
    let twin = sandbox.session(spec(language));
    assert_eq!(value(&paused, seeded).await, value(&twin, seeded).await);
    let bytes = pause_to_bytes(&paused).await;
    let resumed = resume(sandbox, &bytes, spec(language)).await;
    assert_eq!(value(&resumed, draw).await, value(&twin, draw).await);

    // Unseeded (from the instance's own entropy): the state travels, it is not drawn anew.
    let session = sandbox.session(spec(language));
    let setup = "import random\nrandom.random()\nstate = random.getstate()\n\
                 expected = [random.random() for _ in range(5)]\nrandom.setstate(state)\nexpected";
    let expected = value(&session, setup).await;
    let bytes = pause_to_bytes(&session).await;
    let resumed = resume(sandbox, &bytes, spec(language)).await;
    assert_eq!(value(&resumed, draw).await, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn javascript_math_random_goes_on_from_the_paused_state() {
    let sandbox = sandbox().await;
    let session = sandbox.session(spec(Language::Javascript));
    // Its generator is seeded from WASI on first use; drawn once, its state is memory.
    value(&session, "Math.random()").await;
    let bytes = pause_to_bytes(&session).await;
    let draw = "Array.from({length: 5}, Math.random)";
    let first = resume(sandbox, &bytes, spec(Language::Javascript)).await;
    let second = resume(sandbox, &bytes, spec(Language::Javascript)).await;
    let sequence = value(&first, draw).await;
    assert_eq!(value(&second, draw).await, sequence);
    // And a fresh session draws its own.
    let fresh = sandbox.session(spec(Language::Javascript));
    value(&fresh, "Math.random()").await;
    assert_ne!(value(&fresh, draw).await, sequence);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_resumes_in_another_sandbox() {
    for language in [python_language(), Language::Javascript] {
        let session = sandbox().await.session(spec(language));
        let set = if language == Language::Javascript {
            "globalThis.answer = 6 * 7"
        } else {
            "answer = 6 * 7"
        };
        completed(session.execute(set).wait().await);
        let bytes = pause_to_bytes(&session).await;
        let replica = small_pool(language, 4).await;
        let resumed = resume(&replica, &bytes, spec(language)).await;
        assert_eq!(value(&resumed, "answer").await, json!(42), "{language:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_session_runs_nothing_and_pauses_once() {
    let sandbox = sandbox().await;
    let session = sandbox.session(spec(python_language()));
    completed(session.execute("x = 1").wait().await);
    session.pause().await.unwrap();
    let refused = session.execute("x").wait().await;
    assert_eq!(refused.status, ExecutionStatus::Error);
    assert_eq!(refused.error.unwrap().error_type, "SessionPaused");
    assert!(matches!(
        session.pause().await,
        Err(PauseError::AlreadyPaused)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_with_a_running_execution_is_not_paused() {
    let tools = tools(json!([client_tool("ask")]));
    let session = sandbox()
        .await
        .session(SessionSpec::new(python_language(), tools));
    completed(session.execute("x = 1").wait().await);
    let mut execution = session.execute("await ask(q='?')");
    loop {
        match execution.next_event().await.expect("it suspends") {
            ExecutionEvent::Awaiting { .. } => break,
            ExecutionEvent::Completed(result) => panic!("ended: {result:#?}"),
            _ => {}
        }
    }
    assert!(matches!(session.pause().await, Err(PauseError::Busy)));
    execution.cancel();
    execution.wait().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_that_never_ran_pauses_and_resumes() {
    let sandbox = sandbox().await;
    let session = sandbox.session(spec(python_language()));
    let bytes = pause_to_bytes(&session).await;
    let resumed = resume(sandbox, &bytes, spec(python_language())).await;
    assert_eq!(value(&resumed, "1 + 1").await, json!(2));
}

/// Rewrites the body of `bytes` with `change` and seals it again (a valid hash): what a
/// hostile store could hand back.
fn reseal(bytes: &[u8], change: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let header = 28;
    let stored = &bytes[header..bytes.len() - 32];
    let mut body = zstd::bulk::decompress(stored, 1 << 30).unwrap();
    change(&mut body);
    let stored = zstd::bulk::compress(&body, 1).unwrap();
    let mut out = bytes[..header].to_vec();
    out[12..20].copy_from_slice(&(body.len() as u64).to_le_bytes());
    out[20..28].copy_from_slice(&(stored.len() as u64).to_le_bytes());
    out.extend_from_slice(&stored);
    let hash = Sha256::digest(&out);
    out.extend_from_slice(&hash);
    out
}

/// A paused session of the test's Python guest and its bytes.
async fn paused_python() -> Vec<u8> {
    let session = sandbox().await.session(spec(python_language()));
    completed(session.execute("x = [1, 2, 3]").wait().await);
    pause_to_bytes(&session).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blob_from_another_image_or_language_is_refused() {
    let sandbox = sandbox().await;
    let bytes = paused_python().await;
    let language = python_language();
    // The image identity follows the language's name (8-byte length, then the name).
    let at = 8 + language.as_str().len();
    let other_image = reseal(&bytes, |body| body[at] ^= 1);
    let paused = PausedSession::from_bytes(&other_image).unwrap();
    let refused = sandbox.resume(&paused, spec(language)).await;
    assert!(
        matches!(refused, Err(ResumeError::OtherImage { .. })),
        "{refused:?}"
    );
    let paused = PausedSession::from_bytes(&bytes).unwrap();
    let refused = sandbox.resume(&paused, spec(Language::Javascript)).await;
    assert!(
        matches!(refused, Err(ResumeError::LanguageMismatch { .. })),
        "{refused:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tampered_truncated_and_foreign_bytes_are_refused() {
    let bytes = paused_python().await;
    let mut flipped = bytes.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 0x40;
    assert_eq!(
        PausedSession::from_bytes(&flipped).unwrap_err(),
        BlobError::Corrupted
    );
    assert_eq!(
        PausedSession::from_bytes(&bytes[..bytes.len() - 1]).unwrap_err(),
        BlobError::Truncated
    );
    assert_eq!(
        PausedSession::from_bytes(&bytes[..20]).unwrap_err(),
        BlobError::Truncated
    );
    assert_eq!(
        PausedSession::from_bytes(b"{\"not\": \"a blob\"}").unwrap_err(),
        BlobError::NotABlob
    );
    let mut future = bytes.clone();
    future[8] = 9;
    assert!(matches!(
        PausedSession::from_bytes(&future),
        Err(BlobError::UnsupportedVersion(9, _))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_contents_under_a_valid_hash_are_refused_cleanly() {
    let sandbox = sandbox().await;
    let bytes = paused_python().await;
    let language = python_language();
    // The memory size follows the identity and the workspace/instance flags.
    let memory_at = 8 + language.as_str().len() + 32 + 1 + 1;
    let huge = reseal(&bytes, |body| {
        body[memory_at..memory_at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    });
    let paused = PausedSession::from_bytes(&huge).unwrap();
    let refused = sandbox.resume(&paused, spec(language)).await;
    assert!(
        matches!(refused, Err(ResumeError::Invalid(_))),
        "{refused:?}"
    );

    // Every byte of the body changed in turn (a stride keeps it quick): an error or a
    // session, never a panic or a fault in the host.
    let body_len = {
        let stored = &bytes[28..bytes.len() - 32];
        zstd::bulk::decompress(stored, 1 << 30).unwrap().len()
    };
    let stride = (body_len / 200).max(1);
    for at in (0..body_len.min(4096)).chain((4096..body_len).step_by(stride)) {
        let hostile = reseal(&bytes, |body| body[at] = body[at].wrapping_add(0x81));
        let Ok(paused) = PausedSession::from_bytes(&hostile) else {
            continue;
        };
        if let Ok(session) = sandbox.resume(&paused, spec(language)).await {
            // What runs there is the guest's own business; the host must stay up.
            let _ = session.execute("1").wait().await;
        }
    }
    assert_eq!(
        value(&sandbox.session(spec(language)), "2 + 2").await,
        json!(4)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_hold_after_a_resume() {
    for language in [python_language(), Language::Javascript] {
        let sandbox = sandbox().await;
        let session = sandbox.session(spec(language));
        let set = if language == Language::Javascript {
            "globalThis.kept = 1"
        } else {
            "kept = 1"
        };
        completed(session.execute(set).wait().await);
        let bytes = pause_to_bytes(&session).await;

        let cpu = Limits {
            cpu_ms: 200,
            ..Limits::default()
        };
        let resumed = resume(sandbox, &bytes, spec(language).limits(cpu)).await;
        let spin = if language == Language::Javascript {
            "while (true) {}"
        } else {
            "while True:\n    pass"
        };
        let stopped = resumed.execute(spin).wait().await;
        assert_eq!(
            stopped.limit,
            Some(LimitKind::Cpu),
            "{language:?}: {stopped:#?}"
        );

        let memory = Limits {
            memory_bytes: 512 << 20,
            ..Limits::default()
        };
        let resumed = resume(sandbox, &bytes, spec(language).limits(memory)).await;
        assert_eq!(value(&resumed, "kept").await, json!(1));
        let grow = if language == Language::Javascript {
            "const a = []; while (true) a.push(new Array(1 << 20).fill(1));"
        } else {
            "a = []\nwhile True:\n    a.append(bytearray(1 << 24))"
        };
        let stopped = resumed.execute(grow).wait().await;
        assert_eq!(
            stopped.limit,
            Some(LimitKind::Memory),
            "{language:?}: {stopped:#?}"
        );
    }
}
