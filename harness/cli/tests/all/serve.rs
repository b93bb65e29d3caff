//! `cordon serve` and `cordon mcp` driven by real clients: the scripts in `tests/e2e`
//! use `httpx` and the official MCP Python SDK (`tests/requirements.txt`, installed by
//! `tests/bootstrap.sh`). Each test starts and stops its own server on 127.0.0.1; the
//! computer-use scenarios serve their test page from the script (`tests/e2e/pages.py`),
//! and the server under test starts and stops Chromium itself.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn e2e(script: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/e2e")
        .join(script)
}

/// A `cordon` server process, killed when dropped.
pub(crate) struct Server {
    child: Child,
    pub(crate) url: String,
}

impl Drop for Server {
    /// SIGTERM first, so the server stops the Chromium it started; SIGKILL if it lingers.
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Processes whose command line names a Chromium profile of server process `pid`
/// (`cordon-chromium-<pid>-<n>`).
fn chromium_of(pid: u32) -> Vec<u32> {
    let needle = format!("cordon-chromium-{pid}-");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|candidate| {
            std::fs::read(format!("/proc/{candidate}/cmdline"))
                .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(&needle))
        })
        .collect()
}

impl Server {
    /// Starts `cordon <args>` and waits for its "listening on http://…" line.
    pub(crate) fn start(args: &[&str]) -> Server {
        let mut child = Command::new(crate::cordon_bin())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the binary runs");
        let stderr = child.stderr.take().expect("stderr is piped");
        let (tx, rx) = std::sync::mpsc::channel();
        // Keep draining stderr so the server never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                eprintln!("[server] {line}");
                if !sent && let Some(at) = line.find("http://") {
                    let url = line[at..]
                        .split_whitespace()
                        .next()
                        .unwrap_or("")
                        .to_owned();
                    let _ = tx.send(url.trim_end_matches("/mcp").to_owned());
                    sent = true;
                }
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(120))
            .expect("the server printed its address");
        Server { child, url }
    }

    pub(crate) fn serve(db: &Path, extra: &[&str]) -> Server {
        // The test pages are on loopback (a private network) and CI runs as root: both
        // are lifted explicitly, as an operator would.
        let mut args = vec![
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--db",
            db.to_str().unwrap(),
            "--allow-private-network",
            "--no-browser-sandbox",
        ];
        args.extend_from_slice(extra);
        Server::start(&args)
    }

    /// SIGTERM (see `Drop`), then checks that the server stopped the Chromium it ran.
    fn terminate_and_check_chromium(self) {
        let pid = self.child.id();
        drop(self);
        assert_eq!(
            chromium_of(pid),
            Vec::<u32>::new(),
            "SIGTERM stops Chromium"
        );
    }

    /// Its process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `kill -9`: no chance to clean up. Returns the pid it had.
    pub(crate) fn kill_9(mut self) -> u32 {
        let pid = self.child.id();
        self.child.kill().expect("SIGKILL is delivered");
        let _ = self.child.wait();
        pid
    }
}

fn http_scenario(name: &str) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::serve(&dir.path().join("cordon.db"), &[]);
    crate::e2e_script("http_api.py", &[name, &server.url]);
}

#[test]
fn http_api_runs_python_and_javascript_with_httpx() {
    http_scenario("basics");
}

#[test]
fn http_api_errors_are_json_with_type_and_message() {
    http_scenario("errors");
}

#[test]
fn http_api_client_tool_round_trip_suspends_and_resumes() {
    http_scenario("client_tool");
}

#[test]
fn http_api_sse_resumes_with_last_event_id_without_loss_or_duplicates() {
    http_scenario("resume");
}

#[test]
fn http_api_approval_round_trip() {
    http_scenario("approval");
}

#[test]
fn http_api_requires_the_bearer_token() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::serve(&dir.path().join("cordon.db"), &["--token", "s3cret"]);
    crate::e2e_script("http_api.py", &["auth", &server.url, "s3cret"]);
}

