//! Host handlers: what runs a `static`, `command` or `http` tool call inside Cordon's
//! process (outside the sandbox). `client` calls never reach this module; the dispatcher
//! hands them to the caller.
//!
//! Every failure becomes a [`ToolFailure`] the guest (and the model) can read: handler
//! problems are tool results, never host errors.
//!
//! Containment: output is read only up to the payload limit (the process is then stopped);
//! a `command` starts with an empty environment in its own process group, and the whole
//! group is killed when the call ends, however it ends; `http` errors never repeat the
//! URL's credentials or query.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use cordon_guest::abi::{ToolErrorKind, ToolFailure};
use cordon_protocol::tool::HandlerSpec;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use crate::host_process::{DEFAULT_COMMAND_PATH, GroupKiller};
use crate::registry::RegisteredTool;
use crate::truncate::truncate_chars;

/// Most bytes read from a handler's stdout or response body, whatever the payload limit
/// says: a backstop for callers that set `max_payload_bytes` absurdly high.
pub(crate) const MAX_HANDLER_OUTPUT: usize = 64 * 1024 * 1024;
/// Start of the message of a call whose result exceeded `max_payload_bytes`. The guest's
/// `ToolError.kind` is `tool_failed` (the bridge ABI has no kind of its own for it yet);
/// the message names the cause first so code and models can tell.
pub const PAYLOAD_TOO_LARGE: &str = "payload_too_large";
/// Bytes of stderr (or an error body) quoted in a failure message.
const ERROR_TAIL_BYTES: usize = 2048;
/// Characters of non-JSON output quoted in a failure message.
const NON_JSON_PREVIEW_CHARS: usize = 200;

/// The handle to the HTTP client of `http` calls. The client itself is built once per
/// process, on the first `http` call: building one loads and parses the system's CA
/// certificates (milliseconds), which every dispatcher, and so every execution, used to
/// pay whether or not it had an `http` tool. Building can fail (TLS set-up); that becomes a
/// per-call failure instead of a panic at start-up.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct HttpClient;

impl HttpClient {
    fn client(self) -> Result<&'static reqwest::Client, &'static str> {
        static CLIENT: std::sync::OnceLock<Result<reqwest::Client, String>> =
            std::sync::OnceLock::new();
        CLIENT
            .get_or_init(|| {
                reqwest::Client::builder()
                    .build()
                    .map_err(|error| error_chain(&error))
            })
            .as_ref()
            .map_err(String::as_str)
    }
}

/// A successful handler result: the value (for events) and its JSON text (for the guest).
/// `None` stands for the tool's declared static result, cloned only if an event needs it:
/// it would otherwise be cloned on every call for a listener that may not exist.
pub(crate) type HostOutput = (Option<Value>, String);

fn failed(message: String) -> ToolFailure {
    ToolFailure {
        kind: ToolErrorKind::Failed,
        message,
    }
}

/// The failure of a call whose result is over the payload limit.
pub(crate) fn payload_too_large(what: &str, max: usize) -> ToolFailure {
    failed(format!(
        "{PAYLOAD_TOO_LARGE}: {what} is larger than the {max}-byte payload limit \
         (max_payload_bytes); ask for less"
    ))
}

fn timed_out(message: String) -> ToolFailure {
    ToolFailure {
        kind: ToolErrorKind::Timeout,
        message,
    }
}

