//! The WASI preview 1 filesystem of a guest, served from its [`Workspace`](crate::Workspace)
//! (in memory).
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
//!
//! The files state ([`FsState`], `files.rs`) is kept apart from the guest-facing calls
//! (`calls.rs`, defined on a linker in `linker.rs`); the calls reach it through
//! [`FilesView`], which the embedder's store data implements, so they never name it.

mod abi;
mod calls;
mod files;
mod guest_memory;
mod iovec;
mod linker;
#[cfg(test)]
mod tests;
mod view;

pub(crate) use files::{DescriptorRecord, FsState, Mount, instance_mounts};
pub(crate) use linker::add_to_linker;
pub(crate) use view::FilesView;
