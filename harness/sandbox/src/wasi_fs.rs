//! The WASI preview 1 filesystem of a guest, served from its [`Workspace`] (in memory).
//!
//! These host functions replace (shadow) wasmtime-wasi's descriptor and path functions on
//! the sandbox's linker, so every file descriptor a guest holds is one of ours: 0–2 are the
//! standard streams (stdout and stderr into the output meter, stdin empty), then the
//! guest's runtime mounts when its image has any (the CPython guest's standard library,
//! read-only, served from memory like the workspace), then the workspace root preopened
//! as `/workspace` when the execution has a workspace, and the rest are files and
//! directories opened in them. The rest of WASI (clocks, random, `poll_oneoff`, sockets —
//! disabled) stays wasmtime-wasi's.
//!
//! Escapes are refused the way WASI refuses them: `..` above the root and absolute paths
//! give `ENOTCAPABLE`, symbolic and hard links cannot be made (`EPERM`), quotas give
//! `ENOSPC` (bytes) and `EDQUOT` (files and directories), positions past a signed `off_t`
//! `EOVERFLOW` (seeks) and `EFBIG` (writes). Guests see these as `OSError`. The runtime
//! mounts every instance shares are frozen: reading them moves no time, so one sandbox
//! cannot see what another read.

mod iovec;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::sync::Arc;

use cordon_protocol::execution::Stream;
use wasmtime::{Caller, Linker};

use crate::host::{self, HostState};
use crate::meter::Meter;
use crate::workspace::{
    Errno, GUEST_ROOT, Kind, MAX_DEPTH, MAX_OFFSET, Node, Quota, ROOT, Tree, Workspace, errno,
    now_ns,
};

const WASI: &str = "wasi_snapshot_preview1";
const FAULT: Errno = 21;
const ILSEQ: Errno = 25;
const MFILE: Errno = 33;
const ROFS: Errno = errno::ROFS;
const XDEV: Errno = 75;
/// The first preopened directory.
const PREOPEN_FD: u32 = 3;
/// Open descriptors per instance.
const MAX_FDS: usize = 1024;

mod rights {
    pub(super) const FD_READ: u64 = 1 << 1;
    pub(super) const FD_WRITE: u64 = 1 << 6;
    /// What wasmtime-wasi grants a preopened directory (many userlands expect exactly it).
    pub(super) const DIR_BASE: u64 = (1 << 9)
        | (1 << 10)
        | (1 << 11)
        | (1 << 12)
        | (1 << 13)
        | (1 << 14)
        | (1 << 15)
        | (1 << 16)
        | (1 << 17)
        | (1 << 24)
        | (1 << 25)
        | (1 << 26)
        | (1 << 18)
        | (1 << 20)
        | (1 << 21)
        | (1 << 23);
    /// What files opened from a directory may have.
    pub(super) const FILE_ALL: u64 = (1 << 0)
        | (1 << 1)
        | (1 << 2)
        | (1 << 3)
        | (1 << 4)
        | (1 << 5)
        | (1 << 6)
        | (1 << 7)
        | (1 << 8)
        | (1 << 21)
        | (1 << 22)
        | (1 << 23)
        | (1 << 27);
}

const FILETYPE_UNKNOWN: u8 = 0;
const FILETYPE_DIRECTORY: u8 = 3;
const FILETYPE_REGULAR: u8 = 4;
const FDFLAG_APPEND: u16 = 1;
const OFLAG_CREAT: u16 = 1;
const OFLAG_DIRECTORY: u16 = 2;
const OFLAG_EXCL: u16 = 4;
const OFLAG_TRUNC: u16 = 8;
const FST_ATIM: u16 = 1;
const FST_ATIM_NOW: u16 = 2;
const FST_MTIM: u16 = 4;
const FST_MTIM_NOW: u16 = 8;

/// Which tree a descriptor points into.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Source {
    /// The execution's workspace.
    Workspace,
    /// One of the image's runtime mounts, by index.
    Runtime(usize),
}

/// A directory tree an image preopens for its own runtime (e.g. a standard library), in
/// front of the workspace. Shared by every instance of the image.
#[derive(Clone, Debug)]
pub(crate) struct Mount {
    /// Where the guest sees it.
    pub(crate) guest_path: String,
    /// Its files.
    pub(crate) tree: Workspace,
    /// Whether the guest may change it.
    pub(crate) writable: bool,
    /// A scratch folder (`/tmp`): each instance gets an empty one of its own, writable and
    /// held to the quotas of the execution running in it.
    pub(crate) scratch: bool,
}

/// `mounts` for one instance: every scratch folder replaced by an empty writable one of
/// its own (its quota is set by each execution); the other trees are shared.
pub(crate) fn instance_mounts(mounts: &[Mount]) -> Arc<[Mount]> {
    mounts
        .iter()
        .map(|mount| Mount {
            guest_path: mount.guest_path.clone(),
            tree: if mount.scratch {
                Workspace::new(Quota { bytes: 0, files: 0 })
            } else {
                mount.tree.clone()
            },
            writable: mount.writable || mount.scratch,
            scratch: mount.scratch,
        })
        .collect()
}

struct Open {
    source: Source,
    ino: u64,
    dir: bool,
    read: bool,
    write: bool,
    append: bool,
    pos: u64,
    rights_base: u64,
    rights_inheriting: u64,
}