/// Runs one host call. `input` has passed schema and policy checks; `max_payload` bounds
/// what is read from a handler.
pub(crate) async fn run_host(
    tool: &RegisteredTool,
    input: &Value,
    http: &HttpClient,
    max_payload: usize,
) -> Result<HostOutput, ToolFailure> {
    let cap = max_payload.min(MAX_HANDLER_OUTPUT);
    match &tool.declaration.handler {
        HandlerSpec::Static { result } => {
            let text = match tool.static_text() {
                Some(text) => text.to_string(),
                None => result.to_string(),
            };
            Ok((None, text))
        }
        HandlerSpec::Command {
            argv,
            timeout_ms,
            env,
            inherit_env,
        } => {
            let env = command_env(env, inherit_env);
            // Boxed, like every handler that waits on I/O: their futures are kilobytes, and
            // inline they would make every call's future that large — copied on each tool
            // call, static ones included, for a wait these handlers' I/O dwarfs anyway.
            Box::pin(run_command(argv, &env, *timeout_ms, input, cap)).await
        }
        HandlerSpec::Http { url, timeout_ms } => {
            // Errors never repeat the URL's credentials or query.
            let secrets = UrlSecrets::of(url);
            Box::pin(run_http(http, url, *timeout_ms, input, cap))
                .await
                .map_err(|mut failure| {
                    failure.message = secrets.redact(&failure.message);
                    failure
                })
        }
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
                    (Some(value), text)
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

/// The whole environment of a `command` handler: `inherit_env` names taken from Cordon's
/// own environment (when set), then `env`, then the default `PATH` if neither set one.
fn command_env(env: &BTreeMap<String, String>, inherit: &[String]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for name in inherit {
        if let Some(value) = std::env::var_os(name) {
            out.insert(name.clone(), value.to_string_lossy().into_owned());
        }
    }
    out.extend(
        env.iter()
            .map(|(name, value)| (name.clone(), value.clone())),
    );
    out.entry("PATH".to_owned())
        .or_insert_with(|| DEFAULT_COMMAND_PATH.to_owned());
    out
}

async fn run_command(
    argv: &[String],
    env: &BTreeMap<String, String>,
    timeout_ms: u64,
    input: &Value,
    cap: usize,
) -> Result<HostOutput, ToolFailure> {
    let Some((program, args)) = argv.split_first() else {
        return Err(failed("command handler has an empty argv".into()));
    };
    let shown = program_name(program);
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .env_clear()
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so the whole tree can be killed at once.
        .process_group(0)
        // Dropping the child (timeout, or the execution being cancelled) kills it.
        .kill_on_drop(true)
        .spawn()
        .map_err(|error| failed(format!("cannot start `{shown}`: {error}")))?;
    // Declared after `child`, so dropped before it: the group dies before the leader is
    // reaped (which would free its pid, and so the group id, for reuse).
    let _group = GroupKiller(
        child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .and_then(rustix::process::Pid::from_raw),
    );
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
                Some(stdout) => read_capped(stdout, cap).await.map_err(|too_big| {
                    payload_too_large(&format!("the output of `{shown}` (stopped)"), too_big)
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
            Ok((Some(value), text))
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

/// Posts `input` to `url` and reads the JSON answer. Its failures may quote the URL: the
/// caller redacts them with [`UrlSecrets`].
async fn run_http(
    http: &HttpClient,
    url: &str,
    timeout_ms: u64,
    input: &Value,
    cap: usize,
) -> Result<HostOutput, ToolFailure> {
    let client = http
        .client()
        .map_err(|error| failed(format!("the HTTP client is unavailable: {error}")))?;
    let exchange = async {
        let mut response = client.post(url).json(input).send().await.map_err(|error| {
            failed(format!(
                "request failed: {}",
                error_chain(&error.without_url())
            ))
        })?;
        let status = response.status();
        let mut body = Vec::new();
        let mut read = 0usize;
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    read = read.saturating_add(chunk.len());
                    if status.is_success() {
                        if read > cap {
                            // Dropping the response closes the connection mid-body.
                            return Err(payload_too_large("the response body", cap));
                        }
                        body.extend_from_slice(&chunk);
                    } else {
                        // Only the tail of an error body is quoted: keep that much, and
                        // stop reading one that is over the payload limit.
                        body.extend_from_slice(&chunk);
                        if body.len() > 2 * ERROR_TAIL_BYTES {
                            body.drain(..body.len() - ERROR_TAIL_BYTES);
                        }
                        if read > cap {
                            break;
                        }
                    }
                }
                Ok(None) => break,
                Err(error) => {
                    return Err(failed(format!(
                        "reading the response failed: {}",
                        error_chain(&error.without_url())
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

/// The parts of an `http` handler's URL that must not reach a guest or the store: the
/// userinfo and the query. Errors are built without the URL, and anything that still
/// quotes these parts (a server echoing its request, a library's message) is scrubbed.
struct UrlSecrets(Vec<(String, String)>);

impl UrlSecrets {
    fn of(url: &str) -> Self {
        let mut secrets = Vec::new();
        let Ok(parsed) = url::Url::parse(url) else {
            // The registry only accepts URLs that parse; never echo one that does not.
            return UrlSecrets(vec![(url.to_owned(), "[redacted URL]".to_owned())]);
        };
        let mut shown = parsed.clone();
        // Cannot fail for http(s) URLs, which are the only ones the registry accepts.
        let _ = shown.set_username("");
        let _ = shown.set_password(None);
        shown.set_query(None);
        shown.set_fragment(None);
        let shown = shown.to_string();
        secrets.push((url.to_owned(), shown.clone()));
        secrets.push((parsed.to_string(), shown));
        let redacted = || "[redacted]".to_owned();
        if let Some(query) = parsed.query() {
            secrets.push((query.to_owned(), redacted()));
        }
        if let Some(password) = parsed.password() {
            secrets.push((password.to_owned(), redacted()));
        }
        if !parsed.username().is_empty() {
            secrets.push((format!("{}:", parsed.username()), redacted()));
            secrets.push((format!("{}@", parsed.username()), redacted()));
        }
        // Longest first, so a whole URL is replaced before its parts are; very short
        // parts would redact ordinary words and are left alone.
        secrets.retain(|(secret, _)| secret.len() >= 4);
        secrets.sort_by_key(|(secret, _)| std::cmp::Reverse(secret.len()));
        UrlSecrets(secrets)
    }

    fn redact(&self, message: &str) -> String {
        let mut text = message.to_owned();
        for (secret, replacement) in &self.0 {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), replacement);
            }
        }
        text
    }
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
