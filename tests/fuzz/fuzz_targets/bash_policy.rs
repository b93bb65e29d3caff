//! The `bash` pack's policy (`check_command`) on any UTF-8 command line: brush-parser's
//! tokenizer, grammar and word parser behind the bounds of `harness/core/src/packs/bash/`.
//! It returns `Ok` or a reason and never panics, and it runs on a quarter of a tokio worker's
//! stack (one long-lived thread: a thread per input grew the process by its stacks), so
//! nesting that escapes the bounds shows up as a crash here rather than as an abort of
//! `cordon serve`. Slow inputs (the grammar and the word parser backtrack) show up as
//! libFuzzer timeouts, endless loops in the tokenizer as out-of-memory.

#![no_main]

use std::path::PathBuf;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Mutex, OnceLock};

use cordon_core::packs::bash::{BashSpec, check_command};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

/// A strict pack and one that allows chains and subshells (the checker walks deeper).
fn specs(root: &std::path::Path) -> [BashSpec; 2] {
    let spec = |extra: serde_json::Value| {
        let mut spec = json!({"root": root, "allow": ["ls", "cat", "git", "find", "test"]});
        if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
            spec.extend(extra.clone());
        }
        serde_json::from_value::<BashSpec>(spec).expect("a valid bash spec")
    };
    [
        spec(json!({})),
        spec(json!({"allow_chains": true, "allow_subshells": true})),
    ]
}

/// The checking thread: command lines in, one `()` out per command line checked.
fn worker() -> &'static Mutex<(Sender<String>, Receiver<()>)> {
    static WORKER: OnceLock<Mutex<(Sender<String>, Receiver<()>)>> = OnceLock::new();
    WORKER.get_or_init(|| {
        let (commands, to_check) = channel::<String>();
        let (checked, done) = channel();
        std::thread::Builder::new()
            .stack_size(512 << 10)
            .spawn(move || {
                let root: PathBuf = std::env::temp_dir();
                let specs = specs(&root);
                for command in to_check {
                    for spec in &specs {
                        let _ = check_command(spec, &root, &command);
                    }
                    if checked.send(()).is_err() {
                        return;
                    }
                }
            })
            .expect("a thread");
        Mutex::new((commands, done))
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(command) = std::str::from_utf8(data) else {
        return;
    };
    let worker = worker().lock().expect("one input at a time");
    worker
        .0
        .send(command.to_owned())
        .expect("the worker is alive");
    // A panic on the worker aborts the process (libFuzzer's panic hook) before this fails.
    worker.1.recv().expect("check_command returned");
});
