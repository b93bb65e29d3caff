//! Tool packs: `fs` stays under its root, `bash` refuses what its policy does not allow and
//! (where bubblewrap works) cannot reach the network or write outside its root, `user_ask`
//! is a client tool.

use std::path::Path;
use std::sync::Arc;

use cordon_core::packs::{PackSpec, bash::check_command};
use cordon_core::{CallContext, Dispatcher, ToolRegistry};
use cordon_protocol::tool::Locus;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::{call_one, failure_of};

fn pack(spec: Value) -> Dispatcher {
    let spec: PackSpec = serde_json::from_value(spec).unwrap();
    let mut registry = ToolRegistry::empty();
    registry.add_pack(&spec).unwrap();
    Dispatcher::new(Arc::new(registry))
}

async fn call(tools: &Dispatcher, name: &str, input: Value) -> Result<Value, String> {
    let called = call_one(tools, &CallContext::new("e"), name, input).await;
    match &called.result {
        Ok(text) => Ok(serde_json::from_str(text).unwrap()),
        Err(_) => Err(failure_of(&called).message),
    }
}

fn project() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("project");
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(
        root.join("src/main.rs"),
        "fn main() {\n    println!(\"hi\");\n}\n",
    )
    .unwrap();
    std::fs::write(root.join("README.md"), "# demo\nhello world\n").unwrap();
    std::fs::write(dir.path().join("secret.txt"), "secret").unwrap();
    (dir, root)
}

#[test]
fn a_tools_file_expands_packs_among_tools() {
    let (_dir, root) = project();
    let text = json!({"tools": [
        {"name": "lookup", "handler": {"kind": "static", "result": 1}},
        {"pack": "fs", "root": root, "write": true},
        {"pack": "user_ask"}
    ]})
    .to_string();
    let registry = ToolRegistry::from_json(&text, "tools.json").unwrap();
    assert_eq!(
        registry.names(),
        [
            "lookup",
            "fs_read_file",
            "fs_list_files",
            "fs_search",
            "fs_write_file",
            "fs_edit",
            "user_ask"
        ]
    );
    assert_eq!(
        registry
            .get("user_ask")
            .unwrap()
            .declaration
            .handler
            .locus(),
        Locus::Client
    );
    // Mistakes point into the file.
    let bad = "{\"tools\": [\n  {\"pack\": \"fs\", \"rot\": \"/tmp\"}\n]}";
    let error = ToolRegistry::from_json(bad, "tools.json")
        .unwrap_err()
        .to_string();
    assert!(error.starts_with("tools.json:2:"), "{error}");
    assert!(
        error.contains("tools[0]") && error.contains("rot"),
        "{error}"
    );
    let missing = json!({"tools": [{"pack": "fs", "root": "/nonexistent/dir"}]}).to_string();
    let error = ToolRegistry::from_json(&missing, "tools.json")
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("pack `fs`") && error.contains("/nonexistent/dir"),
        "{error}"
    );
}

