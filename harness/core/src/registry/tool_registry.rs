//! The set of declared tools ([`ToolRegistry`]): built from declarations or a tools file,
//! looked up by name, extended all or nothing.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use cordon_protocol::tool::ToolDeclaration;

use super::error::RegistryError;
use super::name::check_name;
use super::registered_tool::RegisteredTool;
use super::tools_file::parse_tools_file;

/// Where declarations came from when they were not read from a file.
pub(super) const IN_MEMORY_ORIGIN: &str = "tool declarations";

/// A set of declared tools, in declaration order, with unique names.
///
/// Cloning copies one `Arc` per tool; callers that share a registry across executions wrap
/// it in an `Arc` (as [`crate::Dispatcher::new`] takes it).
#[derive(Debug, Clone, Default)]
pub struct ToolRegistry {
    pub(super) tools: Vec<Arc<RegisteredTool>>,
    pub(super) by_name: foldhash::HashMap<String, usize>,
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

    pub(super) fn add(
        &mut self,
        decls: Vec<ToolDeclaration>,
        origin: &str,
    ) -> Result<(), RegistryError> {
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
