//! Everything `cordon` writes to the terminal and reads back from it: guest output with its
//! control characters escaped, the human report of a result, error lines, JSON step lines,
//! and the prompts (approvals of `ask` tools and of computer steps, `user_ask` questions).
//!
//! Guest output is untrusted: written to a terminal, its control characters are shown as
//! escapes ([`escape_controls`]) so code cannot move the cursor, retitle the window, hide
//! text or write to the clipboard. Pipes and files get the bytes as printed. Likewise every
//! part of a prompt that a guest, a connected server or a page chose is escaped.

use std::borrow::Cow;
use std::io::{BufRead, IsTerminal, Write};

use cordon_computer::PendingApproval;
use cordon_core::broker::ApprovalRequest;
use cordon_protocol::execution::{
    ClientToolResult, Decision, ExecutionResult, ExecutionStatus, ResultEncoding,
};
use serde_json::{Value, json};

/// Which of stdout and stderr are terminals, and the text to write to each.
#[derive(Debug, Clone, Copy)]
pub struct Terminals {
    stdout: bool,
    stderr: bool,
}

impl Terminals {
    pub fn detect() -> Self {
        Terminals {
            stdout: std::io::stdout().is_terminal(),
            stderr: std::io::stderr().is_terminal(),
        }
    }

    pub fn stdout<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if self.stdout {
            escape_controls(text)
        } else {
            Cow::Borrowed(text)
        }
    }

    pub fn stderr<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if self.stderr {
            escape_controls(text)
        } else {
            Cow::Borrowed(text)
        }
    }
}

/// Whether a terminal would act on `c` instead of showing it: C0 controls but newline and
/// tab (ESC starts CSI/OSC sequences, CR overwrites a line), DEL, C1 controls (U+009B is a
/// one-character CSI), and the bidirectional overrides that reorder what is shown.
fn is_terminal_control(c: char) -> bool {
    matches!(c, '\0'..='\x08' | '\x0b'..='\x1f' | '\x7f'..='\u{9f}')
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every character a terminal would act on shown as a visible escape: `\x1b`
/// for C0 controls and DEL, `\u{9b}` for C1 and bidirectional controls. Newlines and tabs
/// stay as they are.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_terminal_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !is_terminal_control(c) {
            out.push(c);
        } else if c <= '\x7f' {
            out.push_str(&format!("\\x{:02x}", u32::from(c)));
        } else {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        }
    }
    Cow::Owned(out)
}

/// Prints the result of an execution for a person: its value on stdout, its error, limit
/// or truncation on stderr.
pub fn report_human(result: &ExecutionResult, terminal: Terminals) {
    match result.result_encoding {
        Some(ResultEncoding::Json) => println!("{}", terminal.stdout(&result.result.to_string())),
        Some(ResultEncoding::Repr) => println!(
            "{}",
            terminal.stdout(result.result.as_str().unwrap_or_default())
        ),
        None => {}
    }
    if let Some(error) = &result.error {
        let mut stderr = std::io::stderr();
        match result.status {
            ExecutionStatus::LimitExceeded => {
                let limit = result.limit.map(|l| l.as_str()).unwrap_or("?");
                let _ = writeln!(
                    stderr,
                    "cordon: limit exceeded ({limit}): {}",
                    terminal.stderr(&error.message)
                );
            }
            _ if !error.traceback.is_empty() => {
                let _ = write!(stderr, "{}", terminal.stderr(&error.traceback));
                if !error.traceback.ends_with('\n') {
                    let _ = writeln!(stderr);
                }
            }
            _ => {
                let _ = writeln!(
                    stderr,
                    "{}: {}",
                    terminal.stderr(&error.error_type),
                    terminal.stderr(&error.message)
                );
            }
        }
    }
    if result.truncated {
        let _ = writeln!(
            std::io::stderr(),
            "cordon: output was cut to fit max_output_bytes"
        );
    }
}

/// `error` and its causes joined with `: `, leaving out a cause whose text is already shown:
/// an error that prints its source and also returns it (`cannot read script X: No such
/// file…`) would otherwise say the same thing twice.
pub fn describe(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let cause = cause.to_string();
        if text.contains(&cause) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&cause);
    }
    text
}

/// Prints one JSON value as a line on stdout (`cordon computer` and `cordon replay` steps).
pub fn print_json_line(v: &Value) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{v}")?;
    out.flush()?;
    Ok(())
}

// Approvals of `ask` tools: calls awaited together ask together; the prompts are asked one
// at a time (`crate::approvals`), each naming its call id, so answers cannot be mixed up.

/// The question for one approval request; every part a guest or a server chose is escaped.
pub fn approval_question(request: &ApprovalRequest) -> String {
    format!(
        "cordon: call {} to tool `{}` needs approval ({}).\n  input: {}\nallow {}? [y/N] ",
        escape_controls(&request.call_id),
        escape_controls(&request.tool),
        escape_controls(&request.reason),
        escape_controls(&request.input.to_string()),
        escape_controls(&request.call_id),
    )
}

/// Whether a person can be asked: the caller says the run is interactive (its stderr is a
/// terminal) and there is a controlling terminal to ask on.
pub fn can_ask(interactive: bool) -> bool {
    interactive && std::fs::File::open("/dev/tty").is_ok()
}