/// The descriptors of one instance and the workspace they point into.
#[derive(Default)]
pub(crate) struct FsState {
    workspace: Option<Workspace>,
    /// The image's runtime mounts, preopened at fds 3, 4, … before the workspace.
    mounts: Arc<[Mount]>,
    /// An image with runtime mounts always has a `/workspace` preopen (its preopen table
    /// is part of its snapshot): without a workspace it is this empty, read-only one.
    placeholder: Option<Workspace>,
    fds: HashMap<u32, Open>,
}

impl FsState {
    /// Gives the instance `workspace` for its next execution (or none). An instance keeps
    /// its descriptors across a session's executions; it only ever sees one workspace.
    pub(crate) fn attach(&mut self, workspace: Option<Workspace>) {
        let workspace = match workspace {
            None if !self.mounts.is_empty() => Some(
                self.placeholder
                    .get_or_insert_with(|| {
                        Workspace::new(crate::workspace::Quota { bytes: 0, files: 0 })
                    })
                    .clone(),
            ),
            other => other,
        };
        let same = match (&self.workspace, &workspace) {
            (Some(old), Some(new)) => old.same_tree(new),
            (None, None) => true,
            _ => false,
        };
        if !same {
            self.fds.clear();
        }
        for index in 0..self.mounts.len() {
            self.fds
                .entry(PREOPEN_FD + index as u32)
                .or_insert_with(|| Open::root(Source::Runtime(index)));
        }
        if workspace.is_some() {
            self.fds
                .entry(self.workspace_fd())
                .or_insert_with(|| Open::root(Source::Workspace));
        }
        self.workspace = workspace;
    }

    /// Gives the instance its image's runtime mounts (before its first execution).
    pub(crate) fn set_mounts(&mut self, mounts: Arc<[Mount]>) {
        self.mounts = mounts;
        self.fds.clear();
        self.workspace = None;
        self.attach(None);
    }

    /// Holds this instance's scratch folders to `quota` (each execution sets its own).
    pub(crate) fn set_scratch_quota(&self, quota: Quota) {
        for mount in self.mounts.iter().filter(|mount| mount.scratch) {
            mount.tree.set_quota(quota);
        }
    }

    /// How many descriptors are open (preopens included).
    pub(crate) fn descriptors(&self) -> usize {
        self.fds.len()
    }

    /// The workspace root's descriptor: right after the runtime mounts.
    fn workspace_fd(&self) -> u32 {
        PREOPEN_FD + self.mounts.len() as u32
    }

    /// The guest path of a preopened descriptor.
    fn preopen_path(&self, fd: i32) -> Option<&str> {
        let index = usize::try_from(fd).ok()?.checked_sub(PREOPEN_FD as usize)?;
        if !self.fds.contains_key(&u32::try_from(fd).ok()?) {
            return None;
        }
        match self.mounts.get(index) {
            Some(mount) => Some(&mount.guest_path),
            None if index == self.mounts.len() && self.workspace.is_some() => Some(GUEST_ROOT),
            None => None,
        }
    }

    fn writable(&self, source: Source) -> bool {
        match source {
            // The placeholder of an execution without a workspace is read-only.
            Source::Workspace => !matches!(
                (&self.workspace, &self.placeholder),
                (Some(workspace), Some(placeholder)) if workspace.same_tree(placeholder)
            ),
            Source::Runtime(index) => self.mounts.get(index).is_some_and(|mount| mount.writable),
        }
    }

    fn open(&self, fd: i32) -> Result<&Open, Errno> {
        u32::try_from(fd)
            .ok()
            .and_then(|fd| self.fds.get(&fd))
            .ok_or(errno::BADF)
    }

    fn open_mut(&mut self, fd: i32) -> Result<&mut Open, Errno> {
        u32::try_from(fd)
            .ok()
            .and_then(|fd| self.fds.get_mut(&fd))
            .ok_or(errno::BADF)
    }

    fn tree(&self, source: Source) -> Result<std::sync::MutexGuard<'_, Tree>, Errno> {
        match source {
            Source::Workspace => self
                .workspace
                .as_ref()
                .map(Workspace::lock)
                .ok_or(errno::BADF),
            Source::Runtime(index) => self
                .mounts
                .get(index)
                .map(|mount| mount.tree.lock())
                .ok_or(errno::BADF),
        }
    }

    /// The tree behind a descriptor, for reading.
    fn tree_of(&self, fd: i32) -> Result<std::sync::MutexGuard<'_, Tree>, Errno> {
        self.tree(self.open(fd)?.source)
    }

    /// The tree behind a descriptor, for changing it (`EROFS` on a read-only mount).
    fn tree_to_change(&self, fd: i32) -> Result<std::sync::MutexGuard<'_, Tree>, Errno> {
        let source = self.open(fd)?.source;
        if !self.writable(source) {
            return Err(ROFS);
        }
        self.tree(source)
    }

    fn insert(&mut self, open: Open) -> Result<u32, Errno> {
        if self.fds.len() >= MAX_FDS {
            return Err(MFILE);
        }
        let fd = (PREOPEN_FD..)
            .find(|fd| !self.fds.contains_key(fd))
            .ok_or(MFILE)?;
        self.fds.insert(fd, open);
        Ok(fd)
    }

    /// A directory descriptor's inode (for `path_*` calls).
    fn dir_fd(&self, fd: i32) -> Result<u64, Errno> {
        let open = self.open(fd)?;
        if open.dir {
            Ok(open.ino)
        } else {
            Err(errno::NOTDIR)
        }
    }
}

