//! The tool registry: declared tools, checked once when declared, with their input schemas
//! compiled so every call is validated without re-reading the schema.
//!
//! Everything a tools file can get wrong is caught here, before any code runs, and each
//! [`RegistryError`] says what is wrong and where (file, line:column, `tools[i].field`).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use cordon_guest::abi::{ToolErrorKind, ToolFailure};
use cordon_protocol::tool::{HandlerSpec, ToolDeclaration};

use crate::packs::PackSpec;
use crate::provider::ToolProvider;
use serde_json::Value;

mod targets;

/// Longest tool name accepted.
pub const MAX_TOOL_NAME_LEN: usize = 128;

/// Violations listed in one `invalid_input` message; more are summarized as a count so a
/// hostile input cannot produce an unbounded message.
const MAX_LISTED_VIOLATIONS: usize = 20;
/// Characters kept of one violation's text (it may quote a huge input value).
const MAX_VIOLATION_CHARS: usize = 300;

/// Where declarations came from when they were not read from a file.
const IN_MEMORY_ORIGIN: &str = "tool declarations";

/// A set of declared tools, in declaration order, with unique names.
///
/// Cloning copies one `Arc` per tool; callers that share a registry across executions wrap
/// it in an `Arc` (as [`crate::Dispatcher::new`] takes it).
#[derive(Debug, Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<Arc<RegisteredTool>>,
    by_name: foldhash::HashMap<String, usize>,
}

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
    provider: Option<Arc<dyn ToolProvider>>,
}

