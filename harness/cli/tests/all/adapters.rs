//! The Python adapters (python/cordon-adapters) with the real framework packages from PyPI
//! (pinned in tests/requirements.txt, installed by tests/bootstrap.sh) against a real
//! `cordon serve`: `tests/e2e/adapters.py` starts the server and drives it through the
//! OpenAI Agents SDK's `ComputerTool`, a smolagents `CodeAgent`, and a Gymnasium `Env`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SCRIPT_TIMEOUT: Duration = Duration::from_secs(300);

fn scenario(name: &str) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/e2e/adapters.py");
    let mut child = Command::new("python3")
        .arg(&script)
        .args([name, "--cordon", crate::cordon_bin()])
        .stdin(Stdio::null())
        .spawn()
        .expect("python3 runs (tests/bootstrap.sh installs the frameworks)");
    let deadline = Instant::now() + SCRIPT_TIMEOUT;
    loop {
        if let Some(status) = child.try_wait().expect("wait for the script") {
            assert!(status.success(), "adapters.py {name} failed: {status}");
            return;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("adapters.py {name} did not finish within {SCRIPT_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn openai_agents_computer_tool_drives_a_cordon_computer() {
    scenario("openai_agents");
}

#[test]
fn smolagents_code_agent_runs_its_code_in_a_cordon_sandbox_with_client_tools() {
    scenario("smolagents");
}

#[test]
fn gymnasium_env_over_the_bench_environments() {
    scenario("gym");
}
