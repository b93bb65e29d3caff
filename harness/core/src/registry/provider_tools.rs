//! Adding a pack's or a connected server's tools to a registry, with the operator's policy
//! of what they reach kept (see [`targets`](super::targets)).

use std::collections::HashMap;
use std::sync::Arc;

use cordon_protocol::tool::{HandlerSpec, ToolDeclaration};
use serde_json::Value;

use super::error::RegistryError;
use super::registered_tool::RegisteredTool;
use super::targets;
use super::tool_registry::{IN_MEMORY_ORIGIN, ToolRegistry};
use crate::packs::PackSpec;
use crate::provider::ToolProvider;

impl ToolRegistry {
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