#[test]
fn http_api_history_survives_kill_9_and_live_executions_expire() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cordon.db");
    let state = dir.path().join("state.json");
    let state = state.to_str().unwrap();
    let server = Server::serve(&db, &[]);
    crate::e2e_script("http_api.py", &["before_kill", &server.url, state]);
    let killed = server.kill_9();
    // The killed server's Chromium outlives it, until the next server stops it.
    assert!(
        !chromium_of(killed).is_empty(),
        "the first server ran Chromium"
    );
    let server = Server::serve(&db, &[]);
    assert_eq!(
        chromium_of(killed),
        Vec::<u32>::new(),
        "the orphaned Chromium was stopped"
    );
    crate::e2e_script("http_api.py", &["after_restart", &server.url, state]);
    server.terminate_and_check_chromium();
}

#[test]
fn http_api_a_paused_sandbox_survives_kill_9_and_the_next_server_resumes_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cordon.db");
    let state = dir.path().join("state.json");
    let state = state.to_str().unwrap();
    let server = Server::serve(&db, &["--pause-after", "off"]);
    crate::e2e_script("paused_restart.py", &["before_kill", &server.url, state]);
    server.kill_9();
    let paused = files_under(&dir.path().join("objects"));
    assert_eq!(
        paused.len(),
        1,
        "one paused sandbox beside the database: {paused:?}"
    );
    let server = Server::serve(&db, &["--pause-after", "off"]);
    crate::e2e_script("paused_restart.py", &["after_restart", &server.url, state]);
    assert_eq!(
        files_under(&dir.path().join("objects")),
        Vec::<PathBuf>::new(),
        "a resumed sandbox's stored state is deleted"
    );
}

#[test]
fn http_api_on_postgres_keeps_history_across_kill_9_and_a_restart() {
    // The same scenario as on SQLite, with the state in a PostgreSQL database: what ended
    // is read back by the next server, what was live is recovered as `expired`.
    let cluster = crate::postgres_cluster::PgCluster::start();
    let url = cluster.create_database("serve");
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let state = state.to_str().unwrap();
    let trajectories = dir.path().join("trajectories");
    let extra = ["--trajectories", trajectories.to_str().unwrap()];
    let server = Server::serve(Path::new(&url), &extra);
    crate::e2e_script("http_api.py", &["before_kill", &server.url, state]);
    let killed = server.kill_9();
    let server = Server::serve(Path::new(&url), &extra);
    assert_eq!(
        chromium_of(killed),
        Vec::<u32>::new(),
        "the orphaned Chromium was stopped (its pid was kept in the database)"
    );
    crate::e2e_script("http_api.py", &["after_restart", &server.url, state]);
    server.terminate_and_check_chromium();
}

#[test]
fn http_api_computers_click_ask_approve_deny_trajectory_and_delete() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::serve(&dir.path().join("cordon.db"), &[]);
    crate::e2e_script("http_api.py", &["computers", &server.url]);
    // Deleted sessions take their trajectory directories with them.
    let left: Vec<_> = std::fs::read_dir(dir.path().join("trajectories"))
        .unwrap()
        .collect();
    assert_eq!(
        left.len(),
        2,
        "only the trajectories of the session closed once and the idle one are left: {left:?}"
    );
    server.terminate_and_check_chromium();
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// Whether any file under `dir` holds `text`, and each file's and directory's mode is
/// owner-only.
fn scan(dir: &Path, text: &str) -> bool {
    let mut found = false;
    for file in files_under(dir) {
        let bytes = std::fs::read(&file).unwrap();
        found |= bytes.windows(text.len()).any(|w| w == text.as_bytes());
        assert_eq!(mode(&file), 0o600, "{}", file.display());
        assert_eq!(mode(file.parent().unwrap()), 0o700, "{}", file.display());
    }
    found
}

#[test]
fn http_api_password_text_reaches_neither_the_store_nor_the_trajectory() {
    const SECRET: &str = "hunter2-Secret-9931";
    const NAME: &str = "Visible Name 7207";
    let dir = tempfile::tempdir().unwrap();
    // Cordon creates `state/` (0700) for the database and `state/trajectories/`.
    let state = dir.path().join("state");
    let server = Server::serve(&state.join("cordon.db"), &[]);
    crate::e2e_script("http_api.py", &["secrets", &server.url, SECRET, NAME]);
    // While it runs (WAL and shared-memory files present) and after it stopped.
    assert!(!scan(&state, SECRET), "the password is on disk");
    assert!(scan(&state, NAME), "the text field's text is kept");
    server.terminate_and_check_chromium();
    assert!(!scan(&state, SECRET), "the password is on disk");
    assert!(scan(&state, NAME), "the text field's text is kept");
}