/// A tools file or declaration that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// The tools file could not be read.
    #[error("cannot read tools file {path}: {source}")]
    Read {
        /// The path as given.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The text is not JSON.
    #[error("{origin}:{line}:{column}: not valid JSON: {message}")]
    Syntax {
        /// File path (or other origin) of the text.
        origin: String,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// What the parser expected.
        message: String,
    },
    /// The JSON does not have the shape of a tools file.
    #[error("{origin}:{line}:{column}: {at}{message}{hint}", at = shape_at(path), hint = shape_hint(path))]
    Shape {
        /// File path (or other origin) of the text.
        origin: String,
        /// 1-based line where the mismatch was detected.
        line: usize,
        /// 1-based column where the mismatch was detected.
        column: usize,
        /// Where in the document, e.g. `tools[2].handler` (`.` for the top level).
        path: String,
        /// What was wrong there.
        message: String,
    },
    /// A pack's options cannot be used (its root does not exist, …).
    #[error("{origin}: pack `{pack}`: {message}")]
    Pack {
        /// File path or other origin.
        origin: String,
        /// The pack's name.
        pack: &'static str,
        /// What is wrong and what to do.
        message: String,
    },
    /// Two tools share a name.
    #[error(
        "{origin}: tools[{index}]: tool `{name}` is already declared{first}; tool names must be unique",
        first = match first { Some(i) => format!(" at tools[{i}]"), None => String::new() }
    )]
    DuplicateName {
        /// File path or other origin.
        origin: String,
        /// Index of the second declaration.
        index: usize,
        /// The repeated name.
        name: String,
        /// Index of the first declaration when it is in the same list (`None` when it
        /// was registered earlier).
        first: Option<usize>,
    },
    /// A tool name code could not call, or that is too long.
    #[error(
        "{origin}: tools[{index}]: invalid tool name {name:?}: {reason}; a name is 1-{MAX_TOOL_NAME_LEN} \
         characters of A-Z a-z 0-9 _ . - and does not start with a digit or a dot"
    )]
    InvalidName {
        /// File path or other origin.
        origin: String,
        /// Index of the declaration.
        index: usize,
        /// The rejected name (as written).
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `input_schema` is not a usable JSON Schema.
    #[error(
        "{origin}: tools[{index}] `{name}`: input_schema is not a valid JSON Schema: {message}"
    )]
    InvalidSchema {
        /// File path or other origin.
        origin: String,
        /// Index of the declaration.
        index: usize,
        /// Tool name.
        name: String,
        /// What the schema compiler said.
        message: String,
    },
    /// A `command` handler without a program.
    #[error(
        "{origin}: tools[{index}] `{name}`: handler.argv is empty; give the program and its arguments, e.g. [\"python3\", \"tool.py\"]"
    )]
    EmptyArgv {
        /// File path or other origin.
        origin: String,
        /// Index of the declaration.
        index: usize,
        /// Tool name.
        name: String,
    },
    /// An `http` handler whose URL cannot be POSTed to.
    #[error("{origin}: tools[{index}] `{name}`: handler.url {url:?} {reason}")]
    BadUrl {
        /// File path or other origin.
        origin: String,
        /// Index of the declaration.
        index: usize,
        /// Tool name.
        name: String,
        /// The URL as written.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A declaration named like a tool of a connected MCP server that cannot stand for it:
    /// such a declaration only sets the connected tool's policy and description.
    #[error(
        "{origin}: tool `{name}` is a tool of connected MCP server `{server}`; a declaration of \
         that name only sets its policy and description, so {reason}"
    )]
    ConnectedOverride {
        /// The server's name (`NAME` of `--connect`).
        origin: String,
        /// The tool's name (`NAME.tool`).
        name: String,
        /// The server's name.
        server: String,
        /// What is wrong with the declaration.
        reason: String,
    },
    /// An `mcp` handler naming a tool its server does not offer: the operator's policy
    /// is set per offered tool, so such a target has none to inherit.
    #[error(
        "{origin}: tool `{name}`: its handler names tool `{tool}` of `{server}`, which \
         `{server}` does not offer (it offers: {offered})"
    )]
    NotOffered {
        /// The server's name.
        origin: String,
        /// The declared tool's name.
        name: String,
        /// The server's name.
        server: String,
        /// The tool the handler names.
        tool: String,
        /// The tools the server offers (shortened when long).
        offered: String,
    },
    /// A second connection or pack under a server name that already has one: its tools
    /// would silently take over the first one's.
    #[error(
        "{origin}: `{server}` is already connected (a pack or a --connect of that name); \
         connections and packs need distinct names"
    )]
    AlreadyConnected {
        /// The server's name.
        origin: String,
        /// The server's name.
        server: String,
    },
    /// A handler timeout of zero, which would fail every call.
    #[error("{origin}: tools[{index}] `{name}`: handler.timeout_ms must be at least 1")]
    ZeroTimeout {
        /// File path or other origin.
        origin: String,
        /// Index of the declaration.
        index: usize,
        /// Tool name.
        name: String,
    },
}

/// `tools[2].handler: ` before the message; nothing for the top level, which the hint covers.
fn shape_at(path: &str) -> String {
    if path == "." {
        String::new()
    } else {
        format!("{path}: ")
    }
}

fn shape_hint(path: &str) -> &'static str {
    if path == "." {
        " (a tools file is an object: {\"tools\": [{\"name\": …, \"handler\": {\"kind\": …}}]})"
    } else {
        ""
    }
}

impl ToolRegistry {
    /// Checks and compiles `decls`.
    pub fn new(decls: Vec<ToolDeclaration>) -> Result<Self, RegistryError> {
        let mut registry = ToolRegistry::empty();
        registry.add(decls, IN_MEMORY_ORIGIN)?;
        Ok(registry)
    }

    /// Parses a tools file's text. `origin` (usually the file path) prefixes every message.
    pub fn from_json(text: &str, origin: &str) -> Result<Self, RegistryError> {
        let (tools, packs) = parse_tools_file(text, origin)?;
        let mut registry = ToolRegistry::empty();
        registry.add(tools, origin)?;
        for pack in &packs {
            registry.add_pack(pack).map_err(|error| match error {
                RegistryError::Pack { pack, message, .. } => RegistryError::Pack {
                    origin: origin.to_owned(),
                    pack,
                    message,
                },
                other => other,
            })?;
        }
        Ok(registry)
    }

