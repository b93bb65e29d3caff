//! `cordon run`: one program, streamed output or one JSON result, meaningful exit codes.
//!
//! Guest output is untrusted: written to a terminal, its control characters are shown as
//! escapes ([`crate::terminal::escape_controls`]) so code cannot move the cursor, retitle
//! the window, hide text or write to the clipboard. Pipes and files get the bytes as
//! printed.

mod files;

use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use cordon_core::broker::Approver;
use cordon_core::{Dispatcher, ToolRegistry};
use cordon_protocol::execution::Language;
use cordon_sandbox::ExecutionRequest;

use crate::approvals::for_terminal;
use crate::execution::execute_with_answers;
use crate::flags::LimitArgs;
use crate::setup::{connect_all, load_tools, sandbox};
use crate::terminal::AnswerSource;

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
    pub files: files::FileArgs,
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

/// `cordon run`.
pub async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let language = language_for(args.lang.as_deref(), &args.file)?;
    let code = read_code(&args.file)?;
    let mut registry = load_tools(args.tools.as_deref())?;
    refuse_client_tools(&registry)?;
    for connection in connect_all(&args.connect).await? {
        connection.attach(&mut registry)?;
    }
    let approvals = for_terminal(args.approve.clone(), std::io::stderr().is_terminal());
    let approver: Arc<dyn Approver> = approvals.approver.clone();
    let limits = args.limits.limits();
    let prepared = files::prepare(&args.files, &limits)?;
    let sandbox = sandbox(vec![language], 64).await?;
    let request = ExecutionRequest::new(language, code, Dispatcher::new(Arc::new(registry)))
        .limits(limits)
        .approver(approver)
        .workspace(prepared.workspace.clone());
    let answers = if args.file == "-" {
        AnswerSource::Tty
    } else {
        AnswerSource::Stdin
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
