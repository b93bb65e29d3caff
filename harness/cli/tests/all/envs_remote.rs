//! Benchmark environments on `cordon serve` processes (real Chromium through the server):
//! an environment's episodes survive `kill -9` and a restart in the store (the environment
//! itself is `interrupted`), and `cordon bench --remote` spreads a run over two servers,
//! going on without one that is not listening.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::serve::Server;

/// One HTTP/1.1 request to `url` (http://127.0.0.1:PORT/…): the status and the JSON body
/// (`Null` when there is none).
fn call(method: &str, url: &str, token: Option<&str>, body: Option<Value>) -> (u16, Value) {
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let mut stream = std::net::TcpStream::connect(host).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let auth = token
        .map(|t| format!("authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "{method} /{path} HTTP/1.1\r\nHost: {host}\r\n{auth}content-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer[9..12].parse().unwrap();
    let text = answer.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (status, serde_json::from_str(text).unwrap_or(Value::Null))
}

fn scroll() -> Value {
    json!({"actions": [{"action": "scroll", "coordinate": [512, 320],
        "scroll_direction": "down", "scroll_amount": 30}]})
}

fn click() -> Value {
    json!({"actions": [{"action": "left_click", "coordinate": [512, 320]}]})
}

/// The episodes of a GET answer as (episode, task, seed, steps, reward, done).
fn episodes(env: &Value) -> Vec<(u64, String, u64, u64, f64, bool)> {
    env["episodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["episode"].as_u64().unwrap(),
                e["task"].as_str().unwrap().to_owned(),
                e["seed"].as_u64().unwrap(),
                e["steps"].as_u64().unwrap(),
                e["reward"].as_f64().unwrap(),
                e["done"].as_bool().unwrap(),
            )
        })
        .collect()
}

#[test]
fn env_episodes_survive_kill_9_and_the_env_says_it_was_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cordon.db");
    let server = Server::serve(&db, &[]);
    let base = format!("{}/v1/envs", server.url);
    let (status, created) = call(
        "POST",
        &base,
        None,
        Some(json!({"task": "scroll", "seed": 3})),
    );
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    let env = format!("{base}/{id}");
    // Episode 1: solved in two steps. Episode 2 (a reset, seed 4): one step, not solved.
    let (_, first) = call("POST", &format!("{env}/step"), None, Some(scroll()));
    assert_eq!(
        (first["reward"].as_f64(), first["done"].as_bool()),
        (Some(0.0), Some(false)),
        "{first}"
    );
    let (_, second) = call("POST", &format!("{env}/step"), None, Some(click()));
    assert_eq!(
        (second["reward"].as_f64(), second["done"].as_bool()),
        (Some(1.0), Some(true)),
        "{second}"
    );
    let (status, reset) = call(
        "POST",
        &format!("{env}/reset"),
        None,
        Some(json!({"seed": 4})),
    );
    assert_eq!(status, 200, "{reset}");
    let (status, stepped) = call("POST", &format!("{env}/step"), None, Some(scroll()));
    assert_eq!(status, 200, "{stepped}");
    let expected = vec![
        (1, "scroll".to_owned(), 3, 2, 1.0, true),
        (2, "scroll".to_owned(), 4, 1, 0.0, false),
    ];
    let (_, live) = call("GET", &env, None, None);
    assert_eq!(
        (live["status"].as_str(), episodes(&live)),
        (Some("live"), expected.clone()),
        "{live}"
    );

    server.kill_9();
    let server = Server::serve(&db, &[]);
    let base = format!("{}/v1/envs", server.url);
    let env = format!("{base}/{id}");
    let (status, after) = call("GET", &env, None, None);
    assert_eq!(status, 200, "{after}");
    assert_eq!(
        (
            after["status"].as_str(),
            after["steps"].as_u64(),
            after["seed"].as_u64()
        ),
        (Some("interrupted"), Some(1), Some(4)),
        "{after}"
    );
    assert!(
        after["reason"].as_str().unwrap().contains("killed"),
        "{after}"
    );
    assert_eq!(episodes(&after), expected);
    // Its browser session is gone: step and reset say so, and how to go on.
    for (route, body) in [("step", scroll()), ("reset", json!({}))] {
        let (status, refused) = call("POST", &format!("{env}/{route}"), None, Some(body));
        assert_eq!(
            (status, refused["type"].as_str()),
            (410, Some("env_interrupted")),
            "{refused}"
        );
        let message = refused["message"].as_str().unwrap();
        assert!(
            message.contains("restart") && message.contains("POST /v1/envs"),
            "{message}"
        );
    }
    // A new environment runs on the restarted server; deleting it keeps its record.
    let (status, fresh) = call("POST", &base, None, Some(json!({"task": "drag"})));
    assert_eq!(status, 201, "{fresh}");
    let fresh = format!("{base}/{}", fresh["id"].as_str().unwrap());
    let (status, _) = call("DELETE", &fresh, None, None);
    assert_eq!(status, 204);
    let (_, closed) = call("GET", &fresh, None, None);
    assert_eq!(
        (closed["status"].as_str(), episodes(&closed)),
        (
            Some("closed"),
            vec![(1, "drag".to_owned(), 0, 0, 0.0, false)]
        ),
        "{closed}"
    );
}

fn results(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap()
}

/// A loopback URL nothing listens on.
fn dead_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    url
}