impl Open {
    /// A preopened root directory.
    fn root(source: Source) -> Open {
        Open {
            source,
            ino: ROOT,
            dir: true,
            read: true,
            write: false,
            append: false,
            pos: 0,
            rights_base: rights::DIR_BASE,
            rights_inheriting: rights::DIR_BASE | rights::FILE_ALL,
        }
    }
}

fn is_stdio(fd: i32) -> bool {
    (0..=2).contains(&fd)
}

// ---- guest memory ----------------------------------------------------------------------

fn range(mem: &[u8], ptr: i32, len: usize) -> Result<std::ops::Range<usize>, Errno> {
    let start = usize::try_from(ptr).map_err(|_| FAULT)?;
    let end = start.checked_add(len).ok_or(FAULT)?;
    if end > mem.len() {
        return Err(FAULT);
    }
    Ok(start..end)
}

fn put_u32(mem: &mut [u8], ptr: i32, value: u32) -> Result<(), Errno> {
    let at = range(mem, ptr, 4)?;
    mem[at].copy_from_slice(&value.to_le_bytes());
    Ok(())
}

fn put_u64(mem: &mut [u8], ptr: i32, value: u64) -> Result<(), Errno> {
    let at = range(mem, ptr, 8)?;
    mem[at].copy_from_slice(&value.to_le_bytes());
    Ok(())
}

/// The longest path a call may name: the deepest tree of the longest names. It bounds
/// what the host copies out of the guest for one path.
const MAX_PATH: usize = MAX_DEPTH * 256;

fn path(mem: &[u8], ptr: i32, len: i32) -> Result<String, Errno> {
    let len = usize::try_from(len).map_err(|_| FAULT)?;
    if len > MAX_PATH {
        return Err(errno::NAMETOOLONG);
    }
    let at = range(mem, ptr, len)?;
    std::str::from_utf8(&mem[at])
        .map(str::to_owned)
        .map_err(|_| ILSEQ)
}

fn stat_bytes(ino: u64, node: &Node) -> [u8; 64] {
    let mut out = [0u8; 64];
    let filetype = match node.kind {
        Kind::File(_) => FILETYPE_REGULAR,
        Kind::Dir(_) => FILETYPE_DIRECTORY,
    };
    out[0..8].copy_from_slice(&1u64.to_le_bytes());
    out[8..16].copy_from_slice(&ino.to_le_bytes());
    out[16] = filetype;
    out[24..32].copy_from_slice(&1u64.to_le_bytes());
    out[32..40].copy_from_slice(&node.size().to_le_bytes());
    out[40..48].copy_from_slice(&node.accessed_ns.to_le_bytes());
    out[48..56].copy_from_slice(&node.modified_ns.to_le_bytes());
    out[56..64].copy_from_slice(&node.modified_ns.to_le_bytes());
    out
}

fn put_bytes(mem: &mut [u8], ptr: i32, bytes: &[u8]) -> Result<(), Errno> {
    let at = range(mem, ptr, bytes.len())?;
    mem[at].copy_from_slice(bytes);
    Ok(())
}

fn set_times(node: &mut Node, atim: i64, mtim: i64, flags: i32) {
    let flags = u16::try_from(flags).unwrap_or(0);
    let now = now_ns();
    if flags & FST_ATIM_NOW != 0 {
        node.accessed_ns = now;
    } else if flags & FST_ATIM != 0 {
        node.accessed_ns = atim as u64;
    }
    if flags & FST_MTIM_NOW != 0 {
        node.modified_ns = now;
    } else if flags & FST_MTIM != 0 {
        node.modified_ns = mtim as u64;
    }
}

// ---- the calls -------------------------------------------------------------------------

type Mem<'a> = (&'a mut [u8], &'a mut HostState);

fn with_memory<R>(
    caller: &mut Caller<'_, HostState>,
    body: impl FnOnce(&mut [u8], &mut HostState) -> Result<R, Errno>,
) -> Result<R, Errno> {
    let Ok(memory) = crate::host::memory(caller) else {
        return Err(FAULT);
    };
    let (mem, state): Mem<'_> = memory.data_and_store_mut(caller);
    body(mem, state)
}

fn code(result: Result<(), Errno>) -> i32 {
    match result {
        Ok(()) => 0,
        Err(errno) => i32::from(errno),
    }
}

fn read_into(mem: &mut [u8], buffers: &[Range<usize>], data: &[u8], offset: u64) -> usize {
    let mut at = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(data.len());
    let mut total = 0;
    for buffer in buffers {
        let take = buffer.len().min(data.len() - at);
        mem[buffer.start..buffer.start + take].copy_from_slice(&data[at..at + take]);
        at += take;
        total += take;
        if take < buffer.len() {
            break;
        }
    }
    total
}

