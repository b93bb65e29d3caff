//! The model gateway across `kill -9` and a restart of `cordon serve` on the same database
//! and objects folder: `tests/e2e/gateway_restart.py` keeps the stand-in model up for the
//! whole scenario and starts, kills and starts again the server, with the official
//! `anthropic` SDK as the client.

fn scenario(name: &str) {
    crate::e2e_script(
        "gateway_restart.py",
        &[name, "--cordon", crate::cordon_bin()],
    );
}

#[test]
fn gateway_an_idle_container_comes_back_after_kill_9_with_its_variables() {
    scenario("container");
}

#[test]
fn gateway_an_approval_decided_after_kill_9_runs_the_call_and_continues_the_turn() {
    scenario("approval");
}

#[test]
fn gateway_a_program_waiting_on_a_client_tool_is_answered_as_interrupted_after_kill_9() {
    scenario("interrupted");
}

#[test]
fn gateway_a_sessions_container_comes_back_after_kill_9_with_its_variables() {
    scenario("session");
}

#[test]
fn gateway_containers_and_approvals_survive_kill_9_on_postgres() {
    // The same scenarios with the records in a PostgreSQL database.
    let cluster = crate::postgres_cluster::PgCluster::start();
    for name in ["container", "approval"] {
        let url = cluster.create_database("gateway_restart");
        crate::e2e_script(
            "gateway_restart.py",
            &[name, "--cordon", crate::cordon_bin(), "--db", &url],
        );
    }
}
