//! The filesystem calls against hostile arguments: shared runtime files that must not carry
//! a signal between instances, file positions at the edge of `u64`, and output floods.

use cordon_core::dispatch::EventSink;
use cordon_protocol::execution::Limits;

use std::sync::Arc;

use super::abi::{OFLAG_CREAT, OFLAG_TRUNC, PREOPEN_FD, ROFS, rights};
use super::calls::{
    fd_filestat, fd_read, fd_write, file_offset, path_filestat, path_open, seek, seek_target,
};
use super::guest_memory::{MAX_PATH, path};
use super::iovec;
use super::{Mount, instance_mounts};
use crate::host_state::HostState;
use crate::meter::Meter;
use crate::workspace::{Errno, FROZEN_NS, Kind, MAX_OFFSET, Quota, ROOT, Workspace, errno};

/// Where the helpers below keep the iovec table and the buffer in guest memory.
const TABLE: i32 = 0;
const BUFFER: usize = 64;

fn memory() -> Vec<u8> {
    vec![0u8; 4096]
}

/// Points the iovec at `TABLE` at `len` bytes from `BUFFER`.
fn one_iovec(mem: &mut [u8], len: usize) {
    mem[0..4].copy_from_slice(&(BUFFER as u32).to_le_bytes());
    mem[4..8].copy_from_slice(&(len as u32).to_le_bytes());
}

fn instance(mounts: &[Mount]) -> HostState {
    let mut state = HostState::new(Meter::new());
    state.fs.set_mounts(instance_mounts(mounts));
    state
}

/// Opens `path` for reading, and for writing too unless `oflags` is [`READ_ONLY`].
fn open(state: &mut HostState, dir: i32, path: &str, oflags: u16) -> Result<i32, Errno> {
    let all = (rights::FILE_ALL | rights::DIR_BASE) as i64;
    let base = if oflags == READ_ONLY {
        rights::FD_READ as i64
    } else {
        all
    };
    path_open(
        state,
        dir,
        path,
        i32::from(oflags & !READ_ONLY),
        base,
        all,
        0,
    )
    .map(|fd| fd as i32)
}

/// Not an oflag of WASI's: `open` without the write right.
const READ_ONLY: u16 = 1 << 15;

fn read(state: &mut HostState, fd: i32, len: usize) -> Result<Vec<u8>, Errno> {
    let mut mem = memory();
    one_iovec(&mut mem, len);
    let read = fd_read(&mut mem, state, fd, TABLE, 1, None)? as usize;
    Ok(mem[BUFFER..BUFFER + read].to_vec())
}

fn write(state: &mut HostState, fd: i32, bytes: &[u8], at: Option<u64>) -> Result<u32, Errno> {
    let mut mem = memory();
    one_iovec(&mut mem, bytes.len());
    mem[BUFFER..BUFFER + bytes.len()].copy_from_slice(bytes);
    match fd_write(&mut mem, state, fd, TABLE, 1, at)? {
        Ok(written) => Ok(written),
        Err(_) => panic!("a file write stopped the guest"),
    }
}

/// The times of a stat: (atime, mtime, ctime).
fn times(stat: &[u8; 64]) -> [u64; 3] {
    let word = |at: usize| {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&stat[at..at + 8]);
        u64::from_le_bytes(bytes)
    };
    [word(40), word(48), word(56)]
}

/// A runtime's files as an image shares them: a frozen tree of eight modules, then a
/// scratch `/tmp` each instance gets empty.
fn runtime() -> Arc<[Mount]> {
    let unlimited = Quota {
        bytes: u64::MAX,
        files: u64::MAX,
    };
    let lib = Workspace::new(unlimited);
    for bit in 0..8 {
        lib.write(&format!("lib/mod{bit}.py"), b"x = 1\n").unwrap();
    }
    lib.freeze();
    Arc::from(vec![
        Mount {
            guest_path: "/usr/local/lib".into(),
            tree: lib,
            writable: false,
            scratch: false,
        },
        Mount {
            guest_path: "/tmp".into(),
            tree: Workspace::new(Quota { bytes: 0, files: 0 }),
            writable: false,
            scratch: true,
        },
    ])
}

const LIB_FD: i32 = 3;
const TMP_FD: i32 = 4;

