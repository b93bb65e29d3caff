//! `cordon`: the command-line face of Cordon.

mod approvals;
mod cmd;
mod computer_session;
mod execution;
mod exit;
mod flags;
mod setup;
mod terminal;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use cmd::{bench, computer, demo, mcp, prepare, replay, run, serve, tools};

/// Cordon runs model-written code in a WebAssembly sandbox with fixed limits, where the
/// only way out is a bridge to the tools you declare.
#[derive(Debug, Parser)]
#[command(name = "cordon", version, about, long_about = None, arg_required_else_help = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a Python (CPython, or RustPython as python-lite) or JavaScript program in the sandbox.
    Run(run::RunArgs),
    /// Run a built-in program that calls tools, batches calls and hits a limit.
    Demo(demo::DemoArgs),
    /// Drive an isolated browser, or an X display (--desktop), with a scripted file of model
    /// actions (computer use).
    Computer(computer::ComputerArgs),
    /// Re-execute a recorded computer-use trajectory and report where it diverges.
    Replay(replay::ReplayArgs),
    /// Serve the HTTP + SSE API (sandboxes, executions, tool results, approvals, computers)
    /// and, with --upstream, the model gateway (Anthropic Messages, OpenAI Chat Completions
    /// and Responses in front of any model).
    Serve(serve::ServeArgs),
    /// Serve MCP (`execute_code` and the computer tools) on stdio, or Streamable HTTP with --http.
    Mcp(mcp::McpArgs),
    /// Run a task suite (web and code tasks) with a policy; write results.json and report.html.
    Bench(bench::BenchArgs),
    /// Fetch and build guest images now (the CPython image takes minutes the first time),
    /// instead of on their first use.
    Prepare(prepare::PrepareArgs),
    /// Work with a tools file: `cordon tools export FILE --format
    /// anthropic|openai|openai-responses|mcp`.
    Tools(tools::ToolsArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("cordon: could not start the async runtime: {error}");
            return ExitCode::from(1);
        }
    };
    let outcome = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => run::run(args).await,
            Command::Demo(args) => demo::run(args).await,
            Command::Computer(args) => computer::run(args).await,
            Command::Replay(args) => replay::run(args).await,
            Command::Serve(args) => serve::run(args).await,
            Command::Mcp(args) => mcp::run(args).await,
            Command::Tools(args) => tools::run(args),
            Command::Prepare(args) => prepare::run(args).await,
            Command::Bench(args) => bench::run(args).await,
        }
    });
    match outcome {
        Ok(code) => code,
        Err(error) => {
            eprintln!("cordon: {}", terminal::describe(&error));
            ExitCode::from(exit::EXIT_BAD_INPUT)
        }
    }
}
