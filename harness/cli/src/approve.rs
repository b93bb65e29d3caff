//! Approvals for `ask` tools on the command line: ask on the terminal, or approve only the
//! tools named with `--approve`.

use std::collections::HashSet;
use std::io::{BufRead, Write};
use std::sync::Arc;

use cordon_core::broker::{ApprovalRequest, ApproveListed, Approver};
use cordon_protocol::execution::Decision;
use futures::future::BoxFuture;

/// Asks on `/dev/tty` for tools not pre-approved.
#[derive(Debug)]
struct TerminalApprover {
    approved: HashSet<String>,
}

impl Approver for TerminalApprover {
    fn decide<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Decision> {
        Box::pin(async move {
            if self.approved.contains(&request.tool) {
                return Decision::Approve;
            }
            let question = format!(
                "cordon: tool `{}` needs approval ({}).\n  input: {}\nallow? [y/N] ",
                request.tool, request.reason, request.input
            );
            // Reading the terminal blocks; keep it off the runtime's workers.
            tokio::task::spawn_blocking(move || ask(&question))
                .await
                .unwrap_or(Decision::Deny)
        })
    }
}

fn ask(question: &str) -> Decision {
    let Ok(tty) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
    else {
        return Decision::Deny;
    };
    let mut writer = &tty;
    if writer
        .write_all(question.as_bytes())
        .and_then(|()| writer.flush())
        .is_err()
    {
        return Decision::Deny;
    }
    let mut answer = String::new();
    if std::io::BufReader::new(&tty)
        .read_line(&mut answer)
        .is_err()
    {
        return Decision::Deny;
    }
    match answer.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Decision::Approve,
        _ => Decision::Deny,
    }
}

/// The approver for a command-line run.
pub fn for_terminal(approved: Vec<String>, interactive: bool) -> Arc<dyn Approver> {
    if interactive && std::fs::File::open("/dev/tty").is_ok() {
        Arc::new(TerminalApprover {
            approved: approved.into_iter().collect(),
        })
    } else {
        Arc::new(ApproveListed::new(approved))
    }
}
