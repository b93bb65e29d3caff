//! Reading a tools file's text into its declarations and packs, with errors that point
//! into the file (line:column and `tools[i].field`).

use cordon_protocol::tool::ToolDeclaration;

use super::error::RegistryError;
use crate::packs::PackSpec;

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
pub(super) fn parse_tools_file(
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
