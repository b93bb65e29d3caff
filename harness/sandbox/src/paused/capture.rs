//! [`Session::pause`]: the session's instance taken apart into a [`PausedSession`] and
//! its pool slot freed. Between executions no guest frame is live, so the instance is its
//! linear memory, its globals and tables, and the host's state for it (files, descriptors,
//! clock); everything else of a store (the meter, the run) is made anew per execution.

use wasmtime::{Extern, Mutability, Val};

use super::error::PauseError;
use super::memory::changed_runs;
use super::state::{GlobalValue, InstanceState, PausedSession};
use super::trees;
use crate::image::{GuestImage, LiveInstance, instantiate};
use crate::session::Session;

impl Session {
    /// Pauses the session: captures its state (memory that differs from the image,
    /// globals, workspace, `/tmp`, open files, clock) into a [`PausedSession`] and frees
    /// its instance. The session then runs nothing more (its executions end with a
    /// `SessionPaused` error); [`Sandbox::resume`](crate::Sandbox::resume) brings the
    /// state back, in this sandbox or another running the same build.
    ///
    /// Refused, leaving the session as it was, while an execution runs in it.
    pub async fn pause(&self) -> Result<PausedSession, PauseError> {
        let mut slot = self.slot.try_lock().map_err(|_| PauseError::Busy)?;
        if slot.paused {
            return Err(PauseError::AlreadyPaused);
        }
        let language = self.spec.language;
        let image = self
            .sandbox
            .image(language)
            .await
            .map_err(|error| PauseError::Unsupported(error.to_string()))?;
        let instance = match &mut slot.live {
            Some(live) => Some(capture(live, &image).await?),
            None => None,
        };
        let paused = PausedSession {
            language,
            image: image.identity,
            workspace: self.spec.workspace.as_ref().map(trees::record),
            instance,
        };
        // Dropping the instance returns its slot to the pool.
        slot.live = None;
        slot.paused = true;
        Ok(paused)
    }
}

/// The state of `live`, an instance of `image` between executions.
async fn capture(live: &mut LiveInstance, image: &GuestImage) -> Result<InstanceState, PauseError> {
    let exports: Vec<(String, Extern)> = live
        .instance
        .exports(&mut live.store)
        .map(|export| (export.name().to_owned(), export.into_extern()))
        .collect();
    let mut globals = Vec::new();
    let mut tables = Vec::new();
    for (name, export) in exports {
        match export {
            Extern::Global(global) if global.ty(&live.store).mutability() == Mutability::Var => {
                let value = match global.get(&mut live.store) {
                    Val::I32(value) => GlobalValue::I32(value as u32),
                    Val::I64(value) => GlobalValue::I64(value as u64),
                    Val::F32(bits) => GlobalValue::F32(bits),
                    Val::F64(bits) => GlobalValue::F64(bits),
                    _ => {
                        return Err(PauseError::Unsupported(format!(
                            "the global `{name}` holds a reference"
                        )));
                    }
                };
                globals.push((name, value));
            }
            Extern::Table(table) => {
                let size = table.size(&live.store);
                if size != table.ty(&live.store).minimum() {
                    return Err(PauseError::Unsupported(format!(
                        "the guest grew its table `{name}`"
                    )));
                }
                tables.push((name, size));
            }
            _ => {}
        }
    }
    let memory = live
        .store
        .data()
        .guest_memory
        .ok_or_else(|| PauseError::Unsupported("the guest exports no memory".into()))?;
    let image_len = usize::try_from(memory.ty(&live.store).minimum())
        .ok()
        .and_then(|pages| pages.checked_mul(memory.page_size(&live.store) as usize))
        .unwrap_or(usize::MAX);
    // A fresh instance holds the image to compare with: the image's spare when it has one
    // ready (only read, then put back), else one made for it. Without either (a full
    // pool), every written page is kept.
    let reference = match image.spare.take() {
        Some(spare) => Some((spare, true)),
        None => instantiate(image).await.ok().map(|made| (made, false)),
    };
    let original = reference.as_ref().and_then(|(fresh, _)| {
        let memory = fresh.store.data().guest_memory?;
        Some(memory.data(&fresh.store))
    });
    let pages = changed_runs(memory.data(&live.store), original, image_len);
    if let Some((fresh, true)) = reference {
        image.spare.put_back(fresh);
    }
    let fs = &live.store.data().fs;
    Ok(InstanceState {
        memory_len: memory.data_size(&live.store) as u64,
        pages,
        globals,
        tables,
        clock_ns: wasmtime_wasi::HostMonotonicClock::now(&live.store.data().clock),
        scratch: fs
            .scratch_trees()
            .iter()
            .map(|(path, tree)| (path.clone(), trees::record(tree)))
            .collect(),
        descriptors: fs.descriptor_records(),
    })
}
