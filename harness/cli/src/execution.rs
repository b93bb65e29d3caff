//! One execution on the command line (`cordon run`, `cordon demo`): its output streamed to
//! the terminal, its `user_ask` calls answered, its result reported, its exit code returned.

use std::io::Write;
use std::process::ExitCode;

use cordon_protocol::execution::{ExecutionEvent, Stream};
use cordon_protocol::tool::Locus;
use cordon_sandbox::{ExecutionRequest, Sandbox};

use crate::exit::exit_code;
use crate::terminal::{AnswerSource, Terminals, answer_user_ask, report_human};

/// Runs `code` and prints its output (streamed) or its JSON result; returns the exit code.
pub async fn execute_and_report(
    sandbox: &Sandbox,
    request: ExecutionRequest,
    json: bool,
) -> anyhow::Result<ExitCode> {
    execute_with_answers(sandbox, request, json, AnswerSource::Tty).await
}

/// [`execute_and_report`], answering `user_ask` calls from `answers`.
pub async fn execute_with_answers(
    sandbox: &Sandbox,
    request: ExecutionRequest,
    json: bool,
    answers: AnswerSource,
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
                        let answer = answer_user_ask(id, &input, answers);
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