#[test]
fn http_api_without_chromium_serves_sandboxes_and_explains_computers() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::serve(
        &dir.path().join("cordon.db"),
        &["--chromium", "/nonexistent/chromium"],
    );
    crate::e2e_script("http_api.py", &["no_browser", &server.url]);
}

#[test]
fn http_api_retention_deletes_ended_histories_and_trajectories() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::serve(&dir.path().join("cordon.db"), &["--retain", "2s"]);
    crate::e2e_script("http_api.py", &["retention", &server.url]);
    let left = std::fs::read_dir(dir.path().join("trajectories"))
        .unwrap()
        .count();
    assert_eq!(left, 1, "only the live session's trajectory is left");
}

#[test]
fn http_api_sandboxes_call_tools_of_a_connected_mcp_server() {
    let dir = tempfile::tempdir().unwrap();
    let connect = format!(
        "calc=python3 {}",
        e2e("mcp_tools_server.py").to_str().unwrap()
    );
    let server = Server::serve(&dir.path().join("cordon.db"), &["--connect", &connect]);
    crate::e2e_script("http_api.py", &["connected", &server.url]);
}

#[test]
fn run_calls_tools_of_a_connected_mcp_server() {
    let connect = format!(
        "calc=python3 {}",
        e2e("mcp_tools_server.py").to_str().unwrap()
    );
    let mut child = Command::new(crate::cordon_bin())
        .args(["run", "--json", "--connect", &connect, "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"(await calc.add(a=1, b=2))['result']")
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let result: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["status"], "completed", "{result}");
    assert_eq!(result["result"], 3, "{result}");
    assert_eq!(result["tool_calls"][0]["name"], "calc.add", "{result}");
}

const MCP_TOOLS: &str = r#"{"tools": [
  {"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
   "handler": {"kind": "static", "result": {"temp_c": 21}}},
  {"name": "transfer", "policy": "ask", "handler": {"kind": "static", "result": {"ok": true}}}
]}"#;

#[test]
fn mcp_stdio_with_the_official_python_sdk() {
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools.json");
    std::fs::write(&tools, MCP_TOOLS).unwrap();
    crate::e2e_script(
        "mcp_client.py",
        &["stdio", crate::cordon_bin(), tools.to_str().unwrap()],
    );
}

#[test]
fn mcp_streamable_http_with_the_official_python_sdk() {
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools.json");
    std::fs::write(&tools, MCP_TOOLS).unwrap();
    let tools = tools.to_str().unwrap();
    // The script serves its page on this port; the operator names its origin (loopback is
    // a private network). CI runs as root: Chromium's sandbox is opted out of explicitly.
    let page_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let page_origin = format!("http://127.0.0.1:{page_port}");
    let server = Server::start(&[
        "mcp",
        "--http",
        "127.0.0.1:0",
        "--tools",
        tools,
        "--allow-origin",
        &page_origin,
        "--no-browser-sandbox",
    ]);
    let url = format!("{}/mcp", server.url);
    crate::e2e_script("mcp_client.py", &["http", &url, &page_port]);
}

// --- network edges: Host/Origin guard, host tools without a token, connected tools' policy

fn edges(server: &Server, scenario: &str, args: &[&str]) {
    let mut all = vec![scenario, server.url.as_str()];
    all.extend_from_slice(args);
    crate::e2e_script("network_edges.py", &all);
}

fn calc_connection() -> String {
    format!(
        "calc=python3 {}",
        e2e("mcp_tools_server.py").to_str().unwrap()
    )
}

#[test]
fn serve_refuses_foreign_hosts_and_origins_on_every_route() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::serve(&dir.path().join("cordon.db"), &[]);
    edges(&server, "guard", &[]);
}

#[test]
fn serve_allow_host_serves_that_name_too() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::serve(
        &dir.path().join("cordon.db"),
        &["--allow-host", "cordon.internal"],
    );
    edges(&server, "allow_host", &["cordon.internal"]);
}

#[test]
fn serve_without_token_refuses_command_and_http_tools() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::serve(&dir.path().join("cordon.db"), &[]);
    edges(&server, "host_tools_refused", &[]);
}