#[test]
fn reading_shared_runtime_files_sends_nothing_to_another_instance() {
    let mounts = runtime();
    let (mut sender, receiver) = (instance(&mounts), instance(&mounts));
    let stat_all = |receiver: &HostState| -> Vec<[u8; 64]> {
        (0..8)
            .map(|bit| path_filestat(receiver, LIB_FD, &format!("lib/mod{bit}.py")).unwrap())
            .collect()
    };
    let before = stat_all(&receiver);
    // The attack: read the files whose bit is set, stat them all on the other side.
    let message = 0b1011_0010u8;
    for bit in (0..8).filter(|bit| message & (1 << bit) != 0) {
        let fd = open(&mut sender, LIB_FD, &format!("lib/mod{bit}.py"), READ_ONLY).unwrap();
        assert_eq!(read(&mut sender, fd, 100).unwrap(), b"x = 1\n");
        assert_eq!(times(&fd_filestat(&sender, fd).unwrap()), [FROZEN_NS; 3]);
    }
    let after = stat_all(&receiver);
    assert_eq!(
        before, after,
        "a read in one instance changed a stat in another"
    );
    for stat in &after {
        assert_eq!(times(stat), [FROZEN_NS; 3]);
    }
    // The directory and the root as well (readdir and stat of them).
    assert_eq!(
        times(&path_filestat(&receiver, LIB_FD, "lib").unwrap()),
        [FROZEN_NS; 3]
    );
    // Nothing else of the shared tree can be moved from a guest either.
    let fd = open(&mut sender, LIB_FD, "lib/mod0.py", READ_ONLY).unwrap();
    assert_eq!(write(&mut sender, fd, b"y", None), Err(errno::BADF));
    assert_eq!(open(&mut sender, LIB_FD, "lib/mod0.py", 0), Err(ROFS));
    assert_eq!(open(&mut sender, LIB_FD, "new.py", OFLAG_CREAT), Err(ROFS));
    assert_eq!(
        open(&mut sender, LIB_FD, "lib/mod1.py", OFLAG_TRUNC),
        Err(ROFS)
    );
    let mut tree = mounts[0].tree.lock();
    let ino = tree.resolve(ROOT, "lib/mod0.py").unwrap();
    assert_eq!(tree.write_at(ino, 0, &[b"y"]), Err(ROFS));
    assert_eq!(tree.set_len(ino, 0), Err(ROFS));
    assert_eq!(
        tree.create(ROOT, "new.py", Kind::File(Vec::new())),
        Err(ROFS)
    );
    drop(tree);
    assert_eq!(before, stat_all(&receiver));
}

#[test]
fn each_instance_has_its_own_scratch_folder_and_workspace_times() {
    let mounts = runtime();
    let (mut first, mut second) = (instance(&mounts), instance(&mounts));
    for state in [&first, &second] {
        state.fs.set_scratch_quota(Quota {
            bytes: 1024,
            files: 10,
        });
    }
    let fd = open(&mut first, TMP_FD, "note", OFLAG_CREAT).unwrap();
    write(&mut first, fd, b"private", None).unwrap();
    assert_eq!(
        open(&mut second, TMP_FD, "note", READ_ONLY),
        Err(errno::NOENT)
    );
    // A workspace's own access times move: it is one sandbox's, never another's.
    let workspace = Workspace::new(Quota {
        bytes: 1024,
        files: 10,
    });
    workspace.write("data.txt", b"abc").unwrap();
    first.fs.attach(Some(workspace.clone()));
    let root = first.fs.workspace_fd() as i32;
    {
        let mut tree = workspace.lock();
        let ino = tree.resolve(ROOT, "data.txt").unwrap();
        tree.node_mut(ino).unwrap().accessed_ns = 0;
    }
    let before = times(&path_filestat(&first, root, "data.txt").unwrap());
    let fd = open(&mut first, root, "data.txt", READ_ONLY).unwrap();
    read(&mut first, fd, 3).unwrap();
    let after = times(&path_filestat(&first, root, "data.txt").unwrap());
    assert!(after[0] > before[0], "{before:?} {after:?}");
    assert_eq!(after[1], before[1]);
}

/// A workspace with one other file in it (so the quota sum has something to wrap with) and
/// an instance holding `f.bin` open for reading and writing.
fn workspace_with_open_file() -> (Workspace, HostState, i32) {
    let workspace = Workspace::new(Quota {
        bytes: 1 << 20,
        files: 10,
    });
    workspace.write("other.bin", b"12345").unwrap();
    let mut state = HostState::new(Meter::new());
    state.fs.attach(Some(workspace.clone()));
    let fd = open(&mut state, PREOPEN_FD as i32, "f.bin", OFLAG_CREAT).unwrap();
    (workspace, state, fd)
}

