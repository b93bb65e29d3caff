//! The loop every dialect shares: ask the model, run each computer call it made in the
//! environment (the vendor's own action shape: the environment scales its coordinates),
//! answer with the results, until the model stops calling the computer, the episode is
//! over (solved, or a cap), or a vendor safety check is denied.

use cordon_agent_bench::BenchError;
use cordon_agent_bench::policy_env::PolicyEnv;
use cordon_agent_bench::task::Approvals;
use cordon_gateway::upstream::{HttpUpstream, Upstream as _};

use super::dialect::{CallOutcome, Dialect, safety_answer};

/// Plays one episode of `env` with the model behind `upstream`. Model turns are capped at
/// `max_turns` (a model that only makes calls refused before they run would never reach
/// the episode's own step cap).
pub(super) async fn play<E: PolicyEnv, D: Dialect>(
    upstream: &HttpUpstream,
    mut dialect: D,
    env: &mut E,
    instruction: &str,
    safety_checks: Approvals,
    max_turns: u32,
) -> Result<(), BenchError> {
    let policy = |e: String| BenchError::Policy(e);
    env.answer_safety_checks(Some(safety_checks));
    let view = env.view()?;
    let mut body = dialect.first_request(instruction, &view);
    for _ in 0..max_turns {
        let request = dialect.decode(&body).map_err(|e| policy(e.to_string()))?;
        let turn = upstream
            .call(&request, None)
            .await
            .map_err(|e| policy(e.to_string()))?;
        let calls = dialect.take_turn(&turn).map_err(policy)?;
        if calls.is_empty() {
            return Ok(());
        }
        let mut answers = Vec::with_capacity(calls.len());
        let mut over = false;
        for call in calls {
            let outcome = match &call.action {
                Err(refusal) => CallOutcome::Refused(refusal.clone()),
                Ok(action) => {
                    let transition = env.act(action.clone()).await?;
                    let answer = safety_answer(&transition.info);
                    // A denied check ends the episode: the vendor's API goes on only once
                    // the check is acknowledged.
                    over = transition.done || answer == Some(false);
                    CallOutcome::Stepped {
                        transition: Box::new(transition),
                        acknowledged: answer == Some(true),
                    }
                }
            };
            answers.push((call, outcome));
            if over {
                return Ok(());
            }
        }
        body = dialect.next_request(&answers);
    }
    Ok(())
}