/// Asks `question` on `/dev/tty` and reads a y/N answer (blocking); anything but yes, or
/// no terminal, is a refusal.
pub fn ask(question: &str) -> Decision {
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

// Approvals of `cordon computer` steps that the action script does not settle itself:
// asked on the terminal as `cordon run` asks for `ask` tools, and, where nobody can be
// asked, messages that name the ways to settle them. What the page chose to show (element
// names, the action's text) is escaped before it reaches the terminal.

/// How an unattended run can settle an approval; appended to the messages about one.
pub const HOW_TO_SETTLE: &str = "nobody was asked (no terminal): put an {\"approve\": \"*\"} \
     or {\"deny\": \"*\"} line right after the step in the actions file, or pass \
     --approve-all or --deny-asks";

/// The question for a step waiting for approval.
fn step_question(step: u64, pending: &PendingApproval) -> String {
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
pub async fn ask_step(step: u64, pending: &PendingApproval, interactive: bool) -> Option<bool> {
    if !can_ask(interactive) {
        return None;
    }
    let question = step_question(step, pending);
    // Reading the terminal blocks; keep it off the runtime's workers.
    let decision = tokio::task::spawn_blocking(move || ask(&question))
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

// `user_ask` under `cordon run`: the question goes to the terminal (stderr), the answer
// comes from the program's standard input when the program came from a file, else from
// `/dev/tty`.

/// Where answers are read from.
#[derive(Debug, Clone, Copy)]
pub enum AnswerSource {
    /// Standard input (the program was read from a file).
    Stdin,
    /// The controlling terminal (the program was read from standard input).
    Tty,
}

fn read_line(source: AnswerSource) -> std::io::Result<Option<String>> {
    let mut line = String::new();
    let read = match source {
        AnswerSource::Stdin => std::io::stdin().lock().read_line(&mut line)?,
        AnswerSource::Tty => {
            let tty = std::fs::File::open("/dev/tty")?;
            std::io::BufReader::new(tty).read_line(&mut line)?
        }
    };
    Ok((read > 0).then(|| line.trim_end_matches(['\n', '\r']).to_owned()))
}

/// Asks the question of a `user_ask` call and returns the result to submit.
pub fn answer_user_ask(call_id: String, input: &Value, source: AnswerSource) -> ClientToolResult {
    let question = input
        .get("question")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let options: Vec<&str> = input
        .get("options")
        .and_then(Value::as_array)
        .map(|options| options.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    // The question is model-written: shown, never interpreted by the terminal.
    let mut prompt = format!("cordon: the program asks: {}\n", escape_controls(question));
    for (index, option) in options.iter().enumerate() {
        prompt.push_str(&format!("  {}. {}\n", index + 1, escape_controls(option)));
    }
    prompt.push_str(if options.is_empty() {
        "answer> "
    } else {
        "answer (a number or your own words)> "
    });
    let _ = std::io::stderr().write_all(prompt.as_bytes());
    let _ = std::io::stderr().flush();
    match read_line(source) {
        Ok(Some(line)) => {
            let chosen = line
                .trim()
                .parse::<usize>()
                .ok()
                .and_then(|number| number.checked_sub(1))
                .and_then(|index| options.get(index).copied())
                .or_else(|| {
                    options
                        .iter()
                        .copied()
                        .find(|option| *option == line.trim())
                });
            let output = match chosen {
                Some(option) => json!({"answer": option, "is_freeform": false}),
                None => json!({"answer": line, "is_freeform": true}),
            };
            ClientToolResult {
                call_id,
                output,
                is_error: false,
            }
        }
        Ok(None) | Err(_) => ClientToolResult {
            call_id,
            output: json!("nobody could be asked: no answer on the terminal"),
            is_error: true,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_sequences_are_shown_not_run() {
        assert_eq!(escape_controls("plain\ttext\nok"), "plain\ttext\nok");
        assert!(matches!(escape_controls("plain"), Cow::Borrowed(_)));
        // CSI (clear screen), OSC (window title, clipboard), CR, BEL, DEL.
        assert_eq!(escape_controls("\x1b[2J"), "\\x1b[2J");
        assert_eq!(
            escape_controls("\x1b]0;owned\x07\x1b]52;c;aGk=\x1b\\"),
            "\\x1b]0;owned\\x07\\x1b]52;c;aGk=\\x1b\\"
        );
        assert_eq!(escape_controls("ok\rfake"), "ok\\x0dfake");
        assert_eq!(escape_controls("\0\x7f"), "\\x00\\x7f");
        // C1: a one-character CSI; bidirectional override.
        assert_eq!(escape_controls("\u{9b}31m"), "\\u{9b}31m");
        assert_eq!(escape_controls("abc\u{202e}fed"), "abc\\u{202e}fed");
        // Printable non-ASCII stays.
        assert_eq!(escape_controls("héllo €"), "héllo €");
    }

    #[test]
    fn the_question_shows_what_the_page_wrote_escaped() {
        let pending: PendingApproval = serde_json::from_value(serde_json::json!({
            "id": "apr_1", "rule": "destructive-button", "reason": "a delete-like button",
            "element": "button \"Delete\u{1b}[2J\"", "action_index": 0, "action": "left_click",
        }))
        .unwrap();
        let asked = step_question(3, &pending);
        assert!(asked.contains("step 3"), "{asked}");
        assert!(asked.contains("allow apr_1? [y/N]"), "{asked}");
        assert!(!asked.contains('\u{1b}'), "escaped: {asked}");
    }
}