#[test]
fn bench_remote_spreads_a_run_over_two_servers_and_goes_on_without_a_dead_one() {
    let dir = tempfile::tempdir().unwrap();
    let token = ["--token", "s3cret"];
    let a = Server::serve(&dir.path().join("a.db"), &token);
    let b = Server::serve(&dir.path().join("b.db"), &token);
    let bench = |out: &Path, remotes: &[&str], jobs: &str| {
        let mut args = vec![
            "bench", "--suite", "builtin", "--policy", "script", "--jobs", jobs,
        ];
        for url in remotes {
            args.extend(["--remote", url]);
        }
        args.extend(["--token", "s3cret", "--out", out.to_str().unwrap()]);
        let output = crate::cordon(&args, "");
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr,
        )
    };

    let out = dir.path().join("two");
    let (code, stdout, stderr) = bench(&out, &[&a.url, &b.url], "2");
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let run = results(&out);
    let episodes = run["episodes"].as_array().unwrap();
    assert_eq!(episodes.len(), 6, "{run}");
    let mut servers = BTreeSet::new();
    for e in episodes {
        assert_eq!(
            (e["success"].as_bool(), e["reward"].as_f64()),
            (Some(true), Some(1.0)),
            "{e}"
        );
        assert!(e["steps"].as_u64().unwrap() >= 1, "{e}");
        assert!(!e["trace"].as_array().unwrap().is_empty(), "{e}");
        servers.insert(e["server"].as_str().unwrap().to_owned());
    }
    assert_eq!(
        servers,
        BTreeSet::from([a.url.clone(), b.url.clone()]),
        "both servers ran episodes"
    );
    assert!(
        stderr.contains(&format!(" on {}", a.url)),
        "progress names the server: {stderr}"
    );
    let report = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(report.contains(&format!("server <code>{}</code>", b.url)));

    // A third server that is not listening: the episodes it got are errors naming it; the
    // run goes on with the other two and finishes. Two at once: the first two go to the
    // live servers, the third to the idle one that has had none, the dead one.
    let dead = dead_url();
    let out = dir.path().join("three");
    let (code, stdout, stderr) = bench(&out, &[&a.url, &b.url, &dead], "2");
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    let run = results(&out);
    let episodes = run["episodes"].as_array().unwrap();
    assert_eq!(episodes.len(), 6, "{run}");
    let (failed, ran): (Vec<&Value>, Vec<&Value>) = episodes
        .iter()
        .partition(|e| e["server"].as_str() == Some(dead.as_str()));
    assert!(
        !failed.is_empty(),
        "the dead server was given an episode: {run}"
    );
    for e in &failed {
        let error = e["error"].as_str().unwrap();
        assert!(
            error.contains(&dead) && error.contains("could not connect"),
            "{error}"
        );
        assert_eq!(e["success"].as_bool(), Some(false));
    }
    for e in &ran {
        assert_eq!(
            (e["success"].as_bool(), e["reward"].as_f64()),
            (Some(true), Some(1.0)),
            "{e}"
        );
    }
    assert_eq!(
        run["summary"]["errors"].as_u64(),
        Some(failed.len() as u64),
        "{run}"
    );
    assert!(stderr.contains("is down"), "{stderr}");
}

#[test]
fn bench_remote_without_the_token_records_the_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::serve(&dir.path().join("a.db"), &["--token", "s3cret"]);
    let out = dir.path().join("run");
    let output = crate::cordon(
        &[
            "bench",
            "--suite",
            "builtin",
            "--policy",
            "script",
            "--task",
            "drag",
            "--remote",
            &server.url,
            "--out",
            out.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(output.status.code(), Some(1));
    let run = results(&out);
    let error = run["episodes"][0]["error"].as_str().unwrap();
    assert!(error.contains("401 unauthorized"), "{error}");
}

#[test]
fn miniwob_task_types_are_served_by_v1_envs_and_remote_scripted_runs_say_why_not() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::serve(&dir.path().join("a.db"), &[]);
    let base = format!("{}/v1/envs", server.url);
    let (status, listed) = call("GET", &format!("{base}/tasks?suite=miniwob"), None, None);
    assert_eq!(status, 200, "{listed}");
    let ids: Vec<&str> = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["id"].as_str())
        .collect();
    assert!(ids.contains(&"click-button") && ids.len() > 50, "{ids:?}");
    let body = json!({"suite": "miniwob", "task": "click-button", "seed": 1});
    let (status, created) = call("POST", &base, None, Some(body));
    assert_eq!(status, 201, "{created}");
    // The instruction is the page's utterance for this seed, on MiniWoB++'s 500×320 screen.
    let instruction = created["instruction"].as_str().unwrap();
    assert!(instruction.starts_with("Click on the"), "{created}");
    assert_eq!(created["suite"], "miniwob");
    assert_eq!(
        created["screen"]["display"],
        json!({"width": 500, "height": 320})
    );
    let env = format!("{base}/{}", created["id"].as_str().unwrap());
    let (status, stepped) = call(
        "POST",
        &format!("{env}/step"),
        None,
        Some(json!(
            {"actions": [{"action": "left_click", "coordinate": [5, 5]}]}
        )),
    );
    assert_eq!(status, 200, "{stepped}");
    let (status, unknown) = call(
        "POST",
        &base,
        None,
        Some(json!({"suite": "miniwob", "task": "click-nothing"})),
    );
    assert_eq!(
        (status, unknown["type"].as_str()),
        (422, Some("invalid_task")),
        "{unknown}"
    );

    let out = dir.path().join("run");
    let output = crate::cordon(
        &[
            "bench",
            "--suite",
            "miniwob:click-button",
            "--seeds",
            "0",
            "--policy",
            "script",
            "--remote",
            &server.url,
            "--out",
            out.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(output.status.code(), Some(1));
    let run = results(&out);
    let error = run["episodes"][0]["error"].as_str().unwrap();
    assert!(error.contains("reads the page's DOM"), "{error}");
}
