//! What can be wrong with a tools file or a declaration: [`RegistryError`], each variant
//! saying what is wrong and where.

use super::name::MAX_TOOL_NAME_LEN;

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
