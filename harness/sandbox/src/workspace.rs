//! A sandbox's workspace: an in-memory directory tree the guest sees at `/workspace`, with
//! quotas on its bytes and entries.
//!
//! It lives in the host's memory, never on its disk: a quota is checked before a byte is
//! stored, there is no host path a guest could reach through `..` or a symlink, and the
//! tree goes away with the last handle. The guest reaches it through the WASI preview 1
//! filesystem calls (`wasi_fs`); the host side (upload, download, listing) through
//! [`Workspace`]'s methods.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

/// The guest path of the workspace.
pub const GUEST_ROOT: &str = "/workspace";

/// Errors of the host-side workspace API.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WorkspaceError {
    /// The path is empty, absolute, has `..`, `.` or empty components, or a NUL byte.
    #[error("invalid workspace path `{0}`: use a relative path like `data/in.csv` without `..`")]
    InvalidPath(String),
    /// Nothing at that path.
    #[error("no file `{0}` in the workspace")]
    NotFound(String),
    /// The path names a directory where a file was expected, or a file on the way.
    #[error("`{0}` is a directory, or a file is in the way of it")]
    NotAFile(String),
    /// Storing it would exceed `workspace_bytes`.
    #[error("the workspace quota of {limit} bytes would be exceeded ({needed} bytes needed)")]
    QuotaBytes {
        /// The quota.
        limit: u64,
        /// Bytes the workspace would hold.
        needed: u64,
    },
    /// Storing it would exceed `workspace_files`.
    #[error("the workspace quota of {limit} files and directories would be exceeded")]
    QuotaFiles {
        /// The quota.
        limit: u64,
    },
}

/// One file of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntry {
    /// Relative path (`dir/name.csv`).
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// Last modification, in nanoseconds since the Unix epoch.
    pub modified_ns: u64,
}

/// The workspace's quotas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    /// Bytes of file contents.
    pub bytes: u64,
    /// Files and directories (the root not counted).
    pub files: u64,
}

pub(crate) const ROOT: u64 = 1;

pub(crate) enum Kind {
    File(Vec<u8>),
    Dir(BTreeMap<String, u64>),
}

pub(crate) struct Node {
    pub(crate) kind: Kind,
    pub(crate) parent: u64,
    pub(crate) modified_ns: u64,
    pub(crate) accessed_ns: u64,
}

impl Node {
    pub(crate) fn size(&self) -> u64 {
        match &self.kind {
            Kind::File(data) => data.len() as u64,
            Kind::Dir(entries) => entries.len() as u64,
        }
    }
}

/// WASI preview 1 error numbers the filesystem answers with.
pub(crate) mod errno {
    pub(crate) const BADF: u16 = 8;
    pub(crate) const DQUOT: u16 = 19;
    pub(crate) const EXIST: u16 = 20;
    pub(crate) const FBIG: u16 = 22;
    pub(crate) const INVAL: u16 = 28;
    pub(crate) const ISDIR: u16 = 31;
    pub(crate) const NAMETOOLONG: u16 = 37;
    pub(crate) const NOENT: u16 = 44;
    pub(crate) const NOSPC: u16 = 51;
    pub(crate) const NOTDIR: u16 = 54;
    pub(crate) const NOTEMPTY: u16 = 55;
    pub(crate) const NOTSUP: u16 = 58;
    pub(crate) const OVERFLOW: u16 = 61;
    pub(crate) const PERM: u16 = 63;
    pub(crate) const ROFS: u16 = 69;
    pub(crate) const SPIPE: u16 = 70;
    pub(crate) const NOTCAPABLE: u16 = 76;
}

pub(crate) type Errno = u16;

/// Longest name of one path component, as most filesystems.
pub(crate) const MAX_NAME: usize = 255;
/// Deepest nesting of directories. Paths this deep already exceed Linux's `PATH_MAX`
/// (4096) at 32 characters a level; it keeps listings and removals linear.
pub(crate) const MAX_DEPTH: usize = 128;
/// The largest file position or size: WASI's `filesize` is unsigned, but every guest libc
/// holds it in a signed `off_t`, and a host `Vec` cannot be longer either.
pub(crate) const MAX_OFFSET: u64 = i64::MAX as u64;
/// The times every node of a frozen tree shows: 1980-01-01, the earliest a zip entry can
/// carry (so a guest may archive these files). Fixed, so they say nothing about when the
/// image was loaded or who else read them.
pub(crate) const FROZEN_NS: u64 = 315_532_800 * 1_000_000_000;

