//! `cordon`: the command-line face of Cordon.

mod approve;
mod demo;
mod run;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
    /// Run a Python or JavaScript program in the sandbox.
    Run(run::RunArgs),
    /// Run a built-in program that calls tools, batches calls and hits a limit.
    Demo(demo::DemoArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
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
        }
    });
    match outcome {
        Ok(code) => code,
        Err(error) => {
            eprintln!("cordon: {error:#}");
            ExitCode::from(run::EXIT_BAD_INPUT)
        }
    }
}