    /// Reads and parses a tools file.
    pub fn from_file(path: &Path) -> Result<Self, RegistryError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| RegistryError::Read {
            path: shown.clone(),
            source,
        })?;
        ToolRegistry::from_json(&text, &shown)
    }

    /// Adds the tools of a pack (`fs`, `bash`, `user_ask`; see [`crate::packs`]). A tool
    /// of the same name declared earlier keeps its policy and description, as for
    /// [`Self::connect`].
    pub fn add_pack(&mut self, spec: &PackSpec) -> Result<(), RegistryError> {
        let pack = spec.expand().map_err(|message| RegistryError::Pack {
            origin: IN_MEMORY_ORIGIN.to_owned(),
            pack: spec.name(),
            message,
        })?;
        match pack.provider {
            Some(provider) => self.connect(&pack.server, pack.tools, provider),
            None => self.add(pack.tools, spec.name()),
        }
    }

    /// A registry with no tools.
    pub fn empty() -> Self {
        ToolRegistry::default()
    }

    /// Tool names in declaration order.
    pub fn names(&self) -> Vec<&str> {
        self.tools.iter().map(|tool| tool.name()).collect()
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&RegisteredTool> {
        self.by_name.get(name).map(|&index| &*self.tools[index])
    }

    /// Every tool, in declaration order.
    pub fn iter(&self) -> impl Iterator<Item = &RegisteredTool> {
        self.tools.iter().map(|tool| &**tool)
    }

    /// Number of tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether there are no tools.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// Adds more tools (e.g. those of a connected MCP server). All or nothing: on error the
    /// registry is unchanged.
    pub fn extend(&mut self, decls: Vec<ToolDeclaration>) -> Result<(), RegistryError> {
        self.add(decls, IN_MEMORY_ORIGIN)
    }

    /// Adds the tools of a connected server (their handlers are `mcp` ones naming it), each
    /// run by `provider`, and attaches `provider` to tools already declared with an `mcp`
    /// handler for `server`. All or nothing, like [`Self::extend`].
    ///
    /// A tool already declared under the name of one of `decls` (a tools-file entry for
    /// `NAME.tool`) overrides it rather than clashing: it must have the handler
    /// `{"kind": "mcp", "server": server, "tool": …}` of the tool it names and no
    /// `input_schema` of its own (or the default `{"type": "object"}`); its `policy` is
    /// combined with the connection's (the stricter wins) and its `description`, when not
    /// empty, replaces the server's. The input schema and handler stay the server's.
    /// Anything else is [`RegistryError::ConnectedOverride`].
    ///
    /// A tool declared under another name whose handler reaches one of `decls` gets the
    /// stricter of its policy and that tool's, so no name loosens the connection's policy;
    /// one reaching a tool `decls` do not offer is [`RegistryError::NotOffered`]. A server
    /// already connected is [`RegistryError::AlreadyConnected`].
    pub fn connect(
        &mut self,
        server: &str,
        decls: Vec<ToolDeclaration>,
        provider: Arc<dyn ToolProvider>,
    ) -> Result<(), RegistryError> {
        let serves = |tool: &RegisteredTool| {
            matches!(
                &tool.declaration.handler,
                HandlerSpec::Mcp { server: name, .. } if name == server
            )
        };
        if self
            .iter()
            .any(|tool| serves(tool) && tool.provider.is_some())
        {
            return Err(RegistryError::AlreadyConnected {
                origin: server.to_owned(),
                server: server.to_owned(),
            });
        }
        let targets = targets::Targets::new(server, &decls);
        // Built on a copy (one `Arc` per tool), so a failure leaves `self` unchanged.
        let mut next = self.clone();
        let mut merged: HashMap<usize, ToolDeclaration> = HashMap::new();
        let mut fresh = Vec::with_capacity(decls.len());
        for decl in decls {
            match next.by_name.get(&decl.name) {
                Some(&index) => {
                    let declared = &next.tools[index].declaration;
                    merged.insert(index, override_connected(declared, decl, server)?);
                }
                None => fresh.push(decl),
            }
        }
        next.add(fresh, server)?;
        for (index, tool) in next.tools.iter_mut().enumerate() {
            if serves(tool) {
                let declaration = match merged.remove(&index) {
                    Some(declaration) => declaration,
                    // Offered here, or declared under another name: the policy is keyed by
                    // the tool the handler reaches.
                    None => targets.bind(tool.declaration.clone())?,
                };
                // Registries cloned earlier share the old `Arc` and keep their view.
                let mut connected = RegisteredTool::compile(declaration, server, index)?;
                connected.provider = Some(provider.clone());
                *tool = Arc::new(connected);
            }
        }
        *self = next;
        Ok(())
    }

    fn add(&mut self, decls: Vec<ToolDeclaration>, origin: &str) -> Result<(), RegistryError> {
        // Check everything before touching `self`, so a failed extend leaves no half-added set.
        let mut batch: HashMap<&str, usize> = HashMap::new();
        for (index, decl) in decls.iter().enumerate() {
            check_name(&decl.name).map_err(|reason| RegistryError::InvalidName {
                origin: origin.to_owned(),
                index,
                name: decl.name.clone(),
                reason,
            })?;
            let duplicate_of = if self.by_name.contains_key(&decl.name) {
                Some(None)
            } else {
                batch.get(decl.name.as_str()).map(|&first| Some(first))
            };
            if let Some(first) = duplicate_of {
                return Err(RegistryError::DuplicateName {
                    origin: origin.to_owned(),
                    index,
                    name: decl.name.clone(),
                    first,
                });
            }
            batch.insert(&decl.name, index);
        }
        let mut compiled = Vec::with_capacity(decls.len());
        for (index, decl) in decls.into_iter().enumerate() {
            compiled.push(RegisteredTool::compile(decl, origin, index)?);
        }
        for tool in compiled {
            self.by_name
                .insert(tool.declaration.name.clone(), self.tools.len());
            self.tools.push(Arc::new(tool));
        }
        Ok(())
    }
}