pub(crate) fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Sets a file's length to `len` (at most [`MAX_OFFSET`]) without letting its buffer hold
/// much more than the quota lets the file grow to (`room`): growth is amortised up to
/// there, a shrink gives the memory back (else writing and truncating many files would
/// keep far more host memory than the quota), and an allocation the host cannot make is
/// `ENOSPC`, never an abort.
fn resize_within(data: &mut Vec<u8>, len: u64, room: u64) -> Result<(), Errno> {
    let len = usize::try_from(len).map_err(|_| errno::FBIG)?;
    if len > data.capacity() {
        let room = usize::try_from(room).unwrap_or(usize::MAX);
        let target = data.capacity().saturating_mul(2).min(room).max(len);
        data.try_reserve_exact(target - data.len())
            .map_err(|_| errno::NOSPC)?;
    }
    data.resize(len, 0);
    if data.capacity() / 2 > len {
        data.shrink_to(len);
    }
    Ok(())
}

/// The tree behind a [`Workspace`].
pub(crate) struct Tree {
    pub(crate) nodes: HashMap<u64, Node>,
    pub(crate) next_ino: u64,
    pub(crate) bytes: u64,
    pub(crate) entries: u64,
    pub(crate) quota: Quota,
    /// Shared by instances (a runtime's files): nothing may change, not even an access
    /// time, or one sandbox could signal another through it.
    frozen: bool,
}

impl Tree {
    pub(crate) fn new(quota: Quota) -> Self {
        let mut nodes = HashMap::new();
        let now = now_ns();
        nodes.insert(
            ROOT,
            Node {
                kind: Kind::Dir(BTreeMap::new()),
                parent: ROOT,
                modified_ns: now,
                accessed_ns: now,
            },
        );
        Tree {
            nodes,
            next_ino: ROOT + 1,
            bytes: 0,
            entries: 0,
            quota,
            frozen: false,
        }
    }

    pub(crate) fn node(&self, ino: u64) -> Result<&Node, Errno> {
        self.nodes.get(&ino).ok_or(errno::BADF)
    }

    /// A node to change: every change goes through here, so a frozen tree refuses them all.
    pub(crate) fn node_mut(&mut self, ino: u64) -> Result<&mut Node, Errno> {
        if self.frozen {
            return Err(errno::ROFS);
        }
        self.nodes.get_mut(&ino).ok_or(errno::BADF)
    }

    /// Records a read of `ino` (its access time), unless the tree is frozen.
    pub(crate) fn touch(&mut self, ino: u64) {
        if let Ok(node) = self.node_mut(ino) {
            node.accessed_ns = now_ns();
        }
    }

    fn lookup(&self, dir: u64, name: &str) -> Result<u64, Errno> {
        match &self.node(dir)?.kind {
            Kind::Dir(entries) => entries.get(name).copied().ok_or(errno::NOENT),
            Kind::File(_) => Err(errno::NOTDIR),
        }
    }

