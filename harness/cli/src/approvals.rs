//! Approvals for `ask` tools on the command line: ask on the terminal, or approve only the
//! tools named with `--approve`.
//!
//! Calls awaited together (`asyncio.gather`, `Promise.all`) ask together; the prompts are
//! asked one at a time, each naming its call id, so answers cannot be mixed up, and what
//! the guest or a connected server chose to write is shown with its control characters
//! escaped (the prompts themselves are in [`crate::terminal`]).

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use cordon_core::broker::{ApprovalRequest, ApproveListed, Approver};
use cordon_protocol::execution::Decision;
use futures::future::BoxFuture;

use crate::terminal::{approval_question, ask, can_ask, escape_controls};

/// Asks one question and reads the answer (blocking).
type Prompt = Arc<dyn Fn(&str) -> Decision + Send + Sync>;

/// Asks on `/dev/tty` for tools not pre-approved, one question at a time.
struct TerminalApprover {
    approved: HashSet<String>,
    prompt: Prompt,
    /// Held while a question is on the terminal.
    asking: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for TerminalApprover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TerminalApprover")
            .field("approved", &self.approved)
            .finish_non_exhaustive()
    }
}

impl TerminalApprover {
    fn new(approved: Vec<String>, prompt: Prompt) -> Self {
        TerminalApprover {
            approved: approved.into_iter().collect(),
            prompt,
            asking: tokio::sync::Mutex::new(()),
        }
    }
}

impl Approver for TerminalApprover {
    fn decide<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Decision> {
        Box::pin(async move {
            if self.approved.contains(&request.tool) {
                return Decision::Approve;
            }
            let question = approval_question(request);
            let _turn = self.asking.lock().await;
            let prompt = self.prompt.clone();
            // Reading the terminal blocks; keep it off the runtime's workers.
            tokio::task::spawn_blocking(move || prompt(&question))
                .await
                .unwrap_or(Decision::Deny)
        })
    }
}

/// Approves the tools named with `--approve` and refuses the rest without asking anyone,
/// remembering which it refused so the run can say how to let them through (as `cordon
/// mcp` notes calls refused because its client cannot ask).
#[derive(Debug)]
struct Unattended {
    listed: ApproveListed,
    refused: Arc<Mutex<BTreeSet<String>>>,
}

impl Approver for Unattended {
    fn decide<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Decision> {
        let decision = if self.listed.approves(&request.tool) {
            Decision::Approve
        } else {
            self.refused
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(request.tool.clone());
            Decision::Deny
        };
        Box::pin(std::future::ready(decision))
    }
}

/// The approver of a command-line run, and what it refused because nobody could be asked.
#[derive(Debug, Clone)]
pub struct CommandLineApprovals {
    /// Decides the run's `ask` calls.
    pub approver: Arc<dyn Approver>,
    refused_unasked: Arc<Mutex<BTreeSet<String>>>,
}

impl CommandLineApprovals {
    /// What to tell the operator when `ask` calls were refused for want of a terminal: the
    /// guest only sees `approval refused`, which does not say that `--approve NAME` exists.
    pub fn refusal_note(&self) -> Option<String> {
        let refused = self
            .refused_unasked
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if refused.is_empty() {
            return None;
        }
        let names: Vec<String> = refused
            .iter()
            .map(|tool| format!("`{}`", escape_controls(tool)))
            .collect();
        let flags: Vec<String> = refused
            .iter()
            .map(|tool| format!("--approve {}", escape_controls(tool)))
            .collect();
        Some(format!(
            "cordon: calls to {} were refused: the tool needs approval and there is no \
             terminal to ask on; pass {} to allow them",
            names.join(", "),
            flags.join(" ")
        ))
    }
}

/// The approver for a command-line run.
pub fn for_terminal(approved: Vec<String>, interactive: bool) -> CommandLineApprovals {
    let refused_unasked = Arc::new(Mutex::new(BTreeSet::new()));
    let approver: Arc<dyn Approver> = if can_ask(interactive) {
        Arc::new(TerminalApprover::new(approved, Arc::new(ask)))
    } else {
        Arc::new(Unattended {
            listed: ApproveListed::new(approved),
            refused: refused_unasked.clone(),
        })
    };
    CommandLineApprovals {
        approver,
        refused_unasked,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;
    use serde_json::json;

    fn request(n: usize) -> ApprovalRequest {
        ApprovalRequest {
            approval_id: format!("approval_{n}"),
            call_id: format!("call_{n}"),
            tool: "email".into(),
            input: json!({"to": "\u{1b}]0;title\u{7}"}),
            reason: "tool `email` has policy `ask`".into(),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_batch_of_asks_is_prompted_one_at_a_time_with_call_ids() {
        let on_screen = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let asked = Arc::new(Mutex::new(Vec::new()));
        let prompt: Prompt = {
            let (on_screen, most, asked) = (on_screen.clone(), most.clone(), asked.clone());
            Arc::new(move |question: &str| {
                let now = on_screen.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                asked.lock().unwrap().push(question.to_owned());
                // A person reading the question: long enough for others to overlap.
                std::thread::sleep(Duration::from_millis(20));
                on_screen.fetch_sub(1, Ordering::SeqCst);
                Decision::Approve
            })
        };
        let approver = TerminalApprover::new(vec![], prompt);
        let requests: Vec<ApprovalRequest> = (0..6).map(request).collect();
        let decisions =
            futures::future::join_all(requests.iter().map(|r| approver.decide(r))).await;
        assert!(decisions.iter().all(|d| *d == Decision::Approve));
        assert_eq!(most.load(Ordering::SeqCst), 1, "prompts overlapped");
        let asked = asked.lock().unwrap();
        assert_eq!(asked.len(), 6);
        for n in 0..6 {
            let id = format!("call_{n}");
            let question = asked.iter().find(|q| q.contains(&id)).expect("asked");
            assert!(question.contains(&format!("allow {id}?")), "{question}");
            assert!(!question.contains('\u{1b}'), "escaped: {question}");
        }
    }
}
