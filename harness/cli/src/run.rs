//! `cordon run`: one program, streamed output or one JSON result, meaningful exit codes.
//!
//! Guest output is untrusted: written to a terminal, its control characters are shown as
//! escapes ([`escape_controls`]) so code cannot move the cursor, retitle the window, hide
//! text or write to the clipboard. Pipes and files get the bytes as printed.

use std::borrow::Cow;
use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use cordon_core::broker::Approver;
use cordon_core::{Dispatcher, ToolRegistry};
use cordon_protocol::execution::{
    ExecutionEvent, ExecutionResult, ExecutionStatus, Language, Limits, ResultEncoding, Stream,
};
use cordon_protocol::tool::Locus;
use cordon_sandbox::{ExecutionRequest, Sandbox, SandboxConfig};

use crate::approve;

/// Exit code: the program completed.
pub const EXIT_COMPLETED: u8 = 0;
/// Exit code: the program raised, or the guest faulted.
pub const EXIT_ERROR: u8 = 1;
/// Exit code: bad usage or bad input files.
pub const EXIT_BAD_INPUT: u8 = 2;
/// Exit code: a limit stopped the program.
pub const EXIT_LIMIT: u8 = 3;
/// Exit code: cancelled (Ctrl-C).
pub const EXIT_CANCELLED: u8 = 130;

/// Options of `cordon run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Program to run, or `-` for standard input.
    #[arg(value_name = "FILE | -")]
    pub file: String,
    /// Guest language; by default taken from the file extension (.py, .js, .mjs), else python.
    /// `python` is CPython 3.15 with numpy, pandas and matplotlib (fetched and built on
    /// first use, with progress lines; `cordon prepare` does it ahead); `python-lite` is
    /// RustPython (starts faster, idles smaller, no C extensions).
    #[arg(long, value_name = "python|python-lite|javascript")]
    pub lang: Option<String>,
    /// Tools file: {"tools": [{"name", "description", "input_schema", "policy", "handler"}]}.
    #[arg(long, value_name = "FILE")]
    pub tools: Option<PathBuf>,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub files: crate::files::FileArgs,
    /// Approve calls to this `ask` tool without asking (repeatable). Without a terminal,
    /// `ask` calls to other tools are refused.
    #[arg(long = "approve", value_name = "NAME")]
    pub approve: Vec<String>,
    /// Connect to an MCP server (stdio) and make its tools callable from the code as
    /// `await NAME.tool(...)`; COMMAND runs with `sh -c` (repeatable).
    #[arg(long = "connect", value_name = "NAME=COMMAND")]
    pub connect: Vec<String>,
    /// Print one JSON object (status, limit, stdout, stderr, result, error, tool_calls, usage).
    #[arg(long)]
    pub json: bool,
}

/// Limit options shared by the commands that run code.
#[derive(Debug, Clone, clap::Args)]
pub struct LimitArgs {
    /// Guest memory limit, MiB [default: 256].
    #[arg(long, value_name = "N")]
    pub memory_mb: Option<u64>,
    /// CPU time limit, ms [default: 10000].
    #[arg(long, value_name = "N")]
    pub cpu_ms: Option<u64>,
    /// Wall time limit, ms, not counting waits for client tools [default: 30000].
    #[arg(long, value_name = "N")]
    pub timeout_ms: Option<u64>,
    /// stdout + stderr + result size limit, bytes [default: 1048576].
    #[arg(long, value_name = "N")]
    pub max_output_bytes: Option<u64>,
    /// Tool calls per execution [default: 1000].
    #[arg(long, value_name = "N")]
    pub max_tool_calls: Option<u64>,
    /// Size of one tool input or result, bytes [default: 1048576].
    #[arg(long, value_name = "N")]
    pub max_payload_bytes: Option<u64>,
    /// Bytes the workspace (`/workspace`) may hold [default: 67108864].
    #[arg(long, value_name = "N")]
    pub workspace_bytes: Option<u64>,
    /// Files and directories the workspace may hold [default: 1000].
    #[arg(long, value_name = "N")]
    pub workspace_files: Option<u64>,
}