    /// Walks `path` from `base`: the parent directory and the last name (`None` when the
    /// path names the base or the root itself). `..` stops at the workspace root: a path
    /// that climbs above it is refused rather than clamped, so nothing looks like it
    /// reached the host.
    pub(crate) fn walk_parent<'p>(
        &self,
        base: u64,
        path: &'p str,
    ) -> Result<(u64, Option<&'p str>), Errno> {
        if path.is_empty() {
            return Err(errno::NOENT);
        }
        if path.starts_with('/') {
            return Err(errno::NOTCAPABLE);
        }
        let parts: Vec<&str> = path
            .split('/')
            .filter(|part| !part.is_empty() && *part != ".")
            .collect();
        let mut dir = base;
        let Some((last, init)) = parts.split_last() else {
            return Ok((base, None));
        };
        for part in init {
            dir = self.step(dir, part)?;
        }
        if *last == ".." {
            return Ok((self.step(dir, last)?, None));
        }
        if last.len() > MAX_NAME {
            return Err(errno::NAMETOOLONG);
        }
        match &self.node(dir)?.kind {
            Kind::Dir(_) => Ok((dir, Some(last))),
            Kind::File(_) => Err(errno::NOTDIR),
        }
    }

    fn step(&self, dir: u64, part: &str) -> Result<u64, Errno> {
        if part == ".." {
            if dir == ROOT {
                return Err(errno::NOTCAPABLE);
            }
            return Ok(self.node(dir)?.parent);
        }
        let next = self.lookup(dir, part)?;
        match &self.node(next)?.kind {
            Kind::Dir(_) => Ok(next),
            Kind::File(_) => Err(errno::NOTDIR),
        }
    }

    /// The node `path` names from `base`.
    pub(crate) fn resolve(&self, base: u64, path: &str) -> Result<u64, Errno> {
        let (dir, name) = self.walk_parent(base, path)?;
        let ino = match name {
            Some(name) => self.lookup(dir, name)?,
            None => dir,
        };
        if path.ends_with('/') && !matches!(self.node(ino)?.kind, Kind::Dir(_)) {
            return Err(errno::NOTDIR);
        }
        Ok(ino)
    }

    /// How many directories down `ino` is (the root is 0).
    fn depth(&self, mut ino: u64) -> usize {
        let mut depth = 0;
        while ino != ROOT && depth <= MAX_DEPTH {
            let Some(node) = self.nodes.get(&ino) else {
                break;
            };
            ino = node.parent;
            depth += 1;
        }
        depth
    }

    /// How many levels are below `ino` (0 for a file or an empty directory).
    fn height(&self, ino: u64) -> usize {
        let mut deepest = 0;
        let mut pending = vec![(ino, 0usize)];
        while let Some((at, level)) = pending.pop() {
            deepest = deepest.max(level);
            if let Some(Node {
                kind: Kind::Dir(entries),
                ..
            }) = self.nodes.get(&at)
            {
                pending.extend(entries.values().map(|child| (*child, level + 1)));
            }
        }
        deepest
    }

    /// Adds a node named `name` in `dir`, within the entry quota and [`MAX_DEPTH`].
    pub(crate) fn create(&mut self, dir: u64, name: &str, kind: Kind) -> Result<u64, Errno> {
        if self.entries + 1 > self.quota.files {
            return Err(errno::DQUOT);
        }
        if self.depth(dir) + 1 > MAX_DEPTH {
            return Err(errno::NAMETOOLONG);
        }
        let ino = self.next_ino;
        let now = now_ns();
        let parent = self.node_mut(dir)?;
        match &mut parent.kind {
            Kind::Dir(entries) => {
                if entries.contains_key(name) {
                    return Err(errno::EXIST);
                }
                entries.insert(name.to_owned(), ino);
            }
            Kind::File(_) => return Err(errno::NOTDIR),
        }
        parent.modified_ns = now;
        // Numbered only once it exists: a refused create leaves no trace.
        self.next_ino += 1;
        self.nodes.insert(
            ino,
            Node {
                kind,
                parent: dir,
                modified_ns: now,
                accessed_ns: now,
            },
        );
        self.entries += 1;
        Ok(ino)
    }

    /// Removes `name` from `dir` (a file, or an empty directory when `dir_wanted`).
    pub(crate) fn remove(&mut self, dir: u64, name: &str, dir_wanted: bool) -> Result<(), Errno> {
        let ino = self.lookup(dir, name)?;
        match (&self.node(ino)?.kind, dir_wanted) {
            (Kind::Dir(entries), true) if !entries.is_empty() => return Err(errno::NOTEMPTY),
            (Kind::Dir(_), false) => return Err(errno::ISDIR),
            (Kind::File(_), true) => return Err(errno::NOTDIR),
            _ => {}
        }
        self.detach(dir, name)?;
        self.drop_node(ino);
        Ok(())
    }

    fn detach(&mut self, dir: u64, name: &str) -> Result<u64, Errno> {
        let parent = self.node_mut(dir)?;
        parent.modified_ns = now_ns();
        match &mut parent.kind {
            Kind::Dir(entries) => entries.remove(name).ok_or(errno::NOENT),
            Kind::File(_) => Err(errno::NOTDIR),
        }
    }

    /// Removes `ino` and everything below it. Iterative: a guest may nest directories as
    /// deep as its entry quota allows, deeper than the host's stack.
    fn drop_node(&mut self, ino: u64) {
        let mut pending = vec![ino];
        while let Some(ino) = pending.pop() {
            if let Some(node) = self.nodes.remove(&ino) {
                self.entries = self.entries.saturating_sub(1);
                match node.kind {
                    Kind::File(data) => {
                        self.bytes = self.bytes.saturating_sub(data.len() as u64);
                    }
                    Kind::Dir(entries) => pending.extend(entries.into_values()),
                }
            }
        }
    }

    /// Moves `from_dir/from` to `to_dir/to`, replacing a file (or an empty directory, by a
    /// directory) that is there.
    pub(crate) fn rename(
        &mut self,
        from_dir: u64,
        from: &str,
        to_dir: u64,
        to: &str,
    ) -> Result<(), Errno> {
        let ino = self.lookup(from_dir, from)?;
        let moving_dir = matches!(self.node(ino)?.kind, Kind::Dir(_));
        if moving_dir {
            // A directory cannot move into itself or below itself.
            let mut at = to_dir;
            loop {
                if at == ino {
                    return Err(errno::INVAL);
                }
                if at == ROOT {
                    break;
                }
                at = self.node(at)?.parent;
            }
        }
        if self.depth(to_dir) + 1 + self.height(ino) > MAX_DEPTH {
            return Err(errno::NAMETOOLONG);
        }
        if let Ok(existing) = self.lookup(to_dir, to) {
            if existing == ino {
                return Ok(());
            }
            match (&self.node(existing)?.kind, moving_dir) {
                (Kind::Dir(entries), true) if !entries.is_empty() => {
                    return Err(errno::NOTEMPTY);
                }
                (Kind::Dir(_), false) => return Err(errno::ISDIR),
                (Kind::File(_), true) => return Err(errno::NOTDIR),
                _ => {}
            }
            self.detach(to_dir, to)?;
            self.drop_node(existing);
        }
        self.detach(from_dir, from)?;
        let target = self.node_mut(to_dir)?;
        target.modified_ns = now_ns();
        match &mut target.kind {
            Kind::Dir(entries) => {
                entries.insert(to.to_owned(), ino);
            }
            Kind::File(_) => return Err(errno::NOTDIR),
        }
        self.node_mut(ino)?.parent = to_dir;
        Ok(())
    }

    /// Sets a file's length, within the byte quota.
    pub(crate) fn set_len(&mut self, ino: u64, len: u64) -> Result<(), Errno> {
        if len > MAX_OFFSET {
            return Err(errno::FBIG);
        }
        let old = self.node(ino)?.size();
        let others = self.bytes - old.min(self.bytes);
        let new_total = others.checked_add(len).ok_or(errno::NOSPC)?;
        if len > old && new_total > self.quota.bytes {
            return Err(errno::NOSPC);
        }
        let room = self.quota.bytes.saturating_sub(others);
        match &mut self.node_mut(ino)?.kind {
            Kind::File(data) => resize_within(data, len, room)?,
            Kind::Dir(_) => return Err(errno::ISDIR),
        }
        self.bytes = new_total;
        self.node_mut(ino)?.modified_ns = now_ns();
        Ok(())
    }

    /// Writes `parts`, one after another, at `offset` (zero-filling a gap), within the byte
    /// quota: a write that does not fit whole stores nothing. Returns where it ended. The
    /// offset comes from the guest: every sum is checked, and a file never passes
    /// [`MAX_OFFSET`] (`EFBIG`, as POSIX's `write` at the offset maximum).
    pub(crate) fn write_at(
        &mut self,
        ino: u64,
        offset: u64,
        parts: &[&[u8]],
    ) -> Result<u64, Errno> {
        let len = parts
            .iter()
            .try_fold(0u64, |sum, part| sum.checked_add(part.len() as u64))
            .ok_or(errno::FBIG)?;
        let old = self.node(ino)?.size();
        if len == 0 {
            // Writing nothing changes nothing (POSIX), wherever the position is.
            return Ok(offset);
        }
        let end = offset
            .checked_add(len)
            .filter(|end| *end <= MAX_OFFSET)
            .ok_or(errno::FBIG)?;
        let others = self.bytes - old.min(self.bytes);
        let new_total = others
            .checked_add(end.max(old))
            .filter(|total| end <= old || *total <= self.quota.bytes)
            .ok_or(errno::NOSPC)?;
        let room = self.quota.bytes.saturating_sub(others);
        let node = self.node_mut(ino)?;
        let Kind::File(data) = &mut node.kind else {
            return Err(errno::ISDIR);
        };
        if end > old {
            resize_within(data, end, room)?;
        }
        let mut at = usize::try_from(offset).map_err(|_| errno::FBIG)?;
        for part in parts {
            data[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        node.modified_ns = now_ns();
        self.bytes = new_total;
        Ok(end)
    }

    /// Creates the directories of `parts` (all but the last) and returns the last one's
    /// parent, for the host API.
    fn make_parents(&mut self, parts: &[&str]) -> Result<u64, WorkspaceError> {
        let mut dir = ROOT;
        let Some((_, init)) = parts.split_last() else {
            return Ok(ROOT);
        };
        for (index, part) in init.iter().enumerate() {
            dir = match self.lookup(dir, part) {
                Ok(next) if matches!(self.node(next).map(|n| &n.kind), Ok(Kind::Dir(_))) => next,
                Ok(_) => return Err(WorkspaceError::NotAFile(init[..=index].join("/"))),
                Err(_) => self
                    .create(dir, part, Kind::Dir(BTreeMap::new()))
                    .map_err(|_| WorkspaceError::QuotaFiles {
                        limit: self.quota.files,
                    })?,
            };
        }
        Ok(dir)
    }

    /// Every file below `dir`, depth first in name order (iterative, as `drop_node`).
    fn collect(&self, dir: u64, out: &mut Vec<FileEntry>) {
        // (directory, its path, entries of it still to visit in reverse name order)
        let mut stack: Vec<(String, Vec<(&String, u64)>)> = Vec::new();
        let children = |ino: u64| -> Vec<(&String, u64)> {
            match self.nodes.get(&ino).map(|node| &node.kind) {
                Some(Kind::Dir(entries)) => entries.iter().rev().map(|(n, i)| (n, *i)).collect(),
                _ => Vec::new(),
            }
        };
        stack.push((String::new(), children(dir)));
        while let Some((prefix, mut rest)) = stack.pop() {
            let Some((name, ino)) = rest.pop() else {
                continue;
            };
            let path = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}/{name}")
            };
            let node = self.nodes.get(&ino);
            stack.push((prefix, rest));
            match node.map(|node| (&node.kind, node.modified_ns)) {
                Some((Kind::File(data), modified_ns)) => out.push(FileEntry {
                    path,
                    size: data.len() as u64,
                    modified_ns,
                }),
                Some((Kind::Dir(_), _)) => stack.push((path, children(ino))),
                None => {}
            }
        }
    }
}

