//! The filesystem calls defined as WASI preview 1 imports on a linker of any store data
//! that is a [`FilesView`], in place of wasmtime-wasi's own.

use std::collections::BTreeMap;

use wasmtime::{Caller, Linker};

use crate::meter::stop;
use crate::workspace::{Errno, Kind, MAX_OFFSET, Tree, errno};

use super::abi::{FAULT, FDFLAG_APPEND, WASI, XDEV, rights};
use super::calls::{
    fd_filestat, fd_read, fd_readdir, fd_write, fdstat, file_offset, path_filestat, path_open,
    seek, set_times, writable_file,
};
use super::files::{Open, is_stdio};
use super::guest_memory::{code, path, put_bytes, put_u32, put_u64, with_memory};
use super::view::FilesView;

/// Defines the WASI import `$name` on `$linker` as a call whose body reads and writes the
/// guest's memory and the store's data (`|mem, state, args…| body`); the body's
/// `Result<(), Errno>` reaches the guest as its errno code.
macro_rules! memory_call {
    ($linker:ident, $name:literal, |$mem:ident, $state:ident $(, $arg:ident: $ty:ty)*| $body:block) => {
        $linker.func_wrap(
            WASI,
            $name,
            |mut caller: Caller<'_, T>, $($arg: $ty),*| -> i32 {
                code(with_memory(&mut caller, |$mem, $state| $body))
            },
        )?
    };
}

/// Changes the open descriptor `fd` with `change` (the standard streams stay as they are):
/// 0, or the errno code of a bad descriptor.
fn change_open<T: FilesView>(state: &mut T, fd: i32, change: impl FnOnce(&mut Open)) -> i32 {
    if is_stdio(fd) {
        return 0;
    }
    match state.files_mut().open_mut(fd) {
        Ok(open) => {
            change(open);
            0
        }
        Err(errno) => i32::from(errno),
    }
}

/// 0 when `fd` is a standard stream or an open descriptor, else the errno code (calls with
/// nothing to do on the workspace: advice, syncs).
fn check_fd<T: FilesView>(state: &T, fd: i32) -> i32 {
    code(if is_stdio(fd) {
        Ok(())
    } else {
        state.files().open(fd).map(|_| ())
    })
}

/// Runs `change` on the tree of the directory `fd`, locked to change, with the directory
/// `path` (from `fd`) names an entry of and that entry's name (`None`: `path` names the
/// directory itself).
fn change_in_parent<T: FilesView, R>(
    state: &T,
    fd: i32,
    path: &str,
    change: impl FnOnce(&mut Tree, u64, Option<&str>) -> Result<R, Errno>,
) -> Result<R, Errno> {
    let base = state.files().dir_fd(fd)?;
    let mut tree = state.files().tree_to_change(fd)?;
    let (parent, name) = tree.walk_parent(base, path)?;
    change(&mut tree, parent, name)
}

/// Adds the filesystem calls to `linker`, shadowing wasmtime-wasi's.
pub(crate) fn add_to_linker<T: FilesView + 'static>(
    linker: &mut Linker<T>,
) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let result = define(linker);
    linker.allow_shadowing(false);
    result
}

