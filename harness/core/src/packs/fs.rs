//! The `fs` pack: read, list and search files under one root on the host, and (with
//! `write: true`) write and edit them. Every path resolves under the root after
//! canonicalisation — symbolic links are followed and the target checked — and every read
//! and result is size-capped.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
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
/// [`MAX_SEARCH_FILE_BYTES`] as a read length.
const MAX_SEARCH_FILE_LEN: usize = 1 << 20;
/// Files `fs_search` looks at at most.
const MAX_SEARCH_FILES: usize = 5_000;
/// Characters of a matching line that are returned.
const MAX_LINE_CHARS: usize = 300;
/// Bytes `fs_write_file` and `fs_edit` write at most.
const MAX_WRITE_BYTES: usize = 4 << 20;
/// Bytes of a file `fs_edit` reads at most: it writes the whole file back, so a file it
/// could not have written is not read into memory either.
const MAX_EDIT_FILE_BYTES: usize = MAX_WRITE_BYTES;
/// Entries of one directory `fs_list_files` and `fs_search` read at most: names are
/// sorted, so they are held in memory; a directory with more is reported as truncated.
const MAX_DIR_ENTRIES: usize = 100_000;
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
        let shown = self.shown(&path);
        let (mut file, size) = open_regular(&path, &shown)?;
        // Only the window asked for is read: a file of any size costs at most the limit.
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        let offset = usize_arg(input, "offset")?.unwrap_or(0).min(size);
        let limit = usize_arg(input, "limit")?
            .unwrap_or(MAX_READ_BYTES)
            .min(MAX_READ_BYTES);
        let bytes =
            read_at_most(&mut file, offset, limit).map_err(|error| io_message(&shown, &error))?;
        let end = offset.saturating_add(bytes.len());
        Ok(json!({
            "path": shown,
            "size": size,
            "offset": offset,
            "content": String::from_utf8_lossy(&bytes),
            "truncated": end < size,
        }))
    }

    fn list_files(&self, input: &Value) -> Result<Value, String> {
        let start = self.resolve(input.get("path").and_then(Value::as_str).unwrap_or("."))?;
        let depth = usize_arg(input, "max_depth")?
            .unwrap_or(MAX_DEPTH)
            .min(MAX_DEPTH);
        let mut entries = Vec::new();
        let mut truncated = false;
        let mut capped = false;
        self.walk(&start, depth, &mut capped, &mut |path, meta| {
            if entries.len() >= MAX_LIST_ENTRIES {
                truncated = true;
                return false;
            }
            let kind = if meta.is_dir() { "dir" } else { "file" };
            entries.push(json!({"path": self.shown(path), "type": kind, "size": meta.len()}));
            true
        })?;
        Ok(json!({"entries": entries, "truncated": truncated || capped}))
    }

    /// Depth-first in name order; links are listed but never descended into. A directory
    /// with more than [`MAX_DIR_ENTRIES`] entries is walked in part and sets `capped`.
    fn walk(
        &self,
        dir: &Path,
        depth: usize,
        capped: &mut bool,
        visit: &mut dyn FnMut(&Path, &std::fs::Metadata) -> bool,
    ) -> Result<bool, String> {
        let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|error| io_message(&self.shown(dir), &error))?
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .take(MAX_DIR_ENTRIES + 1)
            .collect();
        if names.len() > MAX_DIR_ENTRIES {
            names.truncate(MAX_DIR_ENTRIES);
            *capped = true;
        }
        names.sort();
        for path in names {
            let Ok(meta) = path.symlink_metadata() else {
                continue;
            };
            if !visit(&path, &meta) {
                return Ok(false);
            }
            if meta.is_dir() && depth > 1 && !self.walk(&path, depth - 1, capped, visit)? {
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
        let mut capped = false;
        let mut search_file = |path: &Path, meta: &std::fs::Metadata| -> bool {
            if !meta.is_file() || meta.len() > MAX_SEARCH_FILE_BYTES {
                return true;
            }
            files += 1;
            if files > MAX_SEARCH_FILES {
                truncated = true;
                return false;
            }
            // Bounded again when read: the file may have grown since it was measured.
            let bytes = match open_regular(path, "") {
                Ok((mut file, _)) => match read_at_most(&mut file, 0, MAX_SEARCH_FILE_LEN) {
                    Ok(bytes) => bytes,
                    Err(_) => return true,
                },
                Err(_) => return true,
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
            self.walk(&start, MAX_DEPTH, &mut capped, &mut search_file)?;
        }
        Ok(json!({"matches": matches, "truncated": truncated || capped}))
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
        let shown = self.shown(&path);
        let (mut file, size) = open_regular(&path, &shown)?;
        if size > MAX_EDIT_FILE_BYTES as u64 {
            return Err(format!(
                "{shown} is {size} bytes; fs_edit edits files of at most {MAX_EDIT_FILE_BYTES} bytes"
            ));
        }
        // One byte more than allowed tells a file that grew since it was measured.
        let bytes = read_at_most(&mut file, 0, MAX_EDIT_FILE_BYTES + 1)
            .map_err(|error| io_message(&shown, &error))?;
        if bytes.len() > MAX_EDIT_FILE_BYTES {
            return Err(format!(
                "{shown} is over {MAX_EDIT_FILE_BYTES} bytes; fs_edit edits files of at most that size"
            ));
        }
        let text = String::from_utf8(bytes)
            .map_err(|_| format!("{shown} is not UTF-8 text; fs_edit edits text files"))?;
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
        let replacements = if all { count } else { 1 };
        // The size is known before the result is built: many occurrences times a long
        // replacement must be refused, not allocated (it could reach terabytes).
        match edited_len(text.len(), old.len(), new.len(), replacements) {
            Some(len) if len <= MAX_WRITE_BYTES => {}
            len => {
                let len = len.map_or_else(
                    || "more than fits in memory".to_owned(),
                    |len| format!("{len} bytes"),
                );
                return Err(format!(
                    "the edited file would be {len} ({replacements} occurrence(s) of {} bytes \
                     replaced by {} bytes), over the {MAX_WRITE_BYTES}-byte limit of fs_edit; \
                     {shown} was not changed",
                    old.len(),
                    new.len()
                ));
            }
        }
        let edited = if all {
            text.replace(old, new)
        } else {
            text.replacen(old, new, 1)
        };
        refuse_link(&path, &shown)?;
        std::fs::write(&path, &edited).map_err(|error| io_message(&shown, &error))?;
        Ok(json!({"path": shown, "replacements": replacements}))
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

/// Length of a text of `len` bytes after `replacements` non-overlapping occurrences of
/// `old_len` bytes become `new_len` bytes; `None` when it does not fit in a `usize`.
fn edited_len(len: usize, old_len: usize, new_len: usize, replacements: usize) -> Option<usize> {
    len.checked_sub(replacements.checked_mul(old_len)?)?
        .checked_add(replacements.checked_mul(new_len)?)
}

/// `path` opened for reading, with its size, if it is a regular file: a FIFO or a device
/// would block the call or never end. Checked before opening (opening a FIFO blocks) and
/// again on the opened file.
fn open_regular(path: &Path, shown: &str) -> Result<(File, u64), String> {
    let not_regular = || format!("{shown} is not a regular file");
    let meta = path.metadata().map_err(|error| io_message(shown, &error))?;
    if !meta.is_file() {
        return Err(not_regular());
    }
    let file = File::open(path).map_err(|error| io_message(shown, &error))?;
    let meta = file.metadata().map_err(|error| io_message(shown, &error))?;
    if !meta.is_file() {
        return Err(not_regular());
    }
    Ok((file, meta.len()))
}

/// At most `max` bytes of `file` from byte `offset`, however large the file is (or has
/// grown to since it was measured).
fn read_at_most(file: &mut File, offset: usize, max: usize) -> std::io::Result<Vec<u8>> {
    file.seek(SeekFrom::Start(u64::try_from(offset).unwrap_or(u64::MAX)))?;
    let mut bytes = Vec::new();
    file.take(u64::try_from(max).unwrap_or(u64::MAX))
        .read_to_end(&mut bytes)?;
    Ok(bytes)
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