impl LimitArgs {
    /// The limits, defaults filled in.
    pub fn limits(&self) -> Limits {
        let mut limits = Limits::default();
        if let Some(mb) = self.memory_mb {
            limits.memory_bytes = mb.saturating_mul(1 << 20);
        }
        if let Some(ms) = self.cpu_ms {
            limits.cpu_ms = ms;
        }
        if let Some(ms) = self.timeout_ms {
            limits.wall_ms = ms;
        }
        if let Some(bytes) = self.max_output_bytes {
            limits.max_output_bytes = bytes;
        }
        if let Some(count) = self.max_tool_calls {
            limits.max_tool_calls = count;
        }
        if let Some(bytes) = self.max_payload_bytes {
            limits.max_payload_bytes = bytes;
        }
        if let Some(bytes) = self.workspace_bytes {
            limits.workspace_bytes = bytes;
        }
        if let Some(count) = self.workspace_files {
            limits.workspace_files = count;
        }
        limits
    }
}

fn language_for(lang: Option<&str>, file: &str) -> anyhow::Result<Language> {
    if let Some(name) = lang {
        return Language::parse(name).with_context(|| {
            format!("unknown language `{name}` (use python, python-lite or javascript)")
        });
    }
    let extension = Path::new(file)
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("");
    Ok(match extension {
        "js" | "mjs" | "cjs" => Language::Javascript,
        _ => Language::Python,
    })
}

fn read_code(file: &str) -> anyhow::Result<String> {
    let bytes = if file == "-" {
        let mut bytes = Vec::new();
        std::io::stdin()
            .read_to_end(&mut bytes)
            .context("reading the program from stdin")?;
        bytes
    } else {
        std::fs::read(file).with_context(|| format!("reading {file}"))?
    };
    match String::from_utf8(bytes) {
        Ok(code) => Ok(code),
        Err(error) => bail!(
            "{}: not UTF-8 (invalid byte at offset {})",
            if file == "-" { "stdin" } else { file },
            error.utf8_error().valid_up_to()
        ),
    }
}

/// Loads a tools file, or no tools.
pub fn load_tools(path: Option<&Path>) -> anyhow::Result<ToolRegistry> {
    match path {
        Some(path) => Ok(ToolRegistry::from_file(path)?),
        None => Ok(ToolRegistry::empty()),
    }
}

/// The sandbox with `languages` loaded and a pool of `max_instances`, reporting one-time
/// image preparation on stderr (stdout may be a protocol channel).
pub async fn sandbox(languages: Vec<Language>, max_instances: u32) -> anyhow::Result<Sandbox> {
    let config = SandboxConfig::default()
        .preload(languages)
        .max_instances(max_instances)
        .progress(|line| eprintln!("cordon: {line}"));
    Ok(Sandbox::new(config).await?)
}

/// Runs `code` and prints its output (streamed) or its JSON result; returns the exit code.
pub async fn execute_and_report(
    sandbox: &Sandbox,
    request: ExecutionRequest,
    json: bool,
) -> anyhow::Result<ExitCode> {
    execute_with_answers(sandbox, request, json, crate::ask::AnswerSource::Tty).await
}

