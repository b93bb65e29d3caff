//! The tool registry: declared tools, checked once when declared, with their input schemas
//! compiled so every call is validated without re-reading the schema.
//!
//! Everything a tools file can get wrong is caught here, before any code runs, and each
//! [`RegistryError`] says what is wrong and where (file, line:column, `tools[i].field`).

mod error;
mod name;
mod provider_tools;
mod registered_tool;
mod targets;
mod tool_registry;
mod tools_file;

pub use error::RegistryError;
pub use name::MAX_TOOL_NAME_LEN;
pub use registered_tool::RegisteredTool;
pub use tool_registry::ToolRegistry;