fn define<T: FilesView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    memory_call!(linker, "fd_prestat_get", |mem, state, fd: i32, buf: i32| {
        let name = state.files().preopen_path(fd).ok_or(errno::BADF)?;
        let mut prestat = [0u8; 8];
        prestat[4..8].copy_from_slice(&(name.len() as u32).to_le_bytes());
        put_bytes(mem, buf, &prestat)
    });
    memory_call!(
        linker,
        "fd_prestat_dir_name",
        |mem, state, fd: i32, buf: i32, len: i32| {
            let name = state
                .files()
                .preopen_path(fd)
                .ok_or(errno::BADF)?
                .as_bytes();
            let len = usize::try_from(len).map_err(|_| FAULT)?;
            put_bytes(mem, buf, &name[..len.min(name.len())])
        }
    );
    linker.func_wrap(
        WASI,
        "fd_close",
        |mut caller: Caller<'_, T>, fd: i32| -> i32 {
            if is_stdio(fd) {
                return 0;
            }
            let fs = caller.data_mut().files_mut();
            match u32::try_from(fd).ok().and_then(|fd| fs.fds.remove(&fd)) {
                Some(_) => 0,
                None => i32::from(errno::BADF),
            }
        },
    )?;
    memory_call!(
        linker,
        "fd_read",
        |mem, state, fd: i32, iovs: i32, count: i32, nread: i32| {
            let read = fd_read(mem, state, fd, iovs, count, None)?;
            put_u32(mem, nread, read)
        }
    );
    memory_call!(
        linker,
        "fd_pread",
        |mem, state, fd: i32, iovs: i32, count: i32, offset: i64, nread: i32| {
            let read = fd_read(mem, state, fd, iovs, count, Some(file_offset(offset)?))?;
            put_u32(mem, nread, read)
        }
    );
    linker.func_wrap(
        WASI,
        "fd_write",
        |mut caller: Caller<'_, T>,
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
                Some(reason) => Err(stop(reason)),
                None => Ok(code(result)),
            }
        },
    )?;
    memory_call!(
        linker,
        "fd_pwrite",
        |mem, state, fd: i32, iovs: i32, count: i32, offset: i64, nwritten: i32| {
            match fd_write(mem, state, fd, iovs, count, Some(file_offset(offset)?))? {
                Ok(written) => put_u32(mem, nwritten, written),
                Err(_) => Err(errno::SPIPE),
            }
        }
    );
    memory_call!(
        linker,
        "fd_seek",
        |mem, state, fd: i32, offset: i64, whence: i32, out: i32| {
            let pos = seek(state, fd, offset, whence)?;
            put_u64(mem, out, pos)
        }
    );
    memory_call!(linker, "fd_tell", |mem, state, fd: i32, out: i32| {
        let pos = seek(state, fd, 0, 1)?;
        put_u64(mem, out, pos)
    });
    memory_call!(linker, "fd_fdstat_get", |mem, state, fd: i32, buf: i32| {
        let stat = fdstat(state, fd)?;
        put_bytes(mem, buf, &stat)
    });
    linker.func_wrap(
        WASI,
        "fd_fdstat_set_flags",
        |mut caller: Caller<'_, T>, fd: i32, flags: i32| -> i32 {
            change_open(caller.data_mut(), fd, |open| {
                open.append = flags & i32::from(FDFLAG_APPEND) != 0;
            })
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_fdstat_set_rights",
        |mut caller: Caller<'_, T>, fd: i32, base: i64, inheriting: i64| -> i32 {
            change_open(caller.data_mut(), fd, |open| {
                // Rights only ever narrow.
                open.rights_base &= base as u64;
                open.rights_inheriting &= inheriting as u64;
                open.read &= open.dir || open.rights_base & rights::FD_READ != 0;
                open.write &= open.rights_base & rights::FD_WRITE != 0;
            })
        },
    )?;
    memory_call!(
        linker,
        "fd_filestat_get",
        |mem, state, fd: i32, buf: i32| {
            let stat = fd_filestat(state, fd)?;
            put_bytes(mem, buf, &stat)
        }
    );
    linker.func_wrap(
        WASI,
        "fd_filestat_set_size",
        |mut caller: Caller<'_, T>, fd: i32, size: i64| -> i32 {
            let state = caller.data_mut();
            code(writable_file(state, fd).and_then(|ino| {
                let size = file_offset(size)?;
                state.files().tree_of(fd)?.set_len(ino, size)
            }))
        },
    )?;
    linker.func_wrap(
        WASI,
        "fd_allocate",
        |mut caller: Caller<'_, T>, fd: i32, offset: i64, len: i64| -> i32 {
            let state = caller.data_mut();
            code(writable_file(state, fd).and_then(|ino| {
                let mut tree = state.files().tree_of(fd)?;
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
        |caller: Caller<'_, T>, fd: i32, atim: i64, mtim: i64, flags: i32| -> i32 {
            if is_stdio(fd) {
                return 0;
            }
            let fs = caller.data().files();
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
        |caller: Caller<'_, T>, fd: i32, _offset: i64, _len: i64, _advice: i32| -> i32 {
            check_fd(caller.data(), fd)
        },
    )?;
    for name in ["fd_datasync", "fd_sync"] {
        linker.func_wrap(WASI, name, |caller: Caller<'_, T>, fd: i32| -> i32 {
            check_fd(caller.data(), fd)
        })?;
    }
    memory_call!(
        linker,
        "fd_readdir",
        |mem, state, fd: i32, buf: i32, buf_len: i32, cookie: i64, used: i32| {
            let bytes = fd_readdir(mem, state, fd, buf, buf_len, cookie as u64)?;
            put_u32(mem, used, bytes)
        }
    );
    linker.func_wrap(
        WASI,
        "fd_renumber",
        |mut caller: Caller<'_, T>, from: i32, to: i32| -> i32 {
            if is_stdio(from) || is_stdio(to) {
                return i32::from(errno::NOTSUP);
            }
            let fs = caller.data_mut().files_mut();
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
    memory_call!(
        linker,
        "path_create_directory",
        |mem, state, fd: i32, ptr: i32, len: i32| {
            let path = path(mem, ptr, len)?;
            change_in_parent(state, fd, &path, |tree, parent, name| {
                let name = name.ok_or(errno::EXIST)?;
                tree.create(parent, name, Kind::Dir(BTreeMap::new()))
                    .map(|_| ())
            })
        }
    );
    memory_call!(
        linker,
        "path_filestat_get",
        |mem, state, fd: i32, _flags: i32, ptr: i32, len: i32, buf: i32| {
            let path = path(mem, ptr, len)?;
            let stat = path_filestat(state, fd, &path)?;
            put_bytes(mem, buf, &stat)
        }
    );
    memory_call!(
        linker,
        "path_filestat_set_times",
        |mem, state, fd: i32, _flags: i32, ptr: i32, len: i32, atim: i64, mtim: i64, fst: i32| {
            let path = path(mem, ptr, len)?;
            let base = state.files().dir_fd(fd)?;
            let mut tree = state.files().tree_to_change(fd)?;
            let ino = tree.resolve(base, &path)?;
            set_times(tree.node_mut(ino)?, atim, mtim, fst);
            Ok(())
        }
    );
    linker.func_wrap(
        WASI,
        "path_link",
        |_: Caller<'_, T>, _: i32, _: i32, _: i32, _: i32, _: i32, _: i32, _: i32| -> i32 {
            i32::from(errno::PERM)
        },
    )?;
    linker.func_wrap(
        WASI,
        "path_symlink",
        |_: Caller<'_, T>, _: i32, _: i32, _: i32, _: i32, _: i32| -> i32 {
            i32::from(errno::PERM)
        },
    )?;
    memory_call!(
        linker,
        "path_readlink",
        |mem, state, fd: i32, ptr: i32, len: i32, _buf: i32, _buf_len: i32, _used: i32| {
            // Nothing in a workspace is a symbolic link.
            let path = path(mem, ptr, len)?;
            let base = state.files().dir_fd(fd)?;
            state.files().tree_of(fd)?.resolve(base, &path)?;
            Err(errno::INVAL)
        }
    );
    memory_call!(
        linker,
        "path_open",
        |mem,
         state,
         fd: i32,
         _dirflags: i32,
         ptr: i32,
         len: i32,
         oflags: i32,
         base: i64,
         inheriting: i64,
         fdflags: i32,
         out: i32| {
            let path = path(mem, ptr, len)?;
            let opened = path_open(state, fd, &path, oflags, base, inheriting, fdflags)?;
            if let Err(errno) = put_u32(mem, out, opened) {
                state.files_mut().fds.remove(&opened);
                return Err(errno);
            }
            Ok(())
        }
    );
    memory_call!(
        linker,
        "path_remove_directory",
        |mem, state, fd: i32, ptr: i32, len: i32| {
            let path = path(mem, ptr, len)?;
            change_in_parent(state, fd, &path, |tree, parent, name| {
                tree.remove(parent, name.ok_or(errno::INVAL)?, true)
            })
        }
    );
    memory_call!(
        linker,
        "path_unlink_file",
        |mem, state, fd: i32, ptr: i32, len: i32| {
            let path = path(mem, ptr, len)?;
            if path.ends_with('/') {
                return Err(errno::NOTDIR);
            }
            change_in_parent(state, fd, &path, |tree, parent, name| {
                tree.remove(parent, name.ok_or(errno::ISDIR)?, false)
            })
        }
    );
    memory_call!(
        linker,
        "path_rename",
        |mem,
         state,
         fd: i32,
         old_ptr: i32,
         old_len: i32,
         new_fd: i32,
         new_ptr: i32,
         new_len: i32| {
            let old = path(mem, old_ptr, old_len)?;
            let new = path(mem, new_ptr, new_len)?;
            let from_base = state.files().dir_fd(fd)?;
            let to_base = state.files().dir_fd(new_fd)?;
            if state.files().open(fd)?.source != state.files().open(new_fd)?.source {
                return Err(XDEV);
            }
            let mut tree = state.files().tree_to_change(fd)?;
            let (from_dir, from) = tree.walk_parent(from_base, &old)?;
            let (to_dir, to) = tree.walk_parent(to_base, &new)?;
            let (Some(from), Some(to)) = (from, to) else {
                return Err(errno::INVAL);
            };
            tree.rename(from_dir, from, to_dir, to)
        }
    );
    Ok(())
}