/// A connected server's tool `offered`, with the policy and description of the declaration
/// `declared` of the same name (see [`ToolRegistry::connect`]).
fn override_connected(
    declared: &ToolDeclaration,
    offered: ToolDeclaration,
    server: &str,
) -> Result<ToolDeclaration, RegistryError> {
    let refuse = |reason: String| RegistryError::ConnectedOverride {
        origin: server.to_owned(),
        name: offered.name.clone(),
        server: server.to_owned(),
        reason,
    };
    let HandlerSpec::Mcp {
        tool: offered_tool, ..
    } = &offered.handler
    else {
        return Err(refuse(
            "the connection offered it without an `mcp` handler".to_owned(),
        ));
    };
    let wanted = serde_json::json!({"kind": "mcp", "server": server, "tool": offered_tool});
    let handler_matches = matches!(
        &declared.handler,
        HandlerSpec::Mcp { server: name, tool } if name == server && tool == offered_tool
    );
    if !handler_matches {
        let kind = serde_json::to_value(&declared.handler)
            .ok()
            .and_then(|value| value.get("kind").cloned())
            .unwrap_or(Value::Null);
        return Err(refuse(format!(
            "its handler must be {wanted}, not {}",
            if kind == "mcp" {
                serde_json::to_value(&declared.handler).unwrap_or(Value::Null)
            } else {
                serde_json::json!({"kind": kind})
            }
        )));
    }
    if declared.input_schema != serde_json::json!({"type": "object"}) {
        return Err(refuse(
            "its input_schema comes from the server: leave `input_schema` out".to_owned(),
        ));
    }
    let description = if declared.description.is_empty() {
        offered.description
    } else {
        declared.description.clone()
    };
    Ok(ToolDeclaration {
        description,
        policy: declared.policy.strictest(offered.policy),
        ..offered
    })
}

