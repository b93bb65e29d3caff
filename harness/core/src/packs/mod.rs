//! Ready-made tool packs: tools-file entries (`{"pack": "fs", …}`) that expand into tools.
//!
//! - `fs` — `fs_read_file`, `fs_list_files`, `fs_search`, and with `"write": true`
//!   `fs_write_file` and `fs_edit`, confined to `root` ([`fs`]).
//! - `bash` — one `bash` tool that runs a command line under a deny-by-default policy
//!   checked on the parsed command, contained by bubblewrap where the host has it
//!   ([`bash`]).
//! - `user_ask` — the model asks the human a question; always a client tool, whose result
//!   is `{"answer": "…", "is_freeform": true | false}`.
//!
//! From the library, one call registers a pack:
//!
//! ```
//! use cordon_core::{ToolRegistry, packs::PackSpec};
//!
//! let dir = std::env::temp_dir();
//! let spec: PackSpec = serde_json::from_value(serde_json::json!(
//!     {"pack": "fs", "root": dir, "write": false}
//! )).unwrap();
//! let mut registry = ToolRegistry::empty();
//! registry.add_pack(&spec).unwrap();
//! assert_eq!(registry.names(), ["fs_read_file", "fs_list_files", "fs_search"]);
//! ```

pub mod bash;
mod fs;

use std::path::PathBuf;
use std::sync::Arc;

use cordon_protocol::tool::{HandlerSpec, Policy, ToolDeclaration};
use serde::Deserialize;
use serde_json::json;

use crate::provider::ToolProvider;

/// One pack entry of a tools file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "pack", rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum PackSpec {
    /// Files under `root`.
    Fs {
        /// The directory every path resolves under.
        root: PathBuf,
        /// Adds `fs_write_file` and `fs_edit`.
        #[serde(default)]
        write: bool,
        /// Policy of every tool of the pack.
        #[serde(default)]
        policy: Policy,
    },
    /// A shell command line, policy-checked and contained.
    Bash(bash::BashSpec),
    /// Ask the human.
    UserAsk {},
}

/// What a pack expands into.
#[derive(Debug)]
pub struct Pack {
    /// The provider's name (`fs`, `bash`), the `server` of the tools' handlers.
    pub server: String,
    /// The tools' declarations.
    pub tools: Vec<ToolDeclaration>,
    /// What runs their calls; `None` for client tools (`user_ask`).
    pub provider: Option<Arc<dyn ToolProvider>>,
}

impl PackSpec {
    /// The pack's name, as written in `"pack"`.
    pub fn name(&self) -> &'static str {
        match self {
            PackSpec::Fs { .. } => "fs",
            PackSpec::Bash(_) => "bash",
            PackSpec::UserAsk {} => "user_ask",
        }
    }

    /// Checks the options (the root exists …) and builds the tools. An error says what
    /// to fix.
    pub fn expand(&self) -> Result<Pack, String> {
        match self {
            PackSpec::Fs {
                root,
                write,
                policy,
            } => {
                let provider = fs::FsPack::new(root, *write)?;
                let tools = fs::declarations(*write)
                    .into_iter()
                    .map(|(tool, description, schema)| ToolDeclaration {
                        name: format!("fs_{tool}"),
                        description: description.to_owned(),
                        input_schema: schema,
                        policy: *policy,
                        defer_loading: false,
                        handler: HandlerSpec::Mcp {
                            server: "fs".into(),
                            tool: tool.into(),
                        },
                    })
                    .collect();
                Ok(Pack {
                    server: "fs".into(),
                    tools,
                    provider: Some(Arc::new(provider)),
                })
            }
            PackSpec::Bash(spec) => {
                let runner = bash::BashPack::new(spec.clone())?;
                let tools = vec![ToolDeclaration {
                    name: "bash".into(),
                    description: runner.description(),
                    input_schema: json!({"type": "object", "properties": {
                        "command": {"type": "string", "description": "The command line to run in the root directory"}
                    }, "required": ["command"], "additionalProperties": false}),
                    policy: spec.policy,
                    defer_loading: false,
                    handler: HandlerSpec::Mcp {
                        server: "bash".into(),
                        tool: "bash".into(),
                    },
                }];
                Ok(Pack {
                    server: "bash".into(),
                    tools,
                    provider: Some(Arc::new(runner)),
                })
            }
            PackSpec::UserAsk {} => Ok(Pack {
                server: "user_ask".into(),
                tools: vec![user_ask_declaration()],
                provider: None,
            }),
        }
    }
}

/// `user_ask`: a client tool. Whoever runs the execution answers with
/// `{"answer": "…", "is_freeform": true | false}` (`is_freeform` is false when the answer
/// is one of `options`).
pub fn user_ask_declaration() -> ToolDeclaration {
    ToolDeclaration {
        name: "user_ask".into(),
        description: "Ask the user a question and wait for the answer. Give `options` when \
                      the answer should be one of a few choices (the user may still answer \
                      freely). Returns {\"answer\", \"is_freeform\"}."
            .into(),
        input_schema: json!({"type": "object", "properties": {
            "question": {"type": "string", "description": "The question, as the user should read it"},
            "options": {"type": "array", "items": {"type": "string"}, "description": "Suggested answers"}
        }, "required": ["question"], "additionalProperties": false}),
        policy: Policy::Allow,
        defer_loading: false,
        handler: HandlerSpec::Client {},
    }
}
