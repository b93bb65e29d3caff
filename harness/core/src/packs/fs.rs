//! The `fs` pack: read, list and search files under one root on the host, and (with
//! `write: true`) write and edit them. Every path resolves under the root after
//! canonicalisation — symbolic links are followed and the target checked — and every read
//! and result is size-capped.

use std::path::{Component, Path, PathBuf};

use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::provider::ToolProvider;

/// Bytes of one file `fs_read_file` returns at most (the rest is reported, not sent).
const MAX_READ_BYTES: usize = 256 << 10;
/// Entries `fs_list_files` returns at most.
const MAX_LIST_ENTRIES: usize = 1_000;
/// Matches `fs_search` returns at most.
const MAX_MATCHES: usize = 200;
/// Files larger than this are not searched.
const MAX_SEARCH_FILE_BYTES: u64 = 1 << 20;
/// Files `fs_search` looks at at most.
const MAX_SEARCH_FILES: usize = 5_000;
/// Characters of a matching line that are returned.
const MAX_LINE_CHARS: usize = 300;
/// Bytes `fs_write_file` and `fs_edit` write at most.
const MAX_WRITE_BYTES: usize = 4 << 20;
/// Directory depth `fs_list_files` and `fs_search` descend at most.
const MAX_DEPTH: usize = 32;

/// Runs the `fs` pack's calls.
#[derive(Debug)]
pub(crate) struct FsPack {
    root: PathBuf,
    write: bool,
}

impl FsPack {
    /// `root` must exist; it is canonicalised once here.
    pub(crate) fn new(root: &Path, write: bool) -> Result<Self, String> {
        let root = root
            .canonicalize()
            .map_err(|error| format!("root {}: {error}", root.display()))?;
        if !root.is_dir() {
            return Err(format!("root {} is not a directory", root.display()));
        }
        Ok(FsPack { root, write })
    }

    /// `path` (relative to the root, or absolute inside it) as a host path inside the
    /// root. An existing path is canonicalised (links followed) and must stay inside; for a
    /// new one, its deepest existing ancestor must.
    fn resolve(&self, path: &str) -> Result<PathBuf, String> {
        let given = Path::new(path);
        let joined = if given.is_absolute() {
            given.to_path_buf()
        } else {
            self.root.join(given)
        };
        // Lexically first: `..` may not climb out even through paths that do not exist.
        let mut lexical = PathBuf::new();
        for component in joined.components() {
            match component {
                Component::ParentDir => {
                    if !lexical.pop() {
                        return Err(outside(path));
                    }
                }
                Component::CurDir => {}
                other => lexical.push(other),
            }
        }
        if !lexical.starts_with(&self.root) {
            return Err(outside(path));
        }
        let mut existing = lexical.as_path();
        let mut rest = Vec::new();
        while !existing.exists() && existing.symlink_metadata().is_err() {
            match (existing.parent(), existing.file_name()) {
                (Some(parent), Some(name)) => {
                    rest.push(name.to_owned());
                    existing = parent;
                }
                _ => return Err(outside(path)),
            }
        }
        let mut resolved = existing
            .canonicalize()
            .map_err(|error| format!("{path}: {error}"))?;
        if !resolved.starts_with(&self.root) {
            return Err(outside(path));
        }
        for name in rest.into_iter().rev() {
            resolved.push(name);
        }
        Ok(resolved)
    }

    fn shown(&self, path: &Path) -> String {
        let relative = path.strip_prefix(&self.root).unwrap_or(path);
        let text = relative.to_string_lossy().into_owned();
        if text.is_empty() { ".".into() } else { text }
    }

    fn read_file(&self, input: &Value) -> Result<Value, String> {
        let path = self.resolve(text_arg(input, "path")?)?;
        let bytes = std::fs::read(&path).map_err(|error| io_message(&self.shown(&path), &error))?;
        let offset = usize_arg(input, "offset")?.unwrap_or(0).min(bytes.len());
        let limit = usize_arg(input, "limit")?
            .unwrap_or(MAX_READ_BYTES)
            .min(MAX_READ_BYTES);
        let end = offset.saturating_add(limit).min(bytes.len());
        Ok(json!({
            "path": self.shown(&path),
            "size": bytes.len(),
            "offset": offset,
            "content": String::from_utf8_lossy(&bytes[offset..end]),
            "truncated": end < bytes.len(),
        }))
    }

