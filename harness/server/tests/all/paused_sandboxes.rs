//! Pausing and resuming sandboxes over HTTP, against a real server on 127.0.0.1 (a SQLite
//! file and an objects folder in a temporary directory) and a real HTTP client: state,
//! imported modules, workspace files and random generators carry over in every language;
//! busy, unknown and corrupted sandboxes get clear errors; pausing frees room in the
//! server's budget; the reaper pauses idle sandboxes and expires paused ones; a graceful
//! stop pauses what is idle and the next server brings it back.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cordon_protocol::execution::Language;
use cordon_sandbox::{Sandbox, SandboxConfig};
use cordon_server::http::ShutdownHandle;
use cordon_server::objects::Objects;
use cordon_server::{HttpApi, HttpOptions, Store};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::sync::OnceCell;

/// One sandbox (engine, image cache, instance pool) for every server of this module.
async fn sandbox() -> Sandbox {
    static SANDBOX: OnceCell<Sandbox> = OnceCell::const_new();
    SANDBOX
        .get_or_init(|| async {
            let config = SandboxConfig::default()
                .preload(vec![Language::PythonLite, Language::Javascript])
                .max_instances(64);
            Sandbox::new(config).await.expect("the sandbox starts")
        })
        .await
        .clone()
}

/// A server on 127.0.0.1 over `dir/cordon.db` and `dir/objects`.
struct Server {
    url: String,
    http: reqwest::Client,
    stop: ShutdownHandle,
    objects: PathBuf,
}

impl Server {
    async fn start(dir: &Path, options: HttpOptions) -> Server {
        let store = Store::open(&dir.join("cordon.db")).unwrap();
        let objects = dir.join("objects");
        let options = options
            .objects(Some(Objects::open(objects.to_str().unwrap()).unwrap()))
            .trajectories(Some(dir.join("trajectories")));
        let api = HttpApi::new(sandbox().await, store, options).await.unwrap();
        let stop = api.shutdown_handle();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(api.serve(listener, std::future::pending()));
        Server {
            url,
            http: reqwest::Client::new(),
            stop,
            objects,
        }
    }

    /// Pausing only when asked.
    async fn manual(dir: &Path) -> Server {
        Server::start(dir, HttpOptions::default().pause_after(None)).await
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let response = self
            .http
            .post(format!("{}{path}", self.url))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        let response = self
            .http
            .get(format!("{}{path}", self.url))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn create(&self, language: Language, stateful: bool, extra: Value) -> String {
        let mut body = json!({"language": language.as_str(), "stateful": stateful});
        if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
            body.extend(extra.clone());
        }
        let (status, created) = self.post("/v1/sandboxes", body).await;
        assert_eq!(status, 201, "{created}");
        created["id"].as_str().unwrap().to_owned()
    }

    /// Runs `code` to its end (streamed) and returns its result JSON.
    async fn run(&self, sandbox: &str, code: &str) -> Value {
        let response = self
            .http
            .post(format!("{}/v1/sandboxes/{sandbox}/executions", self.url))
            .header("accept", "text/event-stream")
            .json(&json!({"code": code}))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        assert_eq!(status, 200, "{text}");
        let completed = text
            .split("\n\n")
            .find(|event| event.contains("event: execution.completed"))
            .unwrap_or_else(|| panic!("no execution.completed in {text}"));
        let data = completed
            .lines()
            .find_map(|line| line.strip_prefix("data: "))
            .unwrap();
        // The event is the execution's result, flattened.
        let event: Value = serde_json::from_str(data).unwrap();
        assert_eq!(event["status"], "completed", "{event}");
        event["result"].clone()
    }