fn fd_read(
    mem: &mut [u8],
    state: &mut HostState,
    fd: i32,
    iovs: i32,
    count: i32,
    offset: Option<u64>,
) -> Result<u32, Errno> {
    if is_stdio(fd) {
        return if offset.is_some() {
            Err(errno::SPIPE)
        } else if fd == 0 {
            Ok(0)
        } else {
            Err(errno::BADF)
        };
    }
    let buffers = iovec::buffers(mem, iovs, count)?;
    let fs = &mut state.fs;
    let (ino, pos) = {
        let open = fs.open(fd)?;
        if open.dir {
            return Err(errno::ISDIR);
        }
        if !open.read {
            return Err(errno::BADF);
        }
        (open.ino, open.pos)
    };
    let read = {
        let mut tree = fs.tree_of(fd)?;
        // Not in a frozen (shared) tree: another sandbox would see this read.
        tree.touch(ino);
        let Kind::File(data) = &tree.node(ino)?.kind else {
            return Err(errno::ISDIR);
        };
        read_into(mem, &buffers, data, offset.unwrap_or(pos))
    };
    if offset.is_none() {
        fs.open_mut(fd)?.pos = pos.checked_add(read as u64).ok_or(errno::OVERFLOW)?;
    }
    Ok(u32::try_from(read).unwrap_or(u32::MAX))
}

/// `Ok(Err(stop))` when the output meter stopped the guest (it must trap).
fn fd_write(
    mem: &mut [u8],
    state: &mut HostState,
    fd: i32,
    iovs: i32,
    count: i32,
    offset: Option<u64>,
) -> Result<Result<u32, crate::meter::Stop>, Errno> {
    let buffers = iovec::write_buffers(mem, iovs, count)?;
    let len: usize = buffers.iter().map(Range::len).sum();
    let written = u32::try_from(len).unwrap_or(u32::MAX);
    if is_stdio(fd) {
        if fd == 0 {
            return Err(errno::BADF);
        }
        if offset.is_some() {
            return Err(errno::SPIPE);
        }
        let stream = if fd == 2 {
            Stream::Stderr
        } else {
            Stream::Stdout
        };
        // Straight from guest memory: the sink keeps what fits `max_output_bytes` and
        // stops the guest at the first byte past it.
        let meter: Arc<Meter> = state.meter.clone();
        let mut output = meter.output();
        for buffer in buffers {
            if let Err(reason) = output.write(stream, &mem[buffer]) {
                drop(output);
                return Ok(Err(meter.record_stop(reason)));
            }
        }
        return Ok(Ok(written));
    }
    let fs = &mut state.fs;
    let (ino, at, append) = {
        let open = fs.open(fd)?;
        if open.dir {
            return Err(errno::ISDIR);
        }
        if !open.write {
            return Err(errno::BADF);
        }
        (open.ino, open.pos, open.append)
    };
    let end = {
        let mut tree = fs.tree_of(fd)?;
        let at = match offset {
            Some(offset) => offset,
            None if append => tree.node(ino)?.size(),
            None => at,
        };
        let parts: Vec<&[u8]> = buffers.into_iter().map(|buffer| &mem[buffer]).collect();
        tree.write_at(ino, at, &parts)?
    };
    if offset.is_none() {
        fs.open_mut(fd)?.pos = end;
    }
    Ok(Ok(written))
}

fn fd_readdir(
    mem: &mut [u8],
    state: &mut HostState,
    fd: i32,
    buf: i32,
    buf_len: i32,
    cookie: u64,
) -> Result<u32, Errno> {
    let fs = &state.fs;
    let open = fs.open(fd)?;
    if !open.dir {
        return Err(errno::NOTDIR);
    }
    let tree = fs.tree_of(fd)?;
    let node = tree.node(open.ino)?;
    let Kind::Dir(entries) = &node.kind else {
        return Err(errno::NOTDIR);
    };
    let mut listing: Vec<(&str, u64, u8)> = vec![
        (".", open.ino, FILETYPE_DIRECTORY),
        ("..", node.parent, FILETYPE_DIRECTORY),
    ];
    for (name, ino) in entries {
        let filetype = match tree.node(*ino).map(|n| &n.kind) {
            Ok(Kind::Dir(_)) => FILETYPE_DIRECTORY,
            _ => FILETYPE_REGULAR,
        };
        listing.push((name, *ino, filetype));
    }
    let capacity = usize::try_from(buf_len).map_err(|_| FAULT)?;
    let out = range(mem, buf, capacity)?;
    let mut bytes = Vec::new();
    let skip = usize::try_from(cookie).unwrap_or(usize::MAX);
    for (index, (name, ino, filetype)) in listing.iter().enumerate().skip(skip) {
        if bytes.len() >= capacity {
            break;
        }
        let mut dirent = [0u8; 24];
        dirent[0..8].copy_from_slice(&(index as u64 + 1).to_le_bytes());
        dirent[8..16].copy_from_slice(&ino.to_le_bytes());
        dirent[16..20].copy_from_slice(&(name.len() as u32).to_le_bytes());
        dirent[20] = *filetype;
        bytes.extend_from_slice(&dirent);
        bytes.extend_from_slice(name.as_bytes());
    }
    // A buffer filled to the brim tells the caller to ask again with a larger one.
    let used = bytes.len().min(capacity);
    mem[out.start..out.start + used].copy_from_slice(&bytes[..used]);
    Ok(u32::try_from(used).unwrap_or(u32::MAX))
}

