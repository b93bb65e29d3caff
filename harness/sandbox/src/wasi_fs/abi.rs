//! The numbers of WASI preview 1 the filesystem calls use: the import module, errnos
//! beyond the workspace's own, the preopen layout, rights, file types and flags.

use crate::workspace::{Errno, errno};

pub(super) const WASI: &str = "wasi_snapshot_preview1";
pub(super) const FAULT: Errno = 21;
pub(super) const ILSEQ: Errno = 25;
pub(super) const MFILE: Errno = 33;
pub(super) const ROFS: Errno = errno::ROFS;
pub(super) const XDEV: Errno = 75;
/// The first preopened directory.
pub(super) const PREOPEN_FD: u32 = 3;
/// Open descriptors per instance.
pub(super) const MAX_FDS: usize = 1024;

pub(super) mod rights {
    pub(crate) const FD_READ: u64 = 1 << 1;
    pub(crate) const FD_WRITE: u64 = 1 << 6;
    /// What wasmtime-wasi grants a preopened directory (many userlands expect exactly it).
    pub(crate) const DIR_BASE: u64 = (1 << 9)
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
    pub(crate) const FILE_ALL: u64 = (1 << 0)
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

pub(super) const FILETYPE_UNKNOWN: u8 = 0;
pub(super) const FILETYPE_DIRECTORY: u8 = 3;
pub(super) const FILETYPE_REGULAR: u8 = 4;
pub(super) const FDFLAG_APPEND: u16 = 1;
pub(super) const OFLAG_CREAT: u16 = 1;
pub(super) const OFLAG_DIRECTORY: u16 = 2;
pub(super) const OFLAG_EXCL: u16 = 4;
pub(super) const OFLAG_TRUNC: u16 = 8;
pub(super) const FST_ATIM: u16 = 1;
pub(super) const FST_ATIM_NOW: u16 = 2;
pub(super) const FST_MTIM: u16 = 4;
pub(super) const FST_MTIM_NOW: u16 = 8;
