//! What a paused session holds ([`PausedSession`]): the image it was paused in, its
//! workspace, and its instance's state (changed memory, globals, tables, clock, `/tmp`,
//! open descriptors), by value. Reading and writing it as bytes is `body.rs` and
//! `blob.rs`; taking it from an instance `capture.rs`, putting it back `restore.rs`.

use cordon_protocol::execution::Language;

use crate::wasi_fs::DescriptorRecord;
use crate::workspace::Quota;

/// A paused sandbox session: everything needed to bring it back into a fresh instance
/// of the same image, as [`Sandbox::resume`](crate::Sandbox::resume) does.
///
/// It is plain data (no instance, no pool slot): store it with [`Self::to_bytes`] and
/// read it back with [`Self::from_bytes`], on this machine or another running the same
/// build.
#[derive(Clone, PartialEq, Eq)]
pub struct PausedSession {
    pub(crate) language: Language,
    /// The identity of the image it was paused in (`image::identity`).
    pub(crate) image: [u8; 32],
    /// The session's `/workspace`, if it had one.
    pub(crate) workspace: Option<TreeRecord>,
    /// The instance's state; none when the session held no instance (before its first
    /// execution, or after a limit discarded it).
    pub(crate) instance: Option<InstanceState>,
}

impl std::fmt::Debug for PausedSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PausedSession")
            .field("language", &self.language)
            .field("memory_bytes", &self.memory_bytes())
            .field("changed_bytes", &self.changed_bytes())
            .finish_non_exhaustive()
    }
}

impl PausedSession {
    /// The session's language.
    pub fn language(&self) -> Language {
        self.language
    }

    /// The guest's linear memory size when it was paused (0 without an instance).
    pub fn memory_bytes(&self) -> u64 {
        self.instance.as_ref().map_or(0, |state| state.memory_len)
    }

    /// Bytes of that memory held because they differ from the image (before
    /// compression).
    pub fn changed_bytes(&self) -> u64 {
        self.instance.as_ref().map_or(0, |state| {
            state.pages.iter().map(|run| run.data.len() as u64).sum()
        })
    }
}

/// A paused instance's state.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct InstanceState {
    /// Linear memory size in bytes (a whole number of wasm pages).
    pub(crate) memory_len: u64,
    /// The memory that may differ from the image (and, past the image's size, from zero),
    /// in runs of whole [`CHUNK`](super::memory::CHUNK)s.
    pub(crate) pages: Vec<PageRun>,
    /// The exported mutable globals, by name.
    pub(crate) globals: Vec<(String, GlobalValue)>,
    /// The exported tables' sizes, by name (checked, not carried: guests do not change
    /// their tables, and a grown one is refused when pausing).
    pub(crate) tables: Vec<(String, u64)>,
    /// The guest's monotonic clock, in nanoseconds.
    pub(crate) clock_ns: u64,
    /// The instance's scratch folders (`/tmp`), by guest path.
    pub(crate) scratch: Vec<(String, TreeRecord)>,
    /// Its open descriptors.
    pub(crate) descriptors: Vec<DescriptorRecord>,
}

/// A run of changed memory: `data` from chunk `first` on.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct PageRun {
    pub(crate) first: u64,
    pub(crate) data: Vec<u8>,
}

/// A global's value, by its bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GlobalValue {
    I32(u32),
    I64(u64),
    F32(u32),
    F64(u64),
}

/// A directory tree (a workspace or `/tmp`), by value: its nodes in an order where every
/// parent comes before its children, the root first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TreeRecord {
    pub(crate) quota: Quota,
    /// The next inode number it would give (open descriptors name nodes by inode).
    pub(crate) next_ino: u64,
    pub(crate) nodes: Vec<NodeRecord>,
}

/// One node of a tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NodeRecord {
    pub(crate) ino: u64,
    pub(crate) parent: u64,
    /// Its name in its parent (empty for the root).
    pub(crate) name: String,
    /// A file's contents; `None` for a directory.
    pub(crate) data: Option<Vec<u8>>,
    pub(crate) modified_ns: u64,
    pub(crate) accessed_ns: u64,
}
