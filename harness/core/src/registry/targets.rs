//! The operator's policy keyed by what a tool reaches, not by its name.
//!
//! A connection (`--connect`) or a pack offers tools, each with the policy the operator
//! gave it (`--connect-policy`, the pack's `policy`). Any declaration whose `mcp` handler
//! reaches one of them — under the offered name or any other — gets the stricter of its
//! own policy and that one, so renaming a tool (an alias declared over the HTTP API, in a
//! tools file) can never loosen what the operator set. A handler naming a tool the
//! connection does not offer has no operator policy to inherit and is refused.

use std::collections::HashMap;

use cordon_protocol::tool::{HandlerSpec, Policy, ToolDeclaration};

use super::error::RegistryError;
use crate::truncate::truncate_chars;

/// Characters of the offered names listed in a [`RegistryError::NotOffered`] message.
const MAX_LISTED_CHARS: usize = 300;
/// Characters of a declared (untrusted) tool name echoed in an error.
const MAX_ECHOED_CHARS: usize = 128;

/// What one connection or pack offers: its server name and, per tool on that server, the
/// operator's policy for it.
pub(super) struct Targets<'a> {
    server: &'a str,
    policies: HashMap<String, Policy>,
}

impl<'a> Targets<'a> {
    /// The targets offered by `decls` (the connection's or pack's own declarations).
    pub(super) fn new(server: &'a str, decls: &[ToolDeclaration]) -> Self {
        let mut policies: HashMap<String, Policy> = HashMap::new();
        for decl in decls {
            if let HandlerSpec::Mcp { tool, .. } = &decl.handler {
                let entry = policies.entry(tool.clone()).or_insert(decl.policy);
                *entry = entry.strictest(decl.policy);
            }
        }
        Targets { server, policies }
    }

    /// `declared`, whose handler reaches this server, with its policy made at least as
    /// strict as the operator's for the tool it reaches.
    pub(super) fn bind(
        &self,
        mut declared: ToolDeclaration,
    ) -> Result<ToolDeclaration, RegistryError> {
        let HandlerSpec::Mcp { tool, .. } = &declared.handler else {
            return Ok(declared);
        };
        let Some(operator) = self.policies.get(tool) else {
            let mut offered: Vec<&str> = self.policies.keys().map(String::as_str).collect();
            offered.sort_unstable();
            return Err(RegistryError::NotOffered {
                origin: self.server.to_owned(),
                name: truncate_chars(&declared.name, MAX_ECHOED_CHARS),
                server: self.server.to_owned(),
                tool: truncate_chars(tool, MAX_ECHOED_CHARS),
                offered: if offered.is_empty() {
                    "none".to_owned()
                } else {
                    truncate_chars(&offered.join(", "), MAX_LISTED_CHARS)
                },
            });
        };
        declared.policy = declared.policy.strictest(*operator);
        Ok(declared)
    }
}