    fn list_files(&self, input: &Value) -> Result<Value, String> {
        let start = self.resolve(input.get("path").and_then(Value::as_str).unwrap_or("."))?;
        let depth = usize_arg(input, "max_depth")?
            .unwrap_or(MAX_DEPTH)
            .min(MAX_DEPTH);
        let mut entries = Vec::new();
        let mut truncated = false;
        self.walk(&start, depth, &mut |path, meta| {
            if entries.len() >= MAX_LIST_ENTRIES {
                truncated = true;
                return false;
            }
            let kind = if meta.is_dir() { "dir" } else { "file" };
            entries.push(json!({"path": self.shown(path), "type": kind, "size": meta.len()}));
            true
        })?;
        Ok(json!({"entries": entries, "truncated": truncated}))
    }

    /// Depth-first in name order; links are listed but never descended into.
    fn walk(
        &self,
        dir: &Path,
        depth: usize,
        visit: &mut dyn FnMut(&Path, &std::fs::Metadata) -> bool,
    ) -> Result<bool, String> {
        let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|error| io_message(&self.shown(dir), &error))?
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .collect();
        names.sort();
        for path in names {
            let Ok(meta) = path.symlink_metadata() else {
                continue;
            };
            if !visit(&path, &meta) {
                return Ok(false);
            }
            if meta.is_dir() && depth > 1 && !self.walk(&path, depth - 1, visit)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn search(&self, input: &Value) -> Result<Value, String> {
        let pattern = text_arg(input, "pattern")?;
        let regex = regex::RegexBuilder::new(pattern)
            .size_limit(1 << 20)
            .build()
            .map_err(|error| format!("invalid regex: {error}"))?;
        let start = self.resolve(input.get("path").and_then(Value::as_str).unwrap_or("."))?;
        let mut matches = Vec::new();
        let mut files = 0usize;
        let mut truncated = false;
        let mut search_file = |path: &Path, meta: &std::fs::Metadata| -> bool {
            if !meta.is_file() || meta.len() > MAX_SEARCH_FILE_BYTES {
                return true;
            }
            files += 1;
            if files > MAX_SEARCH_FILES {
                truncated = true;
                return false;
            }
            let Ok(bytes) = std::fs::read(path) else {
                return true;
            };
            // Binary files (a NUL in the first 8 KiB) are skipped, as grep does.
            if bytes.iter().take(8 << 10).any(|byte| *byte == 0) {
                return true;
            }
            let text = String::from_utf8_lossy(&bytes);
            for (number, line) in text.lines().enumerate() {
                if regex.is_match(line) {
                    if matches.len() >= MAX_MATCHES {
                        truncated = true;
                        return false;
                    }
                    let line: String = line.chars().take(MAX_LINE_CHARS).collect();
                    matches
                        .push(json!({"path": self.shown(path), "line": number + 1, "text": line}));
                }
            }
            true
        };
        if start.is_file() {
            let meta = start
                .metadata()
                .map_err(|error| io_message(&self.shown(&start), &error))?;
            search_file(&start, &meta);
        } else {
            self.walk(&start, MAX_DEPTH, &mut search_file)?;
        }
        Ok(json!({"matches": matches, "truncated": truncated}))
    }

    fn write_file(&self, input: &Value) -> Result<Value, String> {
        let path = self.resolve(text_arg(input, "path")?)?;
        let content = text_arg(input, "content")?;
        if content.len() > MAX_WRITE_BYTES {
            return Err(format!("content is over {MAX_WRITE_BYTES} bytes"));
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|error| io_message(&self.shown(parent), &error))?;
        }
        refuse_link(&path, &self.shown(&path))?;
        std::fs::write(&path, content).map_err(|error| io_message(&self.shown(&path), &error))?;
        Ok(json!({"path": self.shown(&path), "size": content.len()}))
    }

    fn edit(&self, input: &Value) -> Result<Value, String> {
        let path = self.resolve(text_arg(input, "path")?)?;
        let old = text_arg(input, "old_string")?;
        let new = text_arg(input, "new_string")?;
        let all = input
            .get("replace_all")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if old.is_empty() {
            return Err("old_string is empty".into());
        }
        let text = std::fs::read_to_string(&path)
            .map_err(|error| io_message(&self.shown(&path), &error))?;
        let count = text.matches(old).count();
        if count == 0 {
            return Err(format!("old_string was not found in {}", self.shown(&path)));
        }
        if count > 1 && !all {
            return Err(format!(
                "old_string occurs {count} times in {}; give more context or set replace_all",
                self.shown(&path)
            ));
        }
        let edited = if all {
            text.replace(old, new)
        } else {
            text.replacen(old, new, 1)
        };
        if edited.len() > MAX_WRITE_BYTES {
            return Err(format!("the edited file is over {MAX_WRITE_BYTES} bytes"));
        }
        std::fs::write(&path, &edited).map_err(|error| io_message(&self.shown(&path), &error))?;
        Ok(json!({"path": self.shown(&path), "replacements": if all { count } else { 1 }}))
    }
}