/// A workspace: cheap to clone, every clone is the same tree. Safe to use from the host
/// while an execution runs (each operation takes a short lock).
#[derive(Clone)]
pub struct Workspace {
    tree: Arc<Mutex<Tree>>,
}

impl std::fmt::Debug for Workspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tree = self.lock();
        f.debug_struct("Workspace")
            .field("bytes", &tree.bytes)
            .field("entries", &tree.entries)
            .field("quota", &tree.quota)
            .finish()
    }
}

/// Splits a host-API path into components, refusing anything but plain relative names.
pub fn split_path(path: &str) -> Result<Vec<&str>, WorkspaceError> {
    let invalid = || WorkspaceError::InvalidPath(path.to_owned());
    if path.is_empty() || path.starts_with('/') || path.contains('\0') || path.contains('\\') {
        return Err(invalid());
    }
    let parts: Vec<&str> = path.split('/').collect();
    if parts.len() > MAX_DEPTH
        || parts
            .iter()
            .any(|part| part.is_empty() || *part == "." || *part == ".." || part.len() > MAX_NAME)
    {
        return Err(invalid());
    }
    Ok(parts)
}

impl Workspace {
    /// An empty workspace with these quotas.
    pub fn new(quota: Quota) -> Self {
        Workspace {
            tree: Arc::new(Mutex::new(Tree::new(quota))),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Tree> {
        // A panic while holding the lock leaves a consistent tree (every operation checks
        // before it changes anything), so a poisoned lock is still usable.
        self.tree
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Makes the tree read-only for good, every time fixed at [`FROZEN_NS`]: for trees
    /// shared by instances (a runtime's files), in which no guest may leave a trace.
    pub(crate) fn freeze(&self) {
        let mut tree = self.lock();
        for node in tree.nodes.values_mut() {
            node.modified_ns = FROZEN_NS;
            node.accessed_ns = FROZEN_NS;
        }
        tree.frozen = true;
    }

    /// Whether `other` is a handle to the same tree.
    pub fn same_tree(&self, other: &Workspace) -> bool {
        Arc::ptr_eq(&self.tree, &other.tree)
    }

    /// The quotas.
    pub fn quota(&self) -> Quota {
        self.lock().quota
    }

    /// Changes the quotas (what is stored already stays, even over a lowered quota).
    pub fn set_quota(&self, quota: Quota) {
        self.lock().quota = quota;
    }

    /// Bytes stored and entries (files and directories) used.
    pub fn usage(&self) -> (u64, u64) {
        let tree = self.lock();
        (tree.bytes, tree.entries)
    }

    /// Stores `bytes` at `path` (a relative path; missing directories are created),
    /// replacing a file that is there. Fails without changing anything when a quota would
    /// be exceeded.
    pub fn write(&self, path: &str, bytes: &[u8]) -> Result<(), WorkspaceError> {
        let parts = split_path(path)?;
        let mut tree = self.lock();
        let quota = tree.quota;
        // Check both quotas before creating anything.
        let mut dir = ROOT;
        let mut new_entries = 0u64;
        let mut existing = None;
        for (index, part) in parts.iter().enumerate() {
            match tree.lookup(dir, part) {
                Ok(ino) => {
                    let is_dir = matches!(tree.node(ino).map(|n| &n.kind), Ok(Kind::Dir(_)));
                    let last = index + 1 == parts.len();
                    if is_dir == last {
                        return Err(WorkspaceError::NotAFile(parts[..=index].join("/")));
                    }
                    if last {
                        existing = Some(ino);
                    }
                    dir = ino;
                }
                Err(_) => {
                    new_entries = (parts.len() - index) as u64;
                    break;
                }
            }
        }
        let old = existing
            .and_then(|ino| tree.node(ino).ok())
            .map_or(0, Node::size);
        let needed = tree.bytes - old.min(tree.bytes) + bytes.len() as u64;
        if needed > quota.bytes {
            return Err(WorkspaceError::QuotaBytes {
                limit: quota.bytes,
                needed,
            });
        }
        if tree.entries + new_entries > quota.files {
            return Err(WorkspaceError::QuotaFiles { limit: quota.files });
        }
        let ino = match existing {
            Some(ino) => ino,
            None => {
                let parent = tree.make_parents(&parts)?;
                let name = parts.last().copied().unwrap_or_default();
                tree.create(parent, name, Kind::File(Vec::new()))
                    .map_err(|_| WorkspaceError::QuotaFiles { limit: quota.files })?
            }
        };
        let node = tree
            .node_mut(ino)
            .map_err(|_| WorkspaceError::NotFound(path.to_owned()))?;
        node.kind = Kind::File(bytes.to_vec());
        node.modified_ns = now_ns();
        tree.bytes = needed;
        Ok(())
    }

    fn find(&self, tree: &Tree, path: &str) -> Result<u64, WorkspaceError> {
        let parts = split_path(path)?;
        let mut at = ROOT;
        for part in parts {
            at = tree
                .lookup(at, part)
                .map_err(|_| WorkspaceError::NotFound(path.to_owned()))?;
        }
        Ok(at)
    }

    /// The contents of the file at `path`.
    pub fn read(&self, path: &str) -> Result<Vec<u8>, WorkspaceError> {
        let tree = self.lock();
        let ino = self.find(&tree, path)?;
        match tree.node(ino).map(|node| &node.kind) {
            Ok(Kind::File(data)) => Ok(data.clone()),
            _ => Err(WorkspaceError::NotAFile(path.to_owned())),
        }
    }

    /// Deletes the file (or the directory, with everything in it) at `path`.
    pub fn remove(&self, path: &str) -> Result<(), WorkspaceError> {
        let mut tree = self.lock();
        let ino = self.find(&tree, path)?;
        let parent = tree
            .node(ino)
            .map(|node| node.parent)
            .map_err(|_| WorkspaceError::NotFound(path.to_owned()))?;
        let name = path.rsplit('/').next().unwrap_or(path);
        tree.detach(parent, name)
            .map_err(|_| WorkspaceError::NotFound(path.to_owned()))?;
        tree.drop_node(ino);
        Ok(())
    }

    /// Every file (not directory), depth first in name order.
    pub fn list(&self) -> Vec<FileEntry> {
        let tree = self.lock();
        let mut out = Vec::new();
        tree.collect(ROOT, &mut out);
        out
    }
}

#[cfg(test)]
mod tests;
