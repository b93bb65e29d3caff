//! One declared tool with its input schema compiled ([`RegisteredTool`]): the checks a
//! declaration passes once, and the validation of every call's input.

use std::sync::Arc;

use cordon_guest::abi::{ToolErrorKind, ToolFailure};
use cordon_protocol::tool::{HandlerSpec, ToolDeclaration};
use serde_json::Value;

use super::error::RegistryError;
use crate::provider::ToolProvider;
use crate::truncate::truncate_chars;

/// Violations listed in one `invalid_input` message; more are summarized as a count so a
/// hostile input cannot produce an unbounded message.
const MAX_LISTED_VIOLATIONS: usize = 20;
/// Characters kept of one violation's text (it may quote a huge input value).
const MAX_VIOLATION_CHARS: usize = 300;

/// One declared tool, with its input schema compiled.
#[derive(Debug)]
pub struct RegisteredTool {
    /// The declaration as written.
    pub declaration: ToolDeclaration,
    validator: jsonschema::Validator,
    /// A `static` handler's result as JSON text, serialized once: static tools back the
    /// per-call overhead benchmark, so they should cost no serialization per call.
    static_text: Option<Arc<str>>,
    /// What runs an `mcp` handler's calls, once its server is connected.
    pub(super) provider: Option<Arc<dyn ToolProvider>>,
}

impl RegisteredTool {
    pub(super) fn compile(
        declaration: ToolDeclaration,
        origin: &str,
        index: usize,
    ) -> Result<Self, RegistryError> {
        let name = declaration.name.clone();
        let schema_error = |message: String| RegistryError::InvalidSchema {
            origin: origin.to_owned(),
            index,
            name: name.clone(),
            message,
        };
        check_describes_object(&declaration.input_schema).map_err(schema_error)?;
        // Offline: a tools file must not make Cordon read files or fetch URLs through `$ref`.
        let validator = jsonschema::options()
            .offline()
            .build(&declaration.input_schema)
            .map_err(|error| schema_error(error.to_string()))?;
        let static_text = match &declaration.handler {
            HandlerSpec::Static { result } => Some(Arc::from(result.to_string())),
            HandlerSpec::Command {
                argv, timeout_ms, ..
            } => {
                if argv.is_empty() || argv[0].is_empty() {
                    return Err(RegistryError::EmptyArgv {
                        origin: origin.to_owned(),
                        index,
                        name,
                    });
                }
                check_timeout(*timeout_ms, origin, index, &name)?;
                None
            }
            HandlerSpec::Http { url, timeout_ms } => {
                check_url(url).map_err(|reason| RegistryError::BadUrl {
                    origin: origin.to_owned(),
                    index,
                    name: name.clone(),
                    url: url.clone(),
                    reason,
                })?;
                check_timeout(*timeout_ms, origin, index, &name)?;
                None
            }
            _ => None,
        };
        Ok(RegisteredTool {
            declaration,
            validator,
            static_text,
            provider: None,
        })
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.declaration.name
    }

    /// Checks `input` against the input schema. The error lists every violation with its
    /// JSON pointer, e.g. `/city: 5 is not of type "string"`.
    pub fn validate_input(&self, input: &Value) -> Result<(), ToolFailure> {
        if !input.is_object() {
            return Err(ToolFailure {
                kind: ToolErrorKind::InvalidInput,
                message: format!(
                    "input of `{}` must be a JSON object of named arguments, got {}",
                    self.name(),
                    json_type(input)
                ),
            });
        }
        // The fast check allocates nothing; only failures pay for collecting messages.
        if self.validator.is_valid(input) {
            return Ok(());
        }
        let mut listed = Vec::new();
        let mut total = 0usize;
        for error in self.validator.iter_errors(input) {
            total += 1;
            if listed.len() < MAX_LISTED_VIOLATIONS {
                let text = truncate_chars(&error.to_string(), MAX_VIOLATION_CHARS);
                let pointer = error.instance_path().to_string();
                listed.push(if pointer.is_empty() {
                    text
                } else {
                    format!("{pointer}: {text}")
                });
            }
        }
        let mut message = format!(
            "input does not match the schema of `{}`: {}",
            self.name(),
            listed.join("; ")
        );
        if total > listed.len() {
            message.push_str(&format!(" (and {} more)", total - listed.len()));
        }
        Err(ToolFailure {
            kind: ToolErrorKind::InvalidInput,
            message,
        })
    }

    pub(crate) fn static_text(&self) -> Option<&Arc<str>> {
        self.static_text.as_ref()
    }

    /// What runs this tool's calls, for `mcp` handlers whose server is connected.
    pub(crate) fn provider(&self) -> Option<&Arc<dyn ToolProvider>> {
        self.provider.as_ref()
    }
}

/// Inputs are always objects of named arguments, so a schema whose `type` excludes
/// objects could never accept a call: say so at declaration time.
fn check_describes_object(schema: &Value) -> Result<(), String> {
    let Some(declared) = schema.get("type") else {
        return Ok(());
    };
    let allows_object = match declared {
        Value::String(kind) => kind == "object",
        Value::Array(kinds) => kinds.iter().any(|kind| kind == "object"),
        _ => true, // a malformed `type` is reported by the schema compiler
    };
    if allows_object {
        Ok(())
    } else {
        Err(format!(
            "tool inputs are objects of named arguments, but its type is {declared}"
        ))
    }
}

fn check_url(url: &str) -> Result<(), String> {
    let parsed = url::Url::parse(url).map_err(|error| format!("is not a URL: {error}"))?;
    match parsed.scheme() {
        "http" | "https" => {}
        other => {
            return Err(format!(
                "has scheme `{other}`; only http and https are supported"
            ));
        }
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err("has no host".into());
    }
    Ok(())
}

fn check_timeout(
    timeout_ms: u64,
    origin: &str,
    index: usize,
    name: &str,
) -> Result<(), RegistryError> {
    if timeout_ms == 0 {
        return Err(RegistryError::ZeroTimeout {
            origin: origin.to_owned(),
            index,
            name: name.to_owned(),
        });
    }
    Ok(())
}

pub(crate) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