#[test]
fn serve_accepts_command_tools_with_allow_host_tools_or_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::serve(&dir.path().join("a.db"), &["--allow-host-tools"]);
    edges(&server, "host_tools_accepted", &[]);
    drop(server);
    let server = Server::serve(&dir.path().join("b.db"), &["--token", "s3cret"]);
    edges(&server, "host_tools_accepted", &["s3cret"]);
}

#[test]
fn serve_connect_policy_asks_and_declarations_only_tighten_it() {
    let dir = tempfile::tempdir().unwrap();
    let connect = calc_connection();
    let server = Server::serve(
        &dir.path().join("cordon.db"),
        &["--connect", &connect, "--connect-policy", "calc=ask"],
    );
    edges(&server, "connect_policy", &[]);
}

#[test]
fn serve_a_sandbox_alias_of_a_denied_connected_tool_is_denied() {
    let dir = tempfile::tempdir().unwrap();
    let connect = calc_connection();
    let server = Server::serve(
        &dir.path().join("cordon.db"),
        &["--connect", &connect, "--connect-policy", "calc=deny"],
    );
    crate::e2e_script("connect_alias.py", &[&server.url]);
}

#[test]
fn mcp_streamable_http_refuses_foreign_origins_and_hosts() {
    let server = Server::start(&["mcp", "--http", "127.0.0.1:0", "--no-computer"]);
    let url = format!("{}/mcp", server.url);
    crate::e2e_script("network_edges.py", &["mcp_guard", &url]);
}

#[test]
fn run_tools_file_sets_the_policy_of_a_connected_tool() {
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools.json");
    std::fs::write(
        &tools,
        r#"{"tools": [{"name": "calc.add", "policy": "deny",
            "handler": {"kind": "mcp", "server": "calc", "tool": "add"}}]}"#,
    )
    .unwrap();
    let connect = calc_connection();
    let mut child = Command::new(crate::cordon_bin())
        .args(["run", "--json", "--connect", &connect, "--tools"])
        .arg(&tools)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(
            b"import tools\ntry:\n    r = await calc.add(a=1, b=2)\nexcept tools.ToolError as e:\n    r = e.kind\nr",
        )
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let result: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["status"], "completed", "{result}");
    assert_eq!(result["result"], "denied", "{result}");
}

#[test]
fn connect_policy_must_name_a_connection() {
    let output = Command::new(crate::cordon_bin())
        .args(["mcp", "--connect-policy", "calc=ask", "--no-computer"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--connect-policy calc") && stderr.contains("no --connect calc"),
        "{stderr}"
    );
}

#[test]
fn http_api_files_upload_run_download_traversal_and_quotas() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::serve(&dir.path().join("cordon.db"), &[]);
    crate::e2e_script("files.py", &["http", &server.url]);
}

#[test]
fn mcp_execute_code_takes_files_and_returns_what_it_wrote() {
    crate::e2e_script("files.py", &["mcp", crate::cordon_bin()]);
}

// --- bytes a sandbox wrote, served back; server-wide caps on sandboxes and workspace bytes

#[test]
fn http_api_serves_sandbox_written_html_and_svg_as_inert_downloads() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::serve(&dir.path().join("cordon.db"), &[]);
    crate::e2e_script("served_files.py", &["headers", &server.url]);
}

#[test]
fn http_api_sandbox_written_html_and_svg_run_no_script_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::serve(&dir.path().join("cordon.db"), &[]);
    crate::e2e_script("served_files.py", &["chromium", &server.url]);
    server.terminate_and_check_chromium();
}

#[test]
fn http_api_refuses_sandboxes_beyond_max_sandboxes_until_one_goes() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::serve(&dir.path().join("cordon.db"), &["--max-sandboxes", "3"]);
    crate::e2e_script("capacity.py", &["sandboxes", &server.url, "3"]);
}

#[test]
fn http_api_refuses_workspace_quotas_beyond_the_server_total_until_one_goes() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::serve(
        &dir.path().join("cordon.db"),
        &["--max-workspace-bytes-total", "3000000"],
    );
    crate::e2e_script("capacity.py", &["bytes", &server.url, "3000000"]);
}
