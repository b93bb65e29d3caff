//! `cordon tools export FILE --format anthropic|openai|openai-responses|mcp`: the
//! definitions of a tools file's tools (packs expanded) in the shape a framework hands to
//! its model.

use std::process::ExitCode;

use anyhow::Context;
use cordon_core::ToolRegistry;
use serde_json::{Value, json};

/// `cordon tools …`.
#[derive(Debug, clap::Args)]
pub struct ToolsArgs {
    #[command(subcommand)]
    pub command: ToolsCommand,
}

/// What to do with a tools file.
#[derive(Debug, clap::Subcommand)]
pub enum ToolsCommand {
    /// Print the tools' definitions (name, description, input schema) as JSON.
    Export(ExportArgs),
}

/// Options of `cordon tools export`.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// Tools file: {"tools": [tool or {"pack": "fs" | "bash" | "user_ask", …}, …]}.
    #[arg(value_name = "FILE")]
    pub file: std::path::PathBuf,
    /// Shape: `anthropic` (Messages `tools`), `openai` (Chat Completions `tools`;
    /// `openai-responses` for the Responses API) or `mcp` (`tools/list` entries).
    #[arg(long, value_name = "FORMAT", default_value = "anthropic")]
    pub format: String,
}

/// The formats `--format` takes (`openai-chat` is also taken, as `openai`).
pub const FORMATS: [&str; 4] = ["anthropic", "openai", "openai-responses", "mcp"];

/// One tool in `format`'s shape.
pub fn definition(format: &str, name: &str, description: &str, schema: &Value) -> Option<Value> {
    Some(match format {
        "anthropic" => json!({"name": name, "description": description, "input_schema": schema}),
        "openai" | "openai-chat" => json!({"type": "function", "function": {
            "name": name, "description": description, "parameters": schema
        }}),
        "openai-responses" => json!({
            "type": "function", "name": name, "description": description, "parameters": schema
        }),
        "mcp" => json!({"name": name, "description": description, "inputSchema": schema}),
        _ => return None,
    })
}

/// `cordon tools`.
pub fn run(args: ToolsArgs) -> anyhow::Result<ExitCode> {
    let ToolsCommand::Export(export) = args.command;
    let registry = ToolRegistry::from_file(&export.file)?;
    let mut out = Vec::new();
    for tool in registry.iter() {
        let declaration = &tool.declaration;
        let entry = definition(
            &export.format,
            &declaration.name,
            &declaration.description,
            &declaration.input_schema,
        )
        .with_context(|| {
            format!(
                "unknown --format `{}` (use {})",
                export.format,
                FORMATS.join(", ")
            )
        })?;
        out.push(entry);
    }
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(ExitCode::SUCCESS)
}
