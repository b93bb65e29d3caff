//! The reward of a web episode, read by the harness from the page (never from the policy).

use cordon_computer::Computer;
use cordon_computer::browser::BrowserSession;
use serde_json::Value;

use crate::error::Result;
use crate::task::{Reward, WebTask};

/// Reads the task's reward from the page, and its `done` predicate in the same round trip:
/// `true` is 1, `false` 0, numbers are clamped to 0..=1, anything else (an exception in
/// the predicate) is 0; a `done` that throws is not done.
pub(crate) async fn read_reward(
    computer: &Computer<BrowserSession>,
    web: &WebTask,
) -> Result<(f64, bool)> {
    let done = web
        .done
        .as_ref()
        .map_or_else(|| "false".to_owned(), Reward::expression);
    let expression = format!(
        "(() => {{ let r = 0, d = false; \
         try {{ const v = {}; r = typeof v === 'number' ? v : !!v; }} catch (e) {{}} \
         try {{ d = !!({done}); }} catch (e) {{}} return [r, d]; }})()",
        web.reward.expression()
    );
    let value = computer.backend().eval(expression).await?;
    let reward = match value.get(0) {
        Some(Value::Bool(true)) => 1.0,
        Some(Value::Number(n)) => n.as_f64().unwrap_or(0.0).clamp(0.0, 1.0),
        _ => 0.0,
    };
    Ok((reward, value.get(1) == Some(&Value::Bool(true))))
}