#[allow(
    clippy::too_many_arguments,
    reason = "the arguments of WASI's path_open"
)]
fn path_open(
    state: &mut HostState,
    fd: i32,
    path_text: &str,
    oflags: i32,
    rights_base: i64,
    rights_inheriting: i64,
    fdflags: i32,
) -> Result<u32, Errno> {
    let fs = &mut state.fs;
    let base = fs.dir_fd(fd)?;
    let source = fs.open(fd)?.source;
    let writable = fs.writable(source);
    let oflags = u16::try_from(oflags).unwrap_or(0);
    let fdflags = u16::try_from(fdflags).unwrap_or(0);
    let rights_base = rights_base as u64;
    let wants_write = rights_base & rights::FD_WRITE != 0;
    let (ino, dir) = {
        let mut tree = fs.tree(source)?;
        let (parent, name) = tree.walk_parent(base, path_text)?;
        let found = match name {
            None => Ok(parent),
            Some(name) => tree.resolve(parent, name),
        };
        let ino = match found {
            Ok(ino) => {
                if oflags & OFLAG_CREAT != 0 && oflags & OFLAG_EXCL != 0 {
                    return Err(errno::EXIST);
                }
                ino
            }
            Err(code) if code == errno::NOENT && oflags & OFLAG_CREAT != 0 => {
                let Some(name) = name else {
                    return Err(errno::ISDIR);
                };
                if oflags & OFLAG_DIRECTORY != 0 || path_text.ends_with('/') {
                    return Err(errno::ISDIR);
                }
                if !writable {
                    return Err(ROFS);
                }
                tree.create(parent, name, Kind::File(Vec::new()))?
            }
            Err(code) => return Err(code),
        };
        let dir = matches!(tree.node(ino)?.kind, Kind::Dir(_));
        if dir && (wants_write || oflags & OFLAG_TRUNC != 0) {
            return Err(errno::ISDIR);
        }
        if !writable && (wants_write || oflags & OFLAG_TRUNC != 0) {
            return Err(ROFS);
        }
        if !dir && (oflags & OFLAG_DIRECTORY != 0 || path_text.ends_with('/')) {
            return Err(errno::NOTDIR);
        }
        if !dir && oflags & OFLAG_TRUNC != 0 {
            tree.set_len(ino, 0)?;
        }
        (ino, dir)
    };
    let open = Open {
        source,
        ino,
        dir,
        read: dir || rights_base & rights::FD_READ != 0,
        write: !dir && wants_write,
        append: fdflags & FDFLAG_APPEND != 0,
        pos: 0,
        rights_base: if dir {
            rights::DIR_BASE
        } else {
            rights_base & rights::FILE_ALL
        },
        rights_inheriting: if dir {
            rights::DIR_BASE | rights::FILE_ALL
        } else {
            rights_inheriting as u64 & rights::FILE_ALL
        },
    };
    fs.insert(open)
}

fn fdstat(state: &HostState, fd: i32) -> Result<[u8; 24], Errno> {
    let mut out = [0u8; 24];
    let (filetype, flags, base, inheriting) = match fd {
        0 => (FILETYPE_UNKNOWN, 0, rights::FD_READ, rights::FD_READ),
        1 | 2 => (FILETYPE_UNKNOWN, 0, rights::FD_WRITE, rights::FD_WRITE),
        _ => {
            let open = state.fs.open(fd)?;
            let filetype = if open.dir {
                FILETYPE_DIRECTORY
            } else {
                FILETYPE_REGULAR
            };
            let flags = if open.append { FDFLAG_APPEND } else { 0 };
            (filetype, flags, open.rights_base, open.rights_inheriting)
        }
    };
    out[0] = filetype;
    out[2..4].copy_from_slice(&flags.to_le_bytes());
    out[8..16].copy_from_slice(&base.to_le_bytes());
    out[16..24].copy_from_slice(&inheriting.to_le_bytes());
    Ok(out)
}

fn fd_filestat(state: &HostState, fd: i32) -> Result<[u8; 64], Errno> {
    if is_stdio(fd) {
        return Ok([0u8; 64]);
    }
    let open = state.fs.open(fd)?;
    let tree = state.fs.tree_of(fd)?;
    Ok(stat_bytes(open.ino, tree.node(open.ino)?))
}

fn path_filestat(state: &HostState, fd: i32, path: &str) -> Result<[u8; 64], Errno> {
    let base = state.fs.dir_fd(fd)?;
    let tree = state.fs.tree_of(fd)?;
    let ino = tree.resolve(base, path)?;
    Ok(stat_bytes(ino, tree.node(ino)?))
}

fn writable_file(state: &HostState, fd: i32) -> Result<u64, Errno> {
    if is_stdio(fd) {
        return Err(errno::INVAL);
    }
    let open = state.fs.open(fd)?;
    if open.dir {
        return Err(errno::ISDIR);
    }
    if !open.write {
        return Err(errno::BADF);
    }
    Ok(open.ino)
}

fn seek(state: &mut HostState, fd: i32, offset: i64, whence: i32) -> Result<u64, Errno> {
    if is_stdio(fd) {
        return Err(errno::SPIPE);
    }
    let size = {
        let open = state.fs.open(fd)?;
        if open.dir {
            return Err(errno::BADF);
        }
        state.fs.tree_of(fd)?.node(open.ino)?.size()
    };
    let open = state.fs.open_mut(fd)?;
    let pos = seek_target(open.pos, size, offset, whence)?;
    open.pos = pos;
    Ok(pos)
}