/// [`execute_and_report`], answering `user_ask` calls from `answers`.
pub async fn execute_with_answers(
    sandbox: &Sandbox,
    request: ExecutionRequest,
    json: bool,
    answers: crate::ask::AnswerSource,
) -> anyhow::Result<ExitCode> {
    let mut execution = sandbox.execute(request);
    let control = execution.control();
    let terminal = Terminals::detect();
    let mut result = None;
    loop {
        tokio::select! {
            event = execution.next_event() => match event {
                Some(ExecutionEvent::OutputDelta { stream, text }) if !json => {
                    // Best effort: a closed pipe must not stop the program.
                    let _ = match stream {
                        Stream::Stdout => {
                            let text = terminal.stdout(&text);
                            std::io::stdout().write_all(text.as_bytes()).and_then(|()| std::io::stdout().flush())
                        }
                        Stream::Stderr => std::io::stderr().write_all(terminal.stderr(&text).as_bytes()),
                    };
                }
                Some(ExecutionEvent::Completed(done)) => {
                    result = Some(done);
                    break;
                }
                Some(ExecutionEvent::ToolCall { id, name, input, locus: Locus::Client, .. }) if name == "user_ask" => {
                    let control = control.clone();
                    // Reading the terminal blocks; the execution waits for the answer anyway.
                    tokio::task::spawn_blocking(move || {
                        let answer = crate::ask::answer(id, &input, answers);
                        // Refused only when the call stopped waiting (timeout, cancel).
                        let _ = control.submit_tool_results(vec![answer]);
                    });
                }
                Some(_) => {}
                None => break,
            },
            _ = tokio::signal::ctrl_c() => control.cancel(),
        }
    }
    let result = match result {
        Some(result) => result,
        None => execution.wait().await,
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else {
        report_human(&result, terminal);
    }
    Ok(ExitCode::from(exit_code(&result)))
}

fn exit_code(result: &ExecutionResult) -> u8 {
    match result.status {
        ExecutionStatus::Completed => EXIT_COMPLETED,
        ExecutionStatus::LimitExceeded => EXIT_LIMIT,
        ExecutionStatus::Cancelled => EXIT_CANCELLED,
        _ => EXIT_ERROR,
    }
}

/// Which of stdout and stderr are terminals, and the text to write to each.
#[derive(Debug, Clone, Copy)]
struct Terminals {
    stdout: bool,
    stderr: bool,
}

impl Terminals {
    fn detect() -> Self {
        Terminals {
            stdout: std::io::stdout().is_terminal(),
            stderr: std::io::stderr().is_terminal(),
        }
    }

    fn stdout<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if self.stdout {
            escape_controls(text)
        } else {
            Cow::Borrowed(text)
        }
    }

    fn stderr<'a>(&self, text: &'a str) -> Cow<'a, str> {
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

fn report_human(result: &ExecutionResult, terminal: Terminals) {
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

/// `cordon run`.
pub async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let language = language_for(args.lang.as_deref(), &args.file)?;
    let code = read_code(&args.file)?;
    let mut registry = load_tools(args.tools.as_deref())?;
    refuse_client_tools(&registry)?;
    for connection in crate::serve::connect_all(&args.connect).await? {
        connection.attach(&mut registry)?;
    }
    let approvals = approve::for_terminal(args.approve.clone(), std::io::stderr().is_terminal());
    let approver: Arc<dyn Approver> = approvals.approver.clone();
    let limits = args.limits.limits();
    let prepared = crate::files::prepare(&args.files, &limits)?;
    let sandbox = sandbox(vec![language], 64).await?;
    let request = ExecutionRequest::new(language, code, Dispatcher::new(Arc::new(registry)))
        .limits(limits)
        .approver(approver)
        .workspace(prepared.workspace.clone());
    let answers = if args.file == "-" {
        crate::ask::AnswerSource::Tty
    } else {
        crate::ask::AnswerSource::Stdin
    };
    let exit = execute_with_answers(&sandbox, request, args.json, answers).await?;
    if let Some(note) = approvals.refusal_note() {
        eprintln!("{note}");
    }
    prepared.finish(&args.files)?;
    Ok(exit)
}

/// Refuses a tools file with a `client` tool other than `user_ask` (which the terminal
/// answers): nobody under `cordon run` posts client results, so its calls would wait,
/// silently, until the client-tool timeout. `cordon mcp` refuses the same tools.
fn refuse_client_tools(registry: &ToolRegistry) -> anyhow::Result<()> {
    if let Some(tool) = cordon_server::mcp::unanswerable_client_tool(registry) {
        bail!(
            "tool `{tool}` has a `client` handler, which `cordon run` cannot answer (nobody \
             posts its result, so the program would wait until the client-tool timeout); \
             client tools need a caller that answers them: `cordon serve` (the HTTP API, or \
             the model gateway, whose client gets them as tool calls) or the library \
             (`Execution::submit_tool_results`). Here, use a `static`, `command` or `http` \
             handler"
        );
    }
    Ok(())
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
}