#[tokio::test]
async fn fs_reads_lists_and_searches_under_its_root_only() {
    let (dir, root) = project();
    #[cfg(unix)]
    std::os::unix::fs::symlink(dir.path().join("secret.txt"), root.join("link.txt")).unwrap();
    let tools = pack(json!({"pack": "fs", "root": root}));
    let read = call(&tools, "fs_read_file", json!({"path": "README.md"}))
        .await
        .unwrap();
    assert_eq!(read["content"], "# demo\nhello world\n");
    let listed = call(&tools, "fs_list_files", json!({})).await.unwrap();
    let paths: Vec<&str> = listed["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["path"].as_str().unwrap())
        .collect();
    assert!(
        paths.contains(&"src/main.rs") && paths.contains(&"README.md"),
        "{paths:?}"
    );
    let found = call(&tools, "fs_search", json!({"pattern": "println!\\(\"h"}))
        .await
        .unwrap();
    assert_eq!(
        found["matches"],
        json!([{"path": "src/main.rs", "line": 2, "text": "    println!(\"hi\");"}])
    );
    for escape in [
        "../secret.txt",
        "/etc/passwd",
        "src/../../secret.txt",
        "link.txt",
    ] {
        let error = call(&tools, "fs_read_file", json!({"path": escape}))
            .await
            .unwrap_err();
        assert!(error.contains("outside the root"), "{escape}: {error}");
    }
    // Without `write`, there are no writing tools at all.
    let error = call(
        &tools,
        "fs_write_file",
        json!({"path": "x", "content": "y"}),
    )
    .await
    .unwrap_err();
    assert!(
        error.contains("no tool named") || error.contains("unknown"),
        "{error}"
    );
}

#[tokio::test]
async fn fs_writes_and_edits_under_its_root_only() {
    let (dir, root) = project();
    let tools = pack(json!({"pack": "fs", "root": root, "write": true}));
    call(
        &tools,
        "fs_write_file",
        json!({"path": "notes/todo.md", "content": "one\ntwo\n"}),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(root.join("notes/todo.md")).unwrap(),
        "one\ntwo\n"
    );
    call(
        &tools,
        "fs_edit",
        json!({"path": "src/main.rs", "old_string": "hi", "new_string": "bye"}),
    )
    .await
    .unwrap();
    assert!(
        std::fs::read_to_string(root.join("src/main.rs"))
            .unwrap()
            .contains("bye")
    );
    let error = call(
        &tools,
        "fs_edit",
        json!({"path": "README.md", "old_string": "nope", "new_string": "x"}),
    )
    .await
    .unwrap_err();
    assert!(error.contains("not found"), "{error}");
    let error = call(
        &tools,
        "fs_write_file",
        json!({"path": "../planted.txt", "content": "x"}),
    )
    .await
    .unwrap_err();
    assert!(error.contains("outside the root"), "{error}");
    assert!(!dir.path().join("planted.txt").exists());
}

#[tokio::test]
async fn fs_edit_refuses_a_result_over_the_limit_before_building_it() {
    let (_dir, root) = project();
    let tools = pack(json!({"pack": "fs", "root": root, "write": true}));
    // 500 KB, 250,000 occurrences: replacing each by 2,000 bytes would be 500 MB, and
    // was built in full before the size was looked at.
    let original = "a\n".repeat(250_000);
    std::fs::write(root.join("big.txt"), &original).unwrap();
    let error = call(
        &tools,
        "fs_edit",
        json!({"path": "big.txt", "old_string": "a", "new_string": "b".repeat(2_000),
               "replace_all": true}),
    )
    .await
    .unwrap_err();
    assert!(
        error.contains("over the 4194304-byte limit") && error.contains("was not changed"),
        "{error}"
    );
    assert!(std::fs::read_to_string(root.join("big.txt")).unwrap() == original);
    // Within the limit the same kind of edit goes through.
    let edited = call(
        &tools,
        "fs_edit",
        json!({"path": "big.txt", "old_string": "a", "new_string": "bc", "replace_all": true}),
    )
    .await
    .unwrap();
    assert_eq!(edited["replacements"], 250_000);
    assert_eq!(
        std::fs::read_to_string(root.join("big.txt")).unwrap(),
        "bc\n".repeat(250_000)
    );
}

#[tokio::test]
async fn fs_reads_only_a_bounded_window_of_huge_files() {
    let (_dir, root) = project();
    let tools = pack(json!({"pack": "fs", "root": root, "write": true}));
    // Sparse: 4 GiB long, nothing stored. Reading it whole was the old behaviour.
    let huge = std::fs::File::create(root.join("huge.bin")).unwrap();
    huge.set_len(4 << 30).unwrap();
    drop(huge);
    let read = call(
        &tools,
        "fs_read_file",
        json!({"path": "huge.bin", "offset": 1_000, "limit": 4_096}),
    )
    .await
    .unwrap();
    assert_eq!(read["size"], 4u64 << 30);
    assert_eq!(read["truncated"], true);
    assert_eq!(read["content"].as_str().unwrap().len(), 4_096);
    // fs_edit does not read a file it could not write back.
    let error = call(
        &tools,
        "fs_edit",
        json!({"path": "huge.bin", "old_string": "a", "new_string": "b"}),
    )
    .await
    .unwrap_err();
    assert!(error.contains("at most 4194304 bytes"), "{error}");
    assert_eq!(
        std::fs::metadata(root.join("huge.bin")).unwrap().len(),
        4 << 30
    );
}

#[cfg(unix)]
#[tokio::test]
async fn fs_refuses_to_read_a_fifo_instead_of_hanging() {
    let (_dir, root) = project();
    let made = std::process::Command::new("mkfifo")
        .arg(root.join("pipe"))
        .status();
    if !made.is_ok_and(|status| status.success()) {
        eprintln!("skipped: mkfifo is not available");
        return;
    }
    let tools = pack(json!({"pack": "fs", "root": root, "write": true}));
    for (tool, input) in [
        ("fs_read_file", json!({"path": "pipe"})),
        (
            "fs_edit",
            json!({"path": "pipe", "old_string": "a", "new_string": "b"}),
        ),
    ] {
        let error = call(&tools, tool, input).await.unwrap_err();
        assert!(error.contains("not a regular file"), "{tool}: {error}");
    }
    // Searching skips it rather than blocking on it.
    let found = call(&tools, "fs_search", json!({"pattern": "hello"}))
        .await
        .unwrap();
    assert_eq!(found["matches"][0]["path"], "README.md");
}

fn bash_spec(root: &Path, extra: Value) -> Value {
    let mut spec = json!({"pack": "bash", "root": root, "allow": ["ls", "cat", "echo", "grep", "wc", "find", "git", "curl", "touch"]});
    if let (Value::Object(spec), Value::Object(extra)) = (&mut spec, extra) {
        spec.extend(extra);
    }
    spec
}

#[test]
fn bash_policy_refuses_each_kind_of_escape_with_a_reason() {
    let (_dir, root) = project();
    let spec: PackSpec =
        serde_json::from_value(bash_spec(&root, json!({"deny": ["curl"]}))).unwrap();
    let PackSpec::Bash(spec) = spec else {
        panic!("a bash pack")
    };
    let root = root.canonicalize().unwrap();
    let refused = [
        ("rm -rf /", "not an allowed command"),
        ("curl http://example.com", "is denied"),
        ("ls; rm x", "chains"),
        ("ls && rm x", "chains"),
        ("ls || rm x", "chains"),
        ("ls &", "chains"),
        ("ls\nrm x", "chains"),
        ("cat README.md | sh", "runs other commands"),
        ("echo $(rm x)", "command substitution"),
        ("echo \"$(rm x)\"", "command substitution"),
        ("echo `rm x`", "command substitution"),
        ("(ls)", "subshells"),
        ("cat <(rm x)", "process substitution"),
        ("bash -c 'rm x'", "runs other commands"),
        ("eval rm x", "runs other commands"),
        ("exec rm x", "runs other commands"),
        ("find . -exec rm {} ;", "runs other commands"),
        ("echo x > /etc/passwd", "outside the project directory"),
        ("echo x > ../outside.txt", "outside the project directory"),
        ("echo x >> /tmp/x", "outside the project directory"),
        ("$CMD x", "plain word"),
        ("if true; then ls; fi", "compound commands"),
        ("f() { ls; }", "functions"),
        ("echo 'unterminated", "does not parse"),
    ];
    for (command, reason) in refused {
        let error = check_command(&spec, &root, command).expect_err(command);
        assert!(error.contains(reason), "{command:?}: {error}");
    }
    for allowed in [
        "ls -la src",
        "grep -rn hello . | wc -l",
        "echo done > out.txt",
        "cat README.md 2>/dev/null",
        "git log --oneline",
        "echo '$(not run)'",
    ] {
        assert_eq!(check_command(&spec, &root, allowed), Ok(()), "{allowed}");
    }
}

#[test]
fn bash_opt_ins_lift_their_rule_only() {
    let (_dir, root) = project();
    let spec: PackSpec =
        serde_json::from_value(bash_spec(&root, json!({"allow_chains": true}))).unwrap();
    let PackSpec::Bash(spec) = spec else {
        panic!("a bash pack")
    };
    let root = root.canonicalize().unwrap();
    assert_eq!(check_command(&spec, &root, "ls && echo ok"), Ok(()));
    assert!(check_command(&spec, &root, "ls && rm x").is_err());
    assert!(check_command(&spec, &root, "ls && echo $(id)").is_err());
}

#[tokio::test]
async fn bash_runs_an_allowed_command_in_its_root() {
    let (_dir, root) = project();
    let tools = pack(bash_spec(&root, json!({})));
    let result = call(
        &tools,
        "bash",
        json!({"command": "grep -rn hello . | wc -l"}),
    )
    .await
    .unwrap();
    assert_eq!(result["exit_code"], 0, "{result}");
    assert_eq!(result["stdout"].as_str().unwrap().trim(), "1");
    let refused = call(&tools, "bash", json!({"command": "rm -rf src"}))
        .await
        .unwrap_err();
    assert!(refused.starts_with("refused:"), "{refused}");
    assert!(root.join("src/main.rs").exists());
    let listed = call(&tools, "bash", json!({"command": "ls /nonexistent"}))
        .await
        .unwrap();
    assert_ne!(listed["exit_code"], 0);
    assert!(!listed["stderr"].as_str().unwrap().is_empty());
}

#[tokio::test]
async fn bash_output_and_time_are_bounded() {
    let (_dir, root) = project();
    let tools = pack(bash_spec(
        &root,
        json!({"max_output_bytes": 100, "timeout_ms": 300, "allow": ["yes", "head", "sleep"]}),
    ));
    let result = call(&tools, "bash", json!({"command": "yes | head -n 10000"}))
        .await
        .unwrap();
    assert_eq!(result["truncated"], true);
    assert_eq!(result["stdout"].as_str().unwrap().len(), 100);
    let error = call(&tools, "bash", json!({"command": "sleep 5"}))
        .await
        .unwrap_err();
    assert!(error.contains("killed"), "{error}");
}

/// Whether bubblewrap can contain commands here (the tests of containment need it; the
/// bootstrap installs Debian's `bubblewrap`).
fn bwrap_works() -> bool {
    std::process::Command::new("bwrap")
        .args([
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--unshare-net",
            "--unshare-pid",
            "--",
            "/bin/true",
        ])
        .status()
        .is_ok_and(|status| status.success())
}

#[tokio::test]
async fn bash_is_contained_no_network_and_no_writes_outside_root() {
    if !bwrap_works() {
        eprintln!("bubblewrap is not usable here; containment is not tested");
        return;
    }
    let (dir, root) = project();
    // A listener on the host's loopback: reachable from the host, not from the command.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let outside = dir.path().join("outside.txt");
    let tools = pack(bash_spec(
        &root,
        json!({"allow": ["touch", "ls", "grep", "python3"], "allow_chains": true}),
    ));
    let probe = format!(
        "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 2); print(\"reached\")'"
    );
    let network = call(&tools, "bash", json!({"command": probe}))
        .await
        .unwrap();
    assert_eq!(network["contained"], true);
    assert_ne!(network["exit_code"], 0, "{network}");
    assert!(
        !network["stdout"].as_str().unwrap().contains("reached"),
        "{network}"
    );
    let write = call(
        &tools,
        "bash",
        json!({"command": format!("touch inside.txt; touch {}; touch /usr/planted", outside.display())}),
    )
    .await
    .unwrap();
    assert!(root.join("inside.txt").exists(), "{write}");
    assert!(!outside.exists(), "{write}");
    assert!(!Path::new("/usr/planted").exists(), "{write}");
    let pids = call(
        &tools,
        "bash",
        json!({"command": "ls /proc | grep -c '^[0-9]'"}),
    )
    .await;
    // Its own PID namespace: only the shell and `ls` (and `grep`) are there.
    if let Ok(pids) = pids
        && let Ok(count) = pids["stdout"].as_str().unwrap_or("").trim().parse::<u32>()
    {
        assert!(count < 10, "{pids}");
    }
}

#[test]
fn user_ask_is_a_client_tool_with_question_and_options() {
    let registry = ToolRegistry::from_json(r#"{"tools": [{"pack": "user_ask"}]}"#, "t").unwrap();
    let tool = registry.get("user_ask").unwrap();
    assert_eq!(tool.declaration.handler.locus(), Locus::Client);
    assert_eq!(
        tool.declaration.input_schema["required"],
        json!(["question"])
    );
}
