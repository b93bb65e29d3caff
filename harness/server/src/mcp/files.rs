//! `execute_code`'s files: the ones the caller hands in (`files`), and the ones the
//! program wrote, returned as text, images or just names and sizes.

use std::collections::HashMap;

use base64::Engine as _;
use cordon_sandbox::{FileEntry, Workspace};
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};

/// Written text files up to this size are shown in the result.
const INLINE_TEXT_BYTES: u64 = 4 << 10;
/// Written images up to this size are returned as image content.
const INLINE_IMAGE_BYTES: u64 = 1 << 20;

/// Stores the `files` argument: `{"name": "text"}` or `{"name": {"base64": "…"}}`
/// (or `{"text": "…"}`). A shape error is for the caller; a path or quota error for the
/// model, so both come back as a message.
pub(super) fn write_inputs(workspace: &Workspace, files: &Value) -> Result<(), String> {
    let Value::Object(files) = files else {
        return Err("`files` must be an object of name → text or {\"base64\": …}".into());
    };
    for (name, value) in files {
        let bytes = match value {
            Value::String(text) => text.clone().into_bytes(),
            Value::Object(fields) => match (fields.get("base64"), fields.get("text")) {
                (Some(Value::String(data)), None) => base64::engine::general_purpose::STANDARD
                    .decode(data.trim())
                    .map_err(|error| format!("files[{name:?}].base64 is not base64: {error}"))?,
                (None, Some(Value::String(text))) => text.clone().into_bytes(),
                _ => {
                    return Err(format!(
                        "files[{name:?}] must be text, {{\"base64\": \"…\"}} or {{\"text\": \"…\"}}"
                    ));
                }
            },
            _ => {
                return Err(format!(
                    "files[{name:?}] must be text, {{\"base64\": \"…\"}} or {{\"text\": \"…\"}}"
                ));
            }
        };
        workspace
            .write(name, &bytes)
            .map_err(|error| error.to_string())?;
    }
    Ok(())
}

/// What the workspace held before the run: path → (size, modified).
pub(super) struct Before(HashMap<String, (u64, u64)>);

pub(super) fn snapshot(workspace: &Workspace) -> Before {
    Before(
        workspace
            .list()
            .into_iter()
            .map(|entry| (entry.path, (entry.size, entry.modified_ns)))
            .collect(),
    )
}

/// Files created or changed since `before`.
pub(super) fn written(workspace: &Workspace, before: &Before) -> Vec<FileEntry> {
    workspace
        .list()
        .into_iter()
        .filter(|entry| before.0.get(&entry.path) != Some(&(entry.size, entry.modified_ns)))
        .collect()
}

fn image_type(path: &str) -> Option<&'static str> {
    let extension = path.rsplit_once('.')?.1.to_ascii_lowercase();
    match extension.as_str() {
        "png" => Some("image/png"),
        "jpg" | "jpeg" => Some("image/jpeg"),
        "gif" => Some("image/gif"),
        "webp" => Some("image/webp"),
        _ => None,
    }
}

/// Adds the written files to the result: a `[files]` text block listing them, small text
/// files inline, images as image content, and `files` in `structuredContent`.
pub(super) fn attach(result: &mut CallToolResult, workspace: &Workspace, written: &[FileEntry]) {
    if written.is_empty() {
        return;
    }
    let mut listing = String::from("[files written]\n");
    let mut blocks = Vec::new();
    let mut described = Vec::new();
    for entry in written {
        listing.push_str(&format!(
            "/workspace/{} ({} bytes)\n",
            entry.path, entry.size
        ));
        let mut inline = "none";
        if let Ok(bytes) = workspace.read(&entry.path) {
            if let Some(media_type) = image_type(&entry.path) {
                if entry.size <= INLINE_IMAGE_BYTES {
                    let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
                    blocks.push(ContentBlock::image(data, media_type));
                    inline = "image";
                }
            } else if entry.size <= INLINE_TEXT_BYTES
                && let Ok(text) = String::from_utf8(bytes)
            {
                blocks.push(ContentBlock::text(format!(
                    "[file /workspace/{}]\n{text}",
                    entry.path
                )));
                inline = "text";
            }
        }
        described.push(json!({"path": entry.path, "size": entry.size, "inline": inline}));
    }
    result.content.push(ContentBlock::text(listing));
    result.content.extend(blocks);
    if let Some(Value::Object(structured)) = &mut result.structured_content {
        structured.insert("files".into(), Value::Array(described));
    }
}
