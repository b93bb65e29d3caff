//! How the filesystem calls reach the store's data without naming its type (wasmtime's
//! `WasiView` pattern): the embedder's state implements [`FilesView`].

use std::sync::Arc;

use wasmtime::Memory;

use crate::meter::Meter;

use super::files::FsState;

/// What the filesystem calls need of a store's data.
pub(crate) trait FilesView {
    /// The instance's descriptors and the trees they point into.
    fn files(&self) -> &FsState;
    /// The same, to change.
    fn files_mut(&mut self) -> &mut FsState;
    /// Where writes to the standard streams go, and what stops the guest past its limit.
    fn meter(&self) -> &Arc<Meter>;
    /// The guest's exported memory, if it was found already (else it is looked up by name).
    fn guest_memory(&self) -> Option<Memory>;
}
