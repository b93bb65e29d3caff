//! Approvals of `cordon computer` steps that the action script does not settle itself:
//! asked on the terminal as `cordon run` asks for `ask` tools ([`crate::approve`]), and,
//! where nobody can be asked, messages that name the ways to settle them.
//!
//! What the page chose to show (element names, the action's text) is escaped before it
//! reaches the terminal.

use cordon_computer::PendingApproval;
use cordon_protocol::execution::Decision;

use crate::run::escape_controls;

/// How an unattended run can settle an approval; appended to the messages about one.
pub const HOW_TO_SETTLE: &str = "nobody was asked (no terminal): put an {\"approve\": \"*\"} \
     or {\"deny\": \"*\"} line right after the step in the actions file, or pass \
     --approve-all or --deny-asks";

/// The question for a step waiting for approval.
fn question(step: u64, pending: &PendingApproval) -> String {
    format!(
        "cordon: step {step} needs approval: {} ({}{}).\n  action: {}\nallow {}? [y/N] ",
        escape_controls(&pending.reason),
        escape_controls(&pending.rule),
        pending
            .element
            .as_deref()
            .map(|element| format!(", {}", escape_controls(element)))
            .unwrap_or_default(),
        escape_controls(&pending.action),
        escape_controls(&pending.id),
    )
}

/// Asks on the terminal whether the waiting step may run: `Some(true)` to approve it,
/// `Some(false)` to deny it, `None` when nobody can be asked (`interactive` is false or
/// there is no controlling terminal).
pub async fn ask(step: u64, pending: &PendingApproval, interactive: bool) -> Option<bool> {
    if !crate::approve::can_ask(interactive) {
        return None;
    }
    let question = question(step, pending);
    // Reading the terminal blocks; keep it off the runtime's workers.
    let decision = tokio::task::spawn_blocking(move || crate::approve::ask(&question))
        .await
        .unwrap_or(Decision::Deny);
    Some(decision == Decision::Approve)
}

/// The line for the operator when the script ended with a step still waiting.
pub fn left_waiting(step: u64, pending: &PendingApproval) -> String {
    format!(
        "cordon: step {step} still waits for approval `{}` ({}): its action did not run; {}",
        escape_controls(&pending.id),
        escape_controls(&pending.reason),
        HOW_TO_SETTLE
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_question_shows_what_the_page_wrote_escaped() {
        let pending: PendingApproval = serde_json::from_value(serde_json::json!({
            "id": "apr_1", "rule": "destructive-button", "reason": "a delete-like button",
            "element": "button \"Delete\u{1b}[2J\"", "action_index": 0, "action": "left_click",
        }))
        .unwrap();
        let asked = question(3, &pending);
        assert!(asked.contains("step 3"), "{asked}");
        assert!(asked.contains("allow apr_1? [y/N]"), "{asked}");
        assert!(!asked.contains('\u{1b}'), "escaped: {asked}");
    }
}