/// Where a seek from `pos` in a file of `size` bytes lands, as POSIX's `lseek`: before the
/// start is `EINVAL`, past what a guest's `off_t` holds is `EOVERFLOW`; past the end of the
/// file is allowed (a write there counts against the quota). A refused seek moves nothing.
fn seek_target(pos: u64, size: u64, offset: i64, whence: i32) -> Result<u64, Errno> {
    let base = match whence {
        0 => 0,
        1 => pos,
        2 => size,
        _ => return Err(errno::INVAL),
    };
    match base.checked_add_signed(offset) {
        Some(target) if target <= MAX_OFFSET => Ok(target),
        Some(_) => Err(errno::OVERFLOW),
        None if offset < 0 => Err(errno::INVAL),
        None => Err(errno::OVERFLOW),
    }
}

/// A guest's file offset or length (WASI passes them unsigned, libc's `off_t` is signed):
/// a negative one is `EINVAL`, as POSIX's `pread`, `pwrite` and `ftruncate` say.
fn file_offset(value: i64) -> Result<u64, Errno> {
    u64::try_from(value).map_err(|_| errno::INVAL)
}

/// Adds the filesystem calls to `linker`, shadowing wasmtime-wasi's.
pub(crate) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let result = define(linker);
    linker.allow_shadowing(false);
    result
}

