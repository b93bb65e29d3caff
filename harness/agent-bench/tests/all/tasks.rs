//! The suite format: what loads, and the clear errors of what does not.

use cordon_agent_bench::task::{Reward, Suite, Task, TaskDir, TaskKind};
use pretty_assertions::assert_eq;

fn parse(text: &str) -> Result<Task, String> {
    Task::parse(text, "t", TaskDir::Disk("/tmp/t".into()))
}

#[test]
fn the_builtin_suite_loads_every_task() {
    let suite = Suite::builtin();
    let ids: Vec<&str> = suite.entries.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, ["autocomplete", "dialog", "drag", "form", "scroll"]);
    for entry in &suite.entries {
        let task = entry.task.as_ref().unwrap();
        assert!(matches!(task.kind, TaskKind::Web(_)), "{}", task.id);
        assert!(
            task.file("script.jsonl").is_some(),
            "{} has a script",
            task.id
        );
        cordon_agent_bench::run::read_script(task).unwrap();
    }
}

#[test]
fn a_web_task_with_a_dom_reward_parses_with_defaults() {
    let task = parse(r##"{"kind": "web", "prompt": "p", "url": "http://127.0.0.1:1/", "reward": {"selector": "#ok", "text": "yes"}}"##).unwrap();
    assert_eq!(task.id, "t");
    assert_eq!(
        (task.seeds.clone(), task.max_steps, task.max_seconds),
        (vec![0], 20, 60.0)
    );
    let TaskKind::Web(web) = &task.kind else {
        panic!("web")
    };
    assert_eq!(
        web.reward,
        Reward::Dom {
            selector: "#ok".into(),
            text: Some("yes".into())
        }
    );
}

#[test]
fn malformed_tasks_say_what_is_wrong() {
    let cases = [
        ("not json", "expected"),
        (
            r#"{"kind": "web", "prompt": "p", "reward": {"js": "1"}}"#,
            "needs `url` or `pages`",
        ),
        (
            r#"{"kind": "boat", "prompt": "p"}"#,
            "unknown variant `boat`",
        ),
        (
            r#"{"kind": "web", "prompt": "p", "url": "http://x/", "reward": {"js": "1"}, "dpr": 3}"#,
            "`dpr` must be 1 or 2",
        ),
        (
            r#"{"kind": "web", "prompt": "p", "url": "http://x/", "reward": {"js": "1"}, "display": "big"}"#,
            "`display` must be",
        ),
        (
            r#"{"kind": "web", "prompt": "p", "url": "http://x/", "reward": {"js": "1"}, "seeds": []}"#,
            "`seeds` is empty",
        ),
        (
            r#"{"kind": "web", "prompt": "p", "url": "http://x/", "reward": {"js": "1"}, "colour": 1}"#,
            "unknown field `colour`",
        ),
        (
            r#"{"kind": "code", "prompt": "p"}"#,
            "missing field `checker`",
        ),
    ];
    for (text, want) in cases {
        let error = parse(text).unwrap_err();
        assert!(error.contains(want), "{text}: {error}");
    }
}

#[test]
fn a_suite_directory_keeps_bad_tasks_as_errors_and_loads_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("good")).unwrap();
    std::fs::write(
        dir.path().join("good/task.json"),
        r#"{"kind": "web", "prompt": "p", "pages": ".", "reward": {"js": "true"}}"#,
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("bad")).unwrap();
    std::fs::write(dir.path().join("bad/task.json"), "{").unwrap();
    std::fs::create_dir(dir.path().join("not-a-task")).unwrap();
    let suite = Suite::load(dir.path()).unwrap();
    let ids: Vec<&str> = suite.entries.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, ["bad", "good"]);
    assert!(
        suite.entries[0]
            .task
            .as_ref()
            .unwrap_err()
            .contains("bad/task.json")
    );
    assert!(suite.entries[1].task.is_ok());
    let empty = tempfile::tempdir().unwrap();
    let error = Suite::load(empty.path()).unwrap_err().to_string();
    assert!(error.contains("no task found"), "{error}");
}
