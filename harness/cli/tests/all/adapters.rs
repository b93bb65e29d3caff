//! The Python adapters (python/cordon-adapters) with the real framework packages from PyPI
//! (pinned in tests/requirements.txt, installed by tests/bootstrap.sh) against a real
//! `cordon serve`: `tests/e2e/adapters.py` starts the server and drives it through the
//! OpenAI Agents SDK's `ComputerTool`, a smolagents `CodeAgent`, and a Gymnasium `Env`.

fn scenario(name: &str) {
    crate::e2e_script("adapters.py", &[name, "--cordon", crate::cordon_bin()]);
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