    async fn pause(&self, sandbox: &str) -> Value {
        let (status, body) = self
            .post(&format!("/v1/sandboxes/{sandbox}/pause"), json!({}))
            .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["state"], "paused", "{body}");
        assert!(body["paused_bytes"].as_u64().unwrap() > 0, "{body}");
        body
    }

    async fn state(&self, sandbox: &str) -> Value {
        let (status, body) = self.get(&format!("/v1/sandboxes/{sandbox}")).await;
        assert_eq!(status, 200, "{body}");
        body
    }

    fn object(&self, sandbox: &str) -> PathBuf {
        self.objects.join("paused").join(sandbox)
    }

    /// Waits (polling) until the sandbox's state is `state`.
    async fn wait_for_state(&self, sandbox: &str, state: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let body = self.state(sandbox).await;
            if body["state"] == state {
                return body;
            }
            assert!(Instant::now() < deadline, "still {body}, not {state}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// What each language sets up and then reads back: a variable, an imported module, a
/// workspace file, and a seeded random generator's next draws.
struct Script {
    language: Language,
    setup: &'static str,
    check: &'static str,
}

const PYTHON: &str = "import random, json, os\n\
    numbers = [i * i for i in range(100)]\n\
    random.seed(1234)\n\
    first = random.random()\n\
    open('kept.txt', 'w').write('written before the pause')\n\
    first";
const PYTHON_CHECK: &str = "import sys\n\
    [sum(numbers), 'json' in sys.modules, json.dumps({'ok': 1}), open('kept.txt').read(), \
     random.random()]";

const JAVASCRIPT: &str = "globalThis.numbers = Array.from({length: 100}, (_, i) => i * i);\n\
    globalThis.sum = () => numbers.reduce((a, b) => a + b, 0);\n\
    let state = 1234;\n\
    globalThis.draw = () => { state = (state * 1103515245 + 12345) % 2147483648; return state; };\n\
    globalThis.first = [draw(), Math.random()];\n\
    first[0]";
const JAVASCRIPT_CHECK: &str = "[sum(), typeof JSON.stringify, JSON.stringify({ok: 1}), \
    typeof first[1], draw()]";

fn script(language: Language) -> Script {
    match language {
        Language::Javascript => Script {
            language,
            setup: JAVASCRIPT,
            check: JAVASCRIPT_CHECK,
        },
        _ => Script {
            language,
            setup: PYTHON,
            check: PYTHON_CHECK,
        },
    }
}

/// Runs the script in a sandbox paused and resumed twice (once with `POST /resume`,
/// once by a new execution) and in a twin that is never paused: both give the same values.
async fn state_survives_pause_and_resume(language: Language) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::manual(dir.path()).await;
    let script = script(language);
    let paused = server.create(script.language, true, json!({})).await;
    let twin = server.create(script.language, true, json!({})).await;
    if script.language == Language::Javascript {
        // Files come through the files API in JavaScript (the guest has no `fs`).
        for id in [&paused, &twin] {
            let response = server
                .http
                .put(format!("{}/v1/sandboxes/{id}/files/kept.txt", server.url))
                .body("written before the pause")
                .send()
                .await
                .unwrap();
            assert!(response.status().is_success());
        }
    }
    let first = server.run(&paused, script.setup).await;
    assert_eq!(server.run(&twin, script.setup).await, first);

    let body = server.pause(&paused).await;
    assert!(
        server.object(&paused).is_file(),
        "its state is in the folder"
    );
    assert_eq!(server.state(&paused).await, body, "GET shows it paused");
    // Pausing a paused sandbox answers the same.
    let (status, again) = server
        .post(&format!("/v1/sandboxes/{paused}/pause"), json!({}))
        .await;
    assert_eq!((status, &again["state"]), (200, &json!("paused")));

    let (status, resumed) = server
        .post(&format!("/v1/sandboxes/{paused}/resume"), json!({}))
        .await;
    assert_eq!(
        (status, &resumed["state"]),
        (200, &json!("live")),
        "{resumed}"
    );
    assert_eq!(resumed.get("paused_bytes"), None);
    assert!(!server.object(&paused).exists(), "its stored state is gone");
    let expected = server.run(&twin, script.check).await;
    assert_eq!(server.run(&paused, script.check).await, expected);

    // Paused again, then brought back by a new execution.
    server.pause(&paused).await;
    let expected = server.run(&twin, script.check).await;
    assert_eq!(server.run(&paused, script.check).await, expected);
    assert_eq!(server.state(&paused).await["state"], "live");
    if script.language == Language::Javascript {
        let response = server
            .http
            .get(format!(
                "{}/v1/sandboxes/{paused}/files/kept.txt",
                server.url
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(response.text().await.unwrap(), "written before the pause");
        math_random_comes_back_from_the_stored_state(&server, &paused).await;
    }
}

/// QuickJS seeds `Math.random` per instance, so no twin draws the same numbers: instead
/// the same stored state is resumed twice (its object put back after the first resume)
/// and must draw the same next number both times.
async fn math_random_comes_back_from_the_stored_state(server: &Server, id: &str) {
    server.pause(id).await;
    let stored = std::fs::read(server.object(id)).unwrap();
    let first = server.run(id, "Math.random()").await;
    server.pause(id).await;
    std::fs::write(server.object(id), stored).unwrap();
    assert_eq!(server.run(id, "Math.random()").await, first);
    assert_ne!(
        server.run(id, "Math.random()").await,
        first,
        "the sequence goes on"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpython_state_survives_pause_and_resume() {
    state_survives_pause_and_resume(Language::Python).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_lite_state_survives_pause_and_resume() {
    state_survives_pause_and_resume(Language::PythonLite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn javascript_state_survives_pause_and_resume() {
    state_survives_pause_and_resume(Language::Javascript).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_without_a_session_keeps_its_workspace_across_a_pause() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::manual(dir.path()).await;
    let id = server.create(Language::PythonLite, false, json!({})).await;
    server
        .run(
            &id,
            "import os\nos.makedirs('d', exist_ok=True)\nopen('d/f.txt', 'w').write('files only')",
        )
        .await;
    server.pause(&id).await;
    assert_eq!(
        server.run(&id, "open('d/f.txt').read()").await,
        json!("files only")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pausing_a_busy_sandbox_is_409_and_unknown_ids_are_404() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::manual(dir.path()).await;
    let tools = json!([{"name": "lookup", "handler": {"kind": "client"}}]);
    let id = server
        .create(Language::PythonLite, true, json!({"tools": tools}))
        .await;
    // Suspended on a client tool: an execution is running.
    let (status, created) = server
        .post(
            &format!("/v1/sandboxes/{id}/executions"),
            json!({"code": "await lookup()"}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let (status, body) = server
        .post(&format!("/v1/sandboxes/{id}/pause"), json!({}))
        .await;
    assert_eq!(
        (status, &body["type"]),
        (409, &json!("sandbox_busy")),
        "{body}"
    );
    assert_eq!(server.state(&id).await["state"], "live");
    let execution = created["id"].as_str().unwrap();
    let (status, _) = server
        .post(&format!("/v1/executions/{execution}/cancel"), json!({}))
        .await;
    assert!(status < 300);
    // Once it has ended, the sandbox pauses.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, body) = server
            .post(&format!("/v1/sandboxes/{id}/pause"), json!({}))
            .await;
        if status == 200 {
            break;
        }
        assert_eq!(body["type"], "sandbox_busy", "{body}");
        assert!(
            Instant::now() < deadline,
            "the cancelled execution never ended"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for path in [
        "/v1/sandboxes/sbx_nope/pause",
        "/v1/sandboxes/sbx_nope/resume",
        "/v1/sandboxes/sbx_nope/executions",
    ] {
        let (status, body) = server.post(path, json!({"code": "1"})).await;
        assert_eq!(
            (status, &body["type"]),
            (404, &json!("not_found")),
            "{path}: {body}"
        );
    }
    // A deleted paused sandbox takes its stored state along and is not found after.
    assert!(server.object(&id).is_file());
    let response = server
        .http
        .delete(format!("{}/v1/sandboxes/{id}", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 204);
    assert!(!server.object(&id).exists());
    let (status, _) = server
        .post(&format!("/v1/sandboxes/{id}/resume"), json!({}))
        .await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupted_paused_state_interrupts_that_sandbox_and_the_server_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::manual(dir.path()).await;
    let id = server.create(Language::Javascript, true, json!({})).await;
    server.run(&id, "globalThis.x = 41").await;
    server.pause(&id).await;
    let object = server.object(&id);
    let mut bytes = std::fs::read(&object).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&object, bytes).unwrap();

    let (status, body) = server
        .post(
            &format!("/v1/sandboxes/{id}/executions"),
            json!({"code": "x + 1"}),
        )
        .await;
    assert_eq!(
        (status, &body["type"]),
        (410, &json!("sandbox_interrupted")),
        "{body}"
    );
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("corrupted"), "{message}");
    let row = server.state(&id).await;
    assert_eq!(row["state"], "interrupted", "{row}");
    assert!(
        row["reason"].as_str().unwrap().contains("corrupted"),
        "{row}"
    );
    assert!(!object.exists(), "the unreadable state is deleted");
    let (status, _) = server
        .post(&format!("/v1/sandboxes/{id}/resume"), json!({}))
        .await;
    assert_eq!(status, 410);

    let other = server.create(Language::Javascript, true, json!({})).await;
    assert_eq!(server.run(&other, "6 * 7").await, json!(42));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_executions_on_a_paused_sandbox_bring_it_back_once() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::manual(dir.path()).await;
    let id = server.create(Language::Javascript, true, json!({})).await;
    server.run(&id, "globalThis.n = 0").await;
    server.pause(&id).await;
    let runs: Vec<_> = (0..8)
        .map(|_| {
            let (url, http, id) = (server.url.clone(), server.http.clone(), id.clone());
            tokio::spawn(async move {
                let response = http
                    .post(format!("{url}/v1/sandboxes/{id}/executions"))
                    .header("accept", "text/event-stream")
                    .json(&json!({"code": "n += 1"}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(response.status().as_u16(), 200);
                response.text().await.unwrap()
            })
        })
        .collect();
    for run in runs {
        let text = run.await.unwrap();
        assert!(text.contains(r#""status":"completed""#), "{text}");
    }
    // Two resumed copies would each have counted part of the runs.
    assert_eq!(server.run(&id, "n").await, json!(8));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pausing_frees_room_in_the_budget_and_resuming_takes_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        dir.path(),
        HttpOptions::default().pause_after(None).max_sandboxes(1),
    )
    .await;
    let first = server.create(Language::Javascript, true, json!({})).await;
    server.run(&first, "globalThis.kept = 'first'").await;
    let (status, body) = server
        .post("/v1/sandboxes", json!({"language": "javascript"}))
        .await;
    assert_eq!((status, &body["type"]), (503, &json!("too_many_sandboxes")));
    server.pause(&first).await;
    let second = server.create(Language::Javascript, true, json!({})).await;
    let (status, body) = server
        .post(&format!("/v1/sandboxes/{first}/resume"), json!({}))
        .await;
    assert_eq!(
        (status, &body["type"]),
        (503, &json!("too_many_sandboxes")),
        "{body}"
    );
    assert_eq!(
        server.state(&first).await["state"],
        "paused",
        "still paused"
    );
    server.pause(&second).await;
    assert_eq!(server.run(&first, "kept").await, json!("first"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sandboxes_are_paused_and_paused_ones_expire_by_their_ttl() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        dir.path(),
        HttpOptions::default().pause_after(Some(Duration::from_millis(300))),
    )
    .await;
    let kept = server.create(Language::Javascript, true, json!({})).await;
    server.run(&kept, "globalThis.x = 41").await;
    let short = server
        .create(Language::Javascript, true, json!({"ttl_seconds": 2}))
        .await;
    server.run(&short, "globalThis.y = 1").await;
    server.wait_for_state(&kept, "paused").await;
    assert!(server.object(&kept).is_file());
    assert_eq!(server.run(&kept, "x + 1").await, json!(42));
    let expired = server.wait_for_state(&short, "expired").await;
    assert!(
        expired["reason"].as_str().unwrap().contains("ttl"),
        "{expired}"
    );
    assert!(
        !server.object(&short).exists(),
        "its stored state is deleted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_stop_pauses_idle_sandboxes_and_the_next_server_resumes_them() {
    let dir = tempfile::tempdir().unwrap();
    let first = Server::manual(dir.path()).await;
    let id = first.create(Language::PythonLite, true, json!({})).await;
    first.run(&id, "x = 41").await;
    first.stop.shutdown().await;
    assert_eq!(first.state(&id).await["state"], "paused");
    let second = Server::manual(dir.path()).await;
    assert_eq!(second.run(&id, "x + 1").await, json!(42));
}
