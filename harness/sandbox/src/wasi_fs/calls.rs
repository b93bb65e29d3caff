//! The filesystem calls of WASI preview 1, on the files state of any store data that is a
//! [`FilesView`]: reads and writes (the standard streams into the output meter), directory
//! listings, opening, stats and seeks. `linker.rs` defines them as imports.

use std::ops::Range;
use std::sync::Arc;

use cordon_protocol::execution::Stream;

use crate::meter::{Meter, Stop};
use crate::workspace::{Errno, Kind, MAX_OFFSET, Node, errno, now_ns};

use super::abi::{
    FAULT, FDFLAG_APPEND, FILETYPE_DIRECTORY, FILETYPE_REGULAR, FILETYPE_UNKNOWN, FST_ATIM,
    FST_ATIM_NOW, FST_MTIM, FST_MTIM_NOW, OFLAG_CREAT, OFLAG_DIRECTORY, OFLAG_EXCL, OFLAG_TRUNC,
    ROFS, rights,
};
use super::files::{Open, is_stdio};
use super::guest_memory::range;
use super::iovec;
use super::view::FilesView;

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

pub(super) fn set_times(node: &mut Node, atim: i64, mtim: i64, flags: i32) {
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

pub(super) fn fd_read<T: FilesView>(
    mem: &mut [u8],
    state: &mut T,
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
    let fs = state.files_mut();
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
pub(super) fn fd_write<T: FilesView>(
    mem: &mut [u8],
    state: &mut T,
    fd: i32,
    iovs: i32,
    count: i32,
    offset: Option<u64>,
) -> Result<Result<u32, Stop>, Errno> {
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
        let meter: Arc<Meter> = state.meter().clone();
        let mut output = meter.output();
        for buffer in buffers {
            if let Err(reason) = output.write(stream, &mem[buffer]) {
                drop(output);
                return Ok(Err(meter.record_stop(reason)));
            }
        }
        return Ok(Ok(written));
    }
    let fs = state.files_mut();
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

pub(super) fn fd_readdir<T: FilesView>(
    mem: &mut [u8],
    state: &mut T,
    fd: i32,
    buf: i32,
    buf_len: i32,
    cookie: u64,
) -> Result<u32, Errno> {
    let fs = state.files();
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
pub(super) fn path_open<T: FilesView>(
    state: &mut T,
    fd: i32,
    path_text: &str,
    oflags: i32,
    rights_base: i64,
    rights_inheriting: i64,
    fdflags: i32,
) -> Result<u32, Errno> {
    let fs = state.files_mut();
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

pub(super) fn fdstat<T: FilesView>(state: &T, fd: i32) -> Result<[u8; 24], Errno> {
    let mut out = [0u8; 24];
    let (filetype, flags, base, inheriting) = match fd {
        0 => (FILETYPE_UNKNOWN, 0, rights::FD_READ, rights::FD_READ),
        1 | 2 => (FILETYPE_UNKNOWN, 0, rights::FD_WRITE, rights::FD_WRITE),
        _ => {
            let open = state.files().open(fd)?;
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

pub(super) fn fd_filestat<T: FilesView>(state: &T, fd: i32) -> Result<[u8; 64], Errno> {
    if is_stdio(fd) {
        return Ok([0u8; 64]);
    }
    let open = state.files().open(fd)?;
    let tree = state.files().tree_of(fd)?;
    Ok(stat_bytes(open.ino, tree.node(open.ino)?))
}

pub(super) fn path_filestat<T: FilesView>(
    state: &T,
    fd: i32,
    path: &str,
) -> Result<[u8; 64], Errno> {
    let base = state.files().dir_fd(fd)?;
    let tree = state.files().tree_of(fd)?;
    let ino = tree.resolve(base, path)?;
    Ok(stat_bytes(ino, tree.node(ino)?))
}

pub(super) fn writable_file<T: FilesView>(state: &T, fd: i32) -> Result<u64, Errno> {
    if is_stdio(fd) {
        return Err(errno::INVAL);
    }
    let open = state.files().open(fd)?;
    if open.dir {
        return Err(errno::ISDIR);
    }
    if !open.write {
        return Err(errno::BADF);
    }
    Ok(open.ino)
}

pub(super) fn seek<T: FilesView>(
    state: &mut T,
    fd: i32,
    offset: i64,
    whence: i32,
) -> Result<u64, Errno> {
    if is_stdio(fd) {
        return Err(errno::SPIPE);
    }
    let size = {
        let open = state.files().open(fd)?;
        if open.dir {
            return Err(errno::BADF);
        }
        state.files().tree_of(fd)?.node(open.ino)?.size()
    };
    let open = state.files_mut().open_mut(fd)?;
    let pos = seek_target(open.pos, size, offset, whence)?;
    open.pos = pos;
    Ok(pos)
}

/// Where a seek from `pos` in a file of `size` bytes lands, as POSIX's `lseek`: before the
/// start is `EINVAL`, past what a guest's `off_t` holds is `EOVERFLOW`; past the end of the
/// file is allowed (a write there counts against the quota). A refused seek moves nothing.
pub(super) fn seek_target(pos: u64, size: u64, offset: i64, whence: i32) -> Result<u64, Errno> {
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
pub(super) fn file_offset(value: i64) -> Result<u64, Errno> {
    u64::try_from(value).map_err(|_| errno::INVAL)
}
