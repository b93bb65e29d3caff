//! Host handlers: what runs a `static`, `command` or `http` tool call inside Cordon's
//! process (outside the sandbox). `client` calls never reach this module; the dispatcher
//! hands them to the caller.
//!
//! Every failure becomes a [`ToolFailure`] the guest (and the model) can read: handler
//! problems are tool results, never host errors.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use cordon_guest::abi::{ToolErrorKind, ToolFailure};
use cordon_protocol::tool::HandlerSpec;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use crate::registry::{RegisteredTool, truncate_chars};

/// Most bytes read from a handler's stdout or response body. The sandbox's payload limit
/// is usually far lower; this only stops a runaway handler from exhausting host memory.
pub(crate) const MAX_HANDLER_OUTPUT: usize = 64 * 1024 * 1024;
/// Bytes of stderr (or an error body) quoted in a failure message.
const ERROR_TAIL_BYTES: usize = 2048;
/// Characters of non-JSON output quoted in a failure message.
const NON_JSON_PREVIEW_CHARS: usize = 200;

/// The HTTP client shared by every `http` call of a dispatcher. Building it can fail (TLS
/// set-up); that becomes a per-call failure instead of a panic at start-up.
#[derive(Debug, Clone)]
pub(crate) struct HttpClient(Result<reqwest::Client, Arc<str>>);

impl HttpClient {
    pub(crate) fn new() -> Self {
        HttpClient(
            reqwest::Client::builder()
                .build()
                .map_err(|error| Arc::from(error_chain(&error))),
        )
    }
}

/// A successful handler result: the value (for events) and its JSON text (for the guest).
pub(crate) type HostOutput = (Value, String);

fn failed(message: String) -> ToolFailure {
    ToolFailure {
        kind: ToolErrorKind::Failed,
        message,
    }
}

fn timed_out(message: String) -> ToolFailure {
    ToolFailure {
        kind: ToolErrorKind::Timeout,
        message,
    }
}

/// Runs one host call. `input` has passed schema and policy checks.
pub(crate) async fn run_host(
    tool: &RegisteredTool,
    input: &Value,
    http: &HttpClient,
) -> Result<HostOutput, ToolFailure> {
    match &tool.declaration.handler {
        HandlerSpec::Static { result } => {
            let text = match tool.static_text() {
                Some(text) => text.to_string(),
                None => result.to_string(),
            };
            Ok((result.clone(), text))
        }
        HandlerSpec::Command { argv, timeout_ms } => run_command(argv, *timeout_ms, input).await,
        HandlerSpec::Http { url, timeout_ms } => run_http(http, url, *timeout_ms, input).await,
        HandlerSpec::Client {} => Err(failed(format!(
            "`{}` is a client tool and cannot run on the host",
            tool.name()
        ))),
        HandlerSpec::Mcp {
            server,
            tool: remote,
        } => match tool.provider() {
            Some(provider) => provider
                .call(remote, input)
                .await
                .map(|value| {
                    let text = value.to_string();
                    (value, text)
                })
                .map_err(failed),
            None => Err(failed(format!(
                "`{}` needs the MCP server `{server}`, which is not connected \
                 (start Cordon with --connect {server}=COMMAND)",
                tool.name()
            ))),
        },
        _ => Err(failed(format!(
            "`{}` has a handler kind this host does not support",
            tool.name()
        ))),
    }
}

/// The program's file name: enough to recognize it, without showing host paths to guests.
fn program_name(program: &str) -> String {
    Path::new(program)
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| program.to_owned())
}

