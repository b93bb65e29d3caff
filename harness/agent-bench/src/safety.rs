//! Who answers a vendor's own safety check in a benchmark. The computer engine asks about
//! an OpenAI `pending_safety_checks` entry or a Gemini `require_confirmation` like an `ask`
//! rule (the rule named [`VENDOR_SAFETY_RULE`]); a policy that drives the episode may say
//! how those are answered (`cordon bench --safety-checks`), every other ask is answered as
//! the task's `approvals` say.

use cordon_computer::PendingApproval;

use crate::task::Approvals;

/// The rule name the engine gives a vendor safety check that waits for an answer.
pub const VENDOR_SAFETY_RULE: &str = "vendor-safety-check";

/// Whether the step waiting on `pending` is approved: a vendor safety check by
/// `safety_checks` when the policy set it, anything else by the task's `approvals`.
pub(crate) fn approves(
    pending: &PendingApproval,
    approvals: Approvals,
    safety_checks: Option<Approvals>,
) -> bool {
    let answer = match safety_checks {
        Some(answer) if pending.rule == VENDOR_SAFETY_RULE => answer,
        _ => approvals,
    };
    answer == Approvals::Approve
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(rule: &str) -> PendingApproval {
        PendingApproval {
            id: "apr_1".into(),
            rule: rule.into(),
            reason: "r".into(),
            element: None,
            action_index: 0,
            action: "click".into(),
        }
    }

    #[test]
    fn only_vendor_checks_follow_the_policys_answer() {
        let check = pending(VENDOR_SAFETY_RULE);
        let submit = pending("submit-button");
        assert!(!approves(&check, Approvals::Approve, Some(Approvals::Deny)));
        assert!(approves(&submit, Approvals::Approve, Some(Approvals::Deny)));
        assert!(approves(&check, Approvals::Deny, Some(Approvals::Approve)));
        assert!(approves(&check, Approvals::Approve, None));
    }
}