/// Writing goes to the canonical path already; a link created there since would be
/// followed by `write`, so one is refused.
fn refuse_link(path: &Path, shown: &str) -> Result<(), String> {
    match path.symlink_metadata() {
        Ok(meta) if meta.file_type().is_symlink() => {
            Err(format!("{shown} is a symbolic link; not written through"))
        }
        _ => Ok(()),
    }
}

fn outside(path: &str) -> String {
    format!("{path}: outside the root this tool may use")
}

fn io_message(shown: &str, error: &std::io::Error) -> String {
    format!("{shown}: {error}")
}

fn text_arg<'a>(input: &'a Value, name: &str) -> Result<&'a str, String> {
    input
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("`{name}` (a string) is required"))
}

fn usize_arg(input: &Value, name: &str) -> Result<Option<usize>, String> {
    match input.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .map(|n| Some(usize::try_from(n).unwrap_or(usize::MAX)))
            .ok_or_else(|| format!("`{name}` must be a non-negative integer")),
    }
}

impl ToolProvider for FsPack {
    fn call<'a>(&'a self, tool: &'a str, input: &'a Value) -> BoxFuture<'a, Result<Value, String>> {
        // Every operation is bounded (sizes, counts, depth), so it runs inline.
        Box::pin(async move {
            match tool {
                "read_file" => self.read_file(input),
                "list_files" => self.list_files(input),
                "search" => self.search(input),
                "write_file" if self.write => self.write_file(input),
                "edit" if self.write => self.edit(input),
                other => Err(format!("the fs pack has no tool `{other}`")),
            }
        })
    }
}

/// The pack's declarations (`fs_read_file`, …), for `server` (the provider's name).
pub(crate) fn declarations(write: bool) -> Vec<(&'static str, &'static str, Value)> {
    let mut tools = vec![
        (
            "read_file",
            "Read a text file under the root (at most 256 KiB per call; use offset/limit for more).",
            json!({"type": "object", "properties": {
                "path": {"type": "string", "description": "Path relative to the root"},
                "offset": {"type": "integer", "minimum": 0, "description": "Byte offset to start at"},
                "limit": {"type": "integer", "minimum": 1, "description": "Bytes to read at most"}
            }, "required": ["path"], "additionalProperties": false}),
        ),
        (
            "list_files",
            "List files and directories under a directory of the root, recursively (at most 1,000 entries).",
            json!({"type": "object", "properties": {
                "path": {"type": "string", "description": "Directory relative to the root (default: the root)"},
                "max_depth": {"type": "integer", "minimum": 1, "description": "Levels to descend (default 32)"}
            }, "additionalProperties": false}),
        ),
        (
            "search",
            "Search file contents under the root with a regular expression (Rust syntax); returns path, line number and line (at most 200 matches).",
            json!({"type": "object", "properties": {
                "pattern": {"type": "string", "description": "Regular expression"},
                "path": {"type": "string", "description": "File or directory relative to the root (default: the root)"}
            }, "required": ["pattern"], "additionalProperties": false}),
        ),
    ];
    if write {
        tools.push((
            "write_file",
            "Create or replace a text file under the root (parent directories are created).",
            json!({"type": "object", "properties": {
                "path": {"type": "string", "description": "Path relative to the root"},
                "content": {"type": "string", "description": "The whole new content"}
            }, "required": ["path", "content"], "additionalProperties": false}),
        ));
        tools.push((
            "edit",
            "Replace an exact string in a file under the root; it must occur once unless replace_all is set.",
            json!({"type": "object", "properties": {
                "path": {"type": "string", "description": "Path relative to the root"},
                "old_string": {"type": "string", "description": "Exact text to replace"},
                "new_string": {"type": "string", "description": "Replacement text"},
                "replace_all": {"type": "boolean", "description": "Replace every occurrence"}
            }, "required": ["path", "old_string", "new_string"], "additionalProperties": false}),
        ));
    }
    tools
}