fn define(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.func_wrap(
        WASI,
        "fd_prestat_get",
        |mut caller: Caller<'_, HostState>, fd: i32, buf: i32| -> i32 {
            code(with_memory(&mut caller, |mem, state| {
                let name = state.fs.preopen_path(fd).ok_or(errno::BADF)?;
                let mut prestat = [0u8; 8];
                prestat[4..8].copy_from_slice(&(name.len() as u32).to_le_bytes());
                put_bytes(mem, buf, &prestat)
            }))
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_prestat_dir_name",
        |mut caller: Caller<'_, HostState>, fd: i32, buf: i32, len: i32| -> i32 {
            code(with_memory(&mut caller, |mem, state| {
                let name = state.fs.preopen_path(fd).ok_or(errno::BADF)?.as_bytes();
                let len = usize::try_from(len).map_err(|_| FAULT)?;
                put_bytes(mem, buf, &name[..len.min(name.len())])
            }))
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_close",
        |mut caller: Caller<'_, HostState>, fd: i32| -> i32 {
            if is_stdio(fd) {
                return 0;
            }
            let fs = &mut caller.data_mut().fs;
            match u32::try_from(fd).ok().and_then(|fd| fs.fds.remove(&fd)) {
                Some(_) => 0,
                None => i32::from(errno::BADF),
            }
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_read",
        |mut caller: Caller<'_, HostState>, fd: i32, iovs: i32, count: i32, nread: i32| -> i32 {
            code(with_memory(&mut caller, |mem, state| {
                let read = fd_read(mem, state, fd, iovs, count, None)?;
                put_u32(mem, nread, read)
            }))
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_pread",
        |mut caller: Caller<'_, HostState>,
         fd: i32,
         iovs: i32,
         count: i32,
         offset: i64,
         nread: i32|
         -> i32 {
            code(with_memory(&mut caller, |mem, state| {
                let read = fd_read(mem, state, fd, iovs, count, Some(file_offset(offset)?))?;
                put_u32(mem, nread, read)
            }))
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_write",
        |mut caller: Caller<'_, HostState>,
         fd: i32,
         iovs: i32,
         count: i32,
         nwritten: i32|
         -> wasmtime::Result<i32> {
            let mut stopped = None;
            let result = with_memory(&mut caller, |mem, state| {
                match fd_write(mem, state, fd, iovs, count, None)? {
                    Ok(written) => put_u32(mem, nwritten, written),
                    Err(reason) => {
                        stopped = Some(reason);
                        Ok(())
                    }
                }
            });
            match stopped {
                Some(reason) => Err(host::stop(reason)),
                None => Ok(code(result)),
            }
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_pwrite",
        |mut caller: Caller<'_, HostState>,
         fd: i32,
         iovs: i32,
         count: i32,
         offset: i64,
         nwritten: i32|
         -> i32 {
            code(with_memory(&mut caller, |mem, state| {
                match fd_write(mem, state, fd, iovs, count, Some(file_offset(offset)?))? {
                    Ok(written) => put_u32(mem, nwritten, written),
                    Err(_) => Err(errno::SPIPE),
                }
            }))
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_seek",
        |mut caller: Caller<'_, HostState>, fd: i32, offset: i64, whence: i32, out: i32| -> i32 {
            code(with_memory(&mut caller, |mem, state| {
                let pos = seek(state, fd, offset, whence)?;
                put_u64(mem, out, pos)
            }))
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_tell",
        |mut caller: Caller<'_, HostState>, fd: i32, out: i32| -> i32 {
            code(with_memory(&mut caller, |mem, state| {
                let pos = seek(state, fd, 0, 1)?;
                put_u64(mem, out, pos)
            }))
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_fdstat_get",
        |mut caller: Caller<'_, HostState>, fd: i32, buf: i32| -> i32 {
            code(with_memory(&mut caller, |mem, state| {
                let stat = fdstat(state, fd)?;
                put_bytes(mem, buf, &stat)
            }))
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_fdstat_set_flags",
        |mut caller: Caller<'_, HostState>, fd: i32, flags: i32| -> i32 {
            if is_stdio(fd) {
                return 0;
            }
            match caller.data_mut().fs.open_mut(fd) {
                Ok(open) => {
                    open.append = flags & i32::from(FDFLAG_APPEND) != 0;
                    0
                }
                Err(errno) => i32::from(errno),
            }
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_fdstat_set_rights",
        |mut caller: Caller<'_, HostState>, fd: i32, base: i64, inheriting: i64| -> i32 {
            if is_stdio(fd) {
                return 0;
            }
            match caller.data_mut().fs.open_mut(fd) {
                Ok(open) => {
                    // Rights only ever narrow.
                    open.rights_base &= base as u64;
                    open.rights_inheriting &= inheriting as u64;
                    open.read &= open.dir || open.rights_base & rights::FD_READ != 0;
                    open.write &= open.rights_base & rights::FD_WRITE != 0;
                    0
                }
                Err(errno) => i32::from(errno),
            }
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_filestat_get",
        |mut caller: Caller<'_, HostState>, fd: i32, buf: i32| -> i32 {
            code(with_memory(&mut caller, |mem, state| {
                let stat = fd_filestat(state, fd)?;
                put_bytes(mem, buf, &stat)
            }))
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_filestat_set_size",
        |mut caller: Caller<'_, HostState>, fd: i32, size: i64| -> i32 {
            let state = caller.data_mut();
            code(writable_file(state, fd).and_then(|ino| {
                let size = file_offset(size)?;
                state.fs.tree_of(fd)?.set_len(ino, size)
            }))
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_allocate",
        |mut caller: Caller<'_, HostState>, fd: i32, offset: i64, len: i64| -> i32 {
            let state = caller.data_mut();
            code(writable_file(state, fd).and_then(|ino| {
                let mut tree = state.fs.tree_of(fd)?;
                // POSIX's `posix_fallocate`: a negative offset or an empty range is EINVAL.
                let (offset, len) = (file_offset(offset)?, file_offset(len)?);
                if len == 0 {
                    return Err(errno::INVAL);
                }
                let end = offset
                    .checked_add(len)
                    .filter(|end| *end <= MAX_OFFSET)
                    .ok_or(errno::FBIG)?;
                if end > tree.node(ino)?.size() {
                    tree.set_len(ino, end)?;
                }
                Ok(())
            }))
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_filestat_set_times",
        |caller: Caller<'_, HostState>, fd: i32, atim: i64, mtim: i64, flags: i32| -> i32 {
            if is_stdio(fd) {
                return 0;
            }
            let fs = &caller.data().fs;
            code(fs.open(fd).and_then(|open| {
                let mut tree = fs.tree_to_change(fd)?;
                set_times(tree.node_mut(open.ino)?, atim, mtim, flags);
                Ok(())
            }))
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_advise",
        |caller: Caller<'_, HostState>, fd: i32, _offset: i64, _len: i64, _advice: i32| -> i32 {
            code(if is_stdio(fd) {
                Ok(())
            } else {
                caller.data().fs.open(fd).map(|_| ())
            })
        },
    )?;
    for name in ["fd_datasync", "fd_sync"] {
        linker.func_wrap(
            WASI,
            name,
            |caller: Caller<'_, HostState>, fd: i32| -> i32 {
                code(if is_stdio(fd) {
                    Ok(())
                } else {
                    caller.data().fs.open(fd).map(|_| ())
                })
            },
        )?;
    }
    linker.func_wrap(
        WASI,
        "fd_readdir",
        |mut caller: Caller<'_, HostState>,
         fd: i32,
         buf: i32,
         buf_len: i32,
         cookie: i64,
         used: i32|
         -> i32 {
            code(with_memory(&mut caller, |mem, state| {
                let bytes = fd_readdir(mem, state, fd, buf, buf_len, cookie as u64)?;
                put_u32(mem, used, bytes)
            }))
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_renumber",
        |mut caller: Caller<'_, HostState>, from: i32, to: i32| -> i32 {
            if is_stdio(from) || is_stdio(to) {
                return i32::from(errno::NOTSUP);
            }
            let fs = &mut caller.data_mut().fs;
            let (Ok(from), Ok(to)) = (u32::try_from(from), u32::try_from(to)) else {
                return i32::from(errno::BADF);
            };
            if !fs.fds.contains_key(&to) {
                return i32::from(errno::BADF);
            }
            match fs.fds.remove(&from) {
                Some(open) => {
                    fs.fds.insert(to, open);
                    0
                }
                None => i32::from(errno::BADF),
            }
        },
    )?;
    linker.func_wrap(
        WASI,
        "path_create_directory",
        |mut caller: Caller<'_, HostState>, fd: i32, ptr: i32, len: i32| -> i32 {
            code(with_memory(&mut caller, |mem, state| {
                let path = path(mem, ptr, len)?;
                let base = state.fs.dir_fd(fd)?;
                let mut tree = state.fs.tree_to_change(fd)?;
                let (parent, name) = tree.walk_parent(base, &path)?;
                let name = name.ok_or(errno::EXIST)?;
                tree.create(parent, name, Kind::Dir(BTreeMap::new()))
                    .map(|_| ())
            }))
        },
    )?;
    linker.func_wrap(
        WASI,
        "path_filestat_get",
        |mut caller: Caller<'_, HostState>,
         fd: i32,
         _flags: i32,
         ptr: i32,
         len: i32,
         buf: i32|
         -> i32 {
            code(with_memory(&mut caller, |mem, state| {
                let path = path(mem, ptr, len)?;
                let stat = path_filestat(state, fd, &path)?;
                put_bytes(mem, buf, &stat)
            }))
        },
    )?;
    linker.func_wrap(
        WASI,
        "path_filestat_set_times",
        |mut caller: Caller<'_, HostState>,
         fd: i32,
         _flags: i32,
         ptr: i32,
         len: i32,
         atim: i64,
         mtim: i64,
         fst: i32|
         -> i32 {
            code(with_memory(&mut caller, |mem, state| {
                let path = path(mem, ptr, len)?;
                let base = state.fs.dir_fd(fd)?;
                let mut tree = state.fs.tree_to_change(fd)?;
                let ino = tree.resolve(base, &path)?;
                set_times(tree.node_mut(ino)?, atim, mtim, fst);
                Ok(())
            }))
        },
    )?;
    linker.func_wrap(
        WASI,
        "path_link",
        |_: Caller<'_, HostState>, _: i32, _: i32, _: i32, _: i32, _: i32, _: i32, _: i32| -> i32 {
            i32::from(errno::PERM)
        },
    )?;
    linker.func_wrap(
        WASI,
        "path_symlink",
        |_: Caller<'_, HostState>, _: i32, _: i32, _: i32, _: i32, _: i32| -> i32 {
            i32::from(errno::PERM)
        },
    )?;
    linker.func_wrap(
        WASI,
        "path_readlink",
        |mut caller: Caller<'_, HostState>,
         fd: i32,
         ptr: i32,
         len: i32,
         _buf: i32,
         _buf_len: i32,
         _used: i32|
         -> i32 {
            // Nothing in a workspace is a symbolic link.
            code(with_memory(&mut caller, |mem, state| {
                let path = path(mem, ptr, len)?;
                let base = state.fs.dir_fd(fd)?;
                state.fs.tree_of(fd)?.resolve(base, &path)?;
                Err(errno::INVAL)
            }))
        },
    )?;
    linker.func_wrap(
        WASI,
        "path_open",
        |mut caller: Caller<'_, HostState>,
         fd: i32,
         _dirflags: i32,
         ptr: i32,
         len: i32,
         oflags: i32,
         base: i64,
         inheriting: i64,
         fdflags: i32,
         out: i32|
         -> i32 {
            code(with_memory(&mut caller, |mem, state| {
                let path = path(mem, ptr, len)?;
                let opened = path_open(state, fd, &path, oflags, base, inheriting, fdflags)?;
                if let Err(errno) = put_u32(mem, out, opened) {
                    state.fs.fds.remove(&opened);
                    return Err(errno);
                }
                Ok(())
            }))
        },
    )?;
    linker.func_wrap(
        WASI,
        "path_remove_directory",
        |mut caller: Caller<'_, HostState>, fd: i32, ptr: i32, len: i32| -> i32 {
            code(with_memory(&mut caller, |mem, state| {
                let path = path(mem, ptr, len)?;
                let base = state.fs.dir_fd(fd)?;
                let mut tree = state.fs.tree_to_change(fd)?;
                let (parent, name) = tree.walk_parent(base, &path)?;
                tree.remove(parent, name.ok_or(errno::INVAL)?, true)
            }))
        },
    )?;
    linker.func_wrap(
        WASI,
        "path_unlink_file",
        |mut caller: Caller<'_, HostState>, fd: i32, ptr: i32, len: i32| -> i32 {
            code(with_memory(&mut caller, |mem, state| {
                let path = path(mem, ptr, len)?;
                if path.ends_with('/') {
                    return Err(errno::NOTDIR);
                }
                let base = state.fs.dir_fd(fd)?;
                let mut tree = state.fs.tree_to_change(fd)?;
                let (parent, name) = tree.walk_parent(base, &path)?;
                tree.remove(parent, name.ok_or(errno::ISDIR)?, false)
            }))
        },
    )?;
    linker.func_wrap(
        WASI,
        "path_rename",
        |mut caller: Caller<'_, HostState>,
         fd: i32,
         old_ptr: i32,
         old_len: i32,
         new_fd: i32,
         new_ptr: i32,
         new_len: i32|
         -> i32 {
            code(with_memory(&mut caller, |mem, state| {
                let old = path(mem, old_ptr, old_len)?;
                let new = path(mem, new_ptr, new_len)?;
                let from_base = state.fs.dir_fd(fd)?;
                let to_base = state.fs.dir_fd(new_fd)?;
                if state.fs.open(fd)?.source != state.fs.open(new_fd)?.source {
                    return Err(XDEV);
                }
                let mut tree = state.fs.tree_to_change(fd)?;
                let (from_dir, from) = tree.walk_parent(from_base, &old)?;
                let (to_dir, to) = tree.walk_parent(to_base, &new)?;
                let (Some(from), Some(to)) = (from, to) else {
                    return Err(errno::INVAL);
                };
                tree.rename(from_dir, from, to_dir, to)
            }))
        },
    )?;
    Ok(())
}