#[test]
fn seeking_to_the_top_of_u64_is_refused_and_moves_nothing() {
    let (workspace, mut state, fd) = workspace_with_open_file();
    let before = workspace.usage();
    // The attack: two seeks to 2^64 - 2, then a 1-byte write that wrapped the quota sum.
    assert_eq!(seek(&mut state, fd, i64::MAX, 0), Ok(MAX_OFFSET));
    assert_eq!(seek(&mut state, fd, i64::MAX, 1), Err(errno::OVERFLOW));
    assert_eq!(
        seek(&mut state, fd, 0, 1),
        Ok(MAX_OFFSET),
        "a refused seek moved"
    );
    assert_eq!(write(&mut state, fd, b"x", None), Err(errno::FBIG));
    assert_eq!(seek(&mut state, fd, 0, 1), Ok(MAX_OFFSET));
    assert_eq!(seek(&mut state, fd, 1, 1), Err(errno::OVERFLOW));
    assert_eq!(seek(&mut state, fd, i64::MIN, 1), Err(errno::INVAL));
    assert_eq!(seek(&mut state, fd, -1, 0), Err(errno::INVAL));
    assert_eq!(seek(&mut state, fd, i64::MAX, 2), Ok(MAX_OFFSET));
    assert_eq!(seek(&mut state, fd, 0, 3), Err(errno::INVAL));
    // Past the quota but within `off_t`: the seek is allowed, the write is ENOSPC.
    assert_eq!(seek(&mut state, fd, 2 << 20, 0), Ok(2 << 20));
    assert_eq!(write(&mut state, fd, b"x", None), Err(errno::NOSPC));
    // Writing nothing there changes nothing.
    assert_eq!(write(&mut state, fd, b"", None), Ok(0));
    assert_eq!(workspace.usage(), before);
    // Positioned writes and reads: negative offsets are EINVAL, the top is EFBIG.
    for offset in [u64::MAX, u64::MAX - 1, MAX_OFFSET] {
        assert_eq!(write(&mut state, fd, b"x", Some(offset)), Err(errno::FBIG));
    }
    assert_eq!(file_offset(-1), Err(errno::INVAL));
    let mut mem = memory();
    one_iovec(&mut mem, 8);
    assert_eq!(
        fd_read(&mut mem, &mut state, fd, TABLE, 1, Some(u64::MAX)),
        Ok(0)
    );
    assert_eq!(workspace.usage(), before);
    // The file still works.
    assert_eq!(seek(&mut state, fd, 0, 0), Ok(0));
    assert_eq!(write(&mut state, fd, b"ok", None), Ok(2));
    assert_eq!(workspace.read("f.bin").unwrap(), b"ok");
}

#[test]
fn seek_targets_follow_lseek() {
    assert_eq!(seek_target(5, 10, -5, 1), Ok(0));
    assert_eq!(seek_target(5, 10, -6, 1), Err(errno::INVAL));
    assert_eq!(seek_target(0, 10, -11, 2), Err(errno::INVAL));
    assert_eq!(seek_target(0, 10, 7, 2), Ok(17));
    assert_eq!(seek_target(u64::MAX, 0, 0, 1), Err(errno::OVERFLOW));
    assert_eq!(seek_target(MAX_OFFSET, 0, -i64::MAX, 1), Ok(0));
    assert_eq!(seek_target(MAX_OFFSET, 0, i64::MIN, 1), Err(errno::INVAL));
}

#[test]
fn output_floods_are_bounded_without_copying_them() {
    let meter = Meter::new();
    meter.reset(
        &Limits {
            max_output_bytes: 100,
            ..Limits::default()
        },
        EventSink::discard(),
    );
    let mut state = HostState::new(meter.clone());
    // 1024 buffers each naming all of a 1 MiB memory: 1 GiB asked for in one call.
    let size = 1 << 20;
    let mut mem = vec![b'a'; size];
    for index in 0..iovec::MAX_IOVECS {
        let at = index * 8;
        mem[at..at + 4].copy_from_slice(&0u32.to_le_bytes());
        mem[at + 4..at + 8].copy_from_slice(&(size as u32).to_le_bytes());
    }
    let outcome = fd_write(&mut mem, &mut state, 1, 0, iovec::MAX_IOVECS as i32, None);
    assert!(matches!(outcome, Ok(Err(_))), "the flood was not stopped");
    let (stdout, stderr) = meter.output().take();
    assert_eq!((stdout.len(), stderr.len()), (100, 0));
    // One buffer more than a call may name is refused before anything is read.
    assert_eq!(
        fd_write(
            &mut mem,
            &mut state,
            1,
            0,
            iovec::MAX_IOVECS as i32 + 1,
            None
        )
        .err(),
        Some(errno::INVAL)
    );
}

#[test]
fn long_paths_are_refused_before_they_are_copied() {
    let mem = vec![b'a'; MAX_PATH + 1];
    assert_eq!(path(&mem, 0, MAX_PATH as i32 + 1), Err(errno::NAMETOOLONG));
    assert_eq!(
        path(&mem, 0, MAX_PATH as i32).map(|path| path.len()),
        Ok(MAX_PATH)
    );
}