impl RegisteredTool {
    fn compile(
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

/// A tools file's top level, its entries kept as text so each can be read as a tool or a
/// pack with errors that still point into the file.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RawToolsFile<'a> {
    #[serde(borrow)]
    tools: Vec<&'a serde_json::value::RawValue>,
}

/// Whether an entry is a pack (`{"pack": …}`); other fields are not looked at here.
#[derive(serde::Deserialize)]
struct PackProbe {
    pack: Option<serde::de::IgnoredAny>,
}

/// 1-based line and column of byte `offset` of `text`.
fn position(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |at| at + 1) + 1;
    (line, column)
}

fn shape_error(
    origin: &str,
    error: serde_path_to_error::Error<serde_json::Error>,
    prefix: Option<(usize, &str, usize)>,
) -> RegistryError {
    let mut path = error.path().to_string();
    let inner = error.into_inner();
    let (mut line, mut column) = (inner.line(), inner.column());
    let message = strip_position(&inner.to_string());
    if let Some((index, text, offset)) = prefix {
        let (base_line, base_column) = position(text, offset);
        if line == 0 {
            // No position (a pack's fields are read from a buffer): point at the entry.
            (line, column) = (base_line, base_column);
        } else {
            if line == 1 {
                column += base_column - 1;
            }
            line += base_line - 1;
        }
        path = if path == "." {
            format!("tools[{index}]")
        } else {
            format!("tools[{index}].{path}")
        };
    }
    if inner.is_syntax() || inner.is_eof() {
        RegistryError::Syntax {
            origin: origin.to_owned(),
            line,
            column,
            message,
        }
    } else {
        RegistryError::Shape {
            origin: origin.to_owned(),
            line,
            column,
            path,
            message,
        }
    }
}

/// The declarations and the packs of a tools file, in file order.
fn parse_tools_file(
    text: &str,
    origin: &str,
) -> Result<(Vec<ToolDeclaration>, Vec<PackSpec>), RegistryError> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let file: RawToolsFile<'_> = serde_path_to_error::deserialize(&mut deserializer)
        .map_err(|error| shape_error(origin, error, None))?;
    // Trailing text after the object (`{"tools": []} x`) is a syntax error too.
    deserializer.end().map_err(|error| RegistryError::Syntax {
        origin: origin.to_owned(),
        line: error.line(),
        column: error.column(),
        message: strip_position(&error.to_string()),
    })?;
    let mut tools = Vec::new();
    let mut packs = Vec::new();
    for (index, raw) in file.tools.iter().enumerate() {
        let entry = raw.get();
        let offset = (entry.as_ptr() as usize).saturating_sub(text.as_ptr() as usize);
        let prefix = Some((index, text, offset));
        let is_pack =
            serde_json::from_str::<PackProbe>(entry).is_ok_and(|probe| probe.pack.is_some());
        let mut entry_deserializer = serde_json::Deserializer::from_str(entry);
        if is_pack {
            let pack: PackSpec = serde_path_to_error::deserialize(&mut entry_deserializer)
                .map_err(|error| shape_error(origin, error, prefix))?;
            packs.push(pack);
        } else {
            let tool: ToolDeclaration = serde_path_to_error::deserialize(&mut entry_deserializer)
                .map_err(|error| shape_error(origin, error, prefix))?;
            tools.push(tool);
        }
    }
    Ok((tools, packs))
}

/// serde_json appends " at line L column C"; the error message puts the position first.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(at) => message[..at].to_owned(),
        None => message.to_owned(),
    }
}

fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("it is empty".into());
    }
    if name.chars().count() > MAX_TOOL_NAME_LEN {
        return Err(format!("it is longer than {MAX_TOOL_NAME_LEN} characters"));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "_.-".contains(*c)))
    {
        return Err(format!("it contains {bad:?}"));
    }
    if name.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return Err("it starts with a digit or a dot".into());
    }
    Ok(())
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

/// At most `max` characters of `text`, with `…` when cut.
pub(crate) fn truncate_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}