async fn run_command(
    argv: &[String],
    timeout_ms: u64,
    input: &Value,
) -> Result<HostOutput, ToolFailure> {
    let Some((program, args)) = argv.split_first() else {
        return Err(failed("command handler has an empty argv".into()));
    };
    let shown = program_name(program);
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Dropping the child (timeout, or the execution being cancelled) kills it.
        .kill_on_drop(true)
        .spawn()
        .map_err(|error| failed(format!("cannot start `{shown}`: {error}")))?;
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let input_text = input.to_string();

    let work = async {
        // Write stdin while reading stdout and stderr: a program that prints before it has
        // read all its input would otherwise deadlock against a full pipe.
        let write = async {
            if let Some(mut stdin) = stdin {
                // A program that exits without reading its input is not an error here;
                // its exit status and output decide the result.
                let _ = stdin.write_all(input_text.as_bytes()).await;
            }
            Ok::<(), ToolFailure>(())
        };
        let read_out = async {
            match stdout {
                Some(stdout) => read_capped(stdout, MAX_HANDLER_OUTPUT)
                    .await
                    .map_err(|too_big| {
                        failed(format!(
                            "`{shown}` printed more than {too_big} bytes on stdout"
                        ))
                    }),
                None => Ok(Vec::new()),
            }
        };
        let read_err = async {
            Ok::<Vec<u8>, ToolFailure>(match stderr {
                Some(stderr) => read_tail(stderr, ERROR_TAIL_BYTES).await,
                None => Vec::new(),
            })
        };
        let ((), out, err) = tokio::try_join!(write, read_out, read_err)?;
        let status = child
            .wait()
            .await
            .map_err(|error| failed(format!("lost track of `{shown}`: {error}")))?;
        Ok((status, out, err))
    };
    let (status, out, err) =
        match tokio::time::timeout(Duration::from_millis(timeout_ms), work).await {
            Ok(done) => done?,
            Err(_) => {
                return Err(timed_out(format!(
                    "`{shown}` did not finish within {timeout_ms} ms and was killed"
                )));
            }
        };
    if !status.success() {
        let how = match status.code() {
            Some(code) => format!("exited with code {code}"),
            None => format!("was stopped ({status})"),
        };
        let tail = String::from_utf8_lossy(&err);
        let tail = tail.trim();
        let stderr = if tail.is_empty() {
            "no stderr output".to_owned()
        } else {
            format!("stderr: {tail}")
        };
        return Err(failed(format!("`{shown}` {how}; {stderr}")));
    }
    parse_json_output(&out)
        .map_err(|preview| failed(format!("`{shown}` printed non-JSON output: {preview}")))
}

/// Parses a handler's output as JSON; on failure returns a preview of what it was.
fn parse_json_output(bytes: &[u8]) -> Result<HostOutput, String> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(value) => {
            let text = value.to_string();
            Ok((value, text))
        }
        Err(_) => {
            let text = String::from_utf8_lossy(bytes);
            let text = text.trim();
            if text.is_empty() {
                Err("(nothing; the result must be JSON)".into())
            } else {
                Err(truncate_chars(text, NON_JSON_PREVIEW_CHARS))
            }
        }
    }
}

/// Reads everything, failing with `cap` once more than `cap` bytes arrive.
async fn read_capped(reader: impl AsyncRead + Unpin, cap: usize) -> Result<Vec<u8>, usize> {
    let mut out = Vec::new();
    let limit = u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1);
    // A read error mid-stream (rare on a pipe) leaves what was read; the exit status
    // and JSON parse decide the outcome.
    let _ = reader.take(limit).read_to_end(&mut out).await;
    if out.len() > cap { Err(cap) } else { Ok(out) }
}

/// Reads to the end, keeping only the last `keep` bytes: a chatty stderr must be drained
/// (or the program blocks) but only its end explains a failure.
async fn read_tail(mut reader: impl AsyncRead + Unpin, keep: usize) -> Vec<u8> {
    let mut tail = Vec::with_capacity(keep * 2);
    let mut buf = [0u8; 8192];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                tail.extend_from_slice(&buf[..n]);
                if tail.len() > keep * 2 {
                    tail.drain(..tail.len() - keep);
                }
            }
        }
    }
    if tail.len() > keep {
        tail.drain(..tail.len() - keep);
    }
    tail
}

async fn run_http(
    http: &HttpClient,
    url: &str,
    timeout_ms: u64,
    input: &Value,
) -> Result<HostOutput, ToolFailure> {
    let client = http
        .0
        .as_ref()
        .map_err(|error| failed(format!("the HTTP client is unavailable: {error}")))?;
    let exchange = async {
        let mut response = client
            .post(url)
            .json(input)
            .send()
            .await
            .map_err(|error| failed(format!("request failed: {}", error_chain(&error))))?;
        let status = response.status();
        let mut body = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if body.len() + chunk.len() > MAX_HANDLER_OUTPUT {
                        return Err(failed(format!(
                            "response body is larger than {MAX_HANDLER_OUTPUT} bytes"
                        )));
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(error) => {
                    return Err(failed(format!(
                        "reading the response failed: {}",
                        error_chain(&error)
                    )));
                }
            }
        }
        Ok((status, body))
    };
    let (status, body) =
        match tokio::time::timeout(Duration::from_millis(timeout_ms), exchange).await {
            Ok(done) => done?,
            Err(_) => return Err(timed_out(format!("no response within {timeout_ms} ms"))),
        };
    if !status.is_success() {
        let start = body.len().saturating_sub(ERROR_TAIL_BYTES);
        let tail = String::from_utf8_lossy(&body[start..]);
        return Err(failed(format!("HTTP {}: {}", status.as_u16(), tail.trim())));
    }
    parse_json_output(&body).map_err(|preview| {
        failed(format!(
            "HTTP {} with a non-JSON body: {preview}",
            status.as_u16()
        ))
    })
}

/// An error and its causes on one line: reqwest's top-level message alone ("error sending
/// request") does not say what went wrong.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
