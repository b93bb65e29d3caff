//! [`Sandbox::resume`]: a [`PausedSession`] brought back into a fresh instance of the
//! image it was paused in. Everything the blob says is checked against that instance
//! before it is used: pages within its memory, globals it exports with their types, its
//! tables' sizes, a well-formed tree for each folder, descriptors into them.

use std::sync::Arc;

use wasmtime::{Extern, Mutability, Val};

use super::error::ResumeError;
use super::memory::write_runs;
use super::state::{GlobalValue, InstanceState, PausedSession};
use super::trees;
use crate::image::{GuestImage, LiveInstance};
use crate::pool::{fresh_instance, make_spare};
use crate::sandbox::Sandbox;
use crate::session::{Session, SessionSpec};
use crate::workspace::Workspace;

impl Sandbox {
    /// Resumes a paused session as a new [`Session`] running with `spec` (its language
    /// must be the paused session's). The paused workspace's files go into
    /// `spec.workspace` when it has one (replacing what it held), else into a new
    /// workspace ([`Session::workspace`]).
    ///
    /// Refused with a [`ResumeError`] when the session was paused in another image (a
    /// different build or package set) or its state does not fit the image; then no
    /// instance is kept and `spec.workspace` is unchanged.
    pub async fn resume(
        &self,
        paused: &PausedSession,
        mut spec: SessionSpec,
    ) -> Result<Session, ResumeError> {
        if spec.language != paused.language {
            return Err(ResumeError::language_mismatch(
                paused.language,
                spec.language,
            ));
        }
        let image = self.image(paused.language).await?;
        if image.identity != paused.image {
            return Err(ResumeError::OtherImage {
                language: paused.language.as_str(),
            });
        }
        let invalid = ResumeError::Invalid;
        // Every tree is rebuilt (and so checked) before anything is changed.
        let workspace = paused
            .workspace
            .as_ref()
            .map(trees::rebuild)
            .transpose()
            .map_err(invalid)?;
        // The paused files go into a workspace of their own first: the descriptors are
        // checked against it before the caller's workspace is changed.
        let staged = workspace.map(|tree| {
            let staged = Workspace::new(tree.quota);
            trees::replace(&staged, tree);
            staged
        });
        let mut live = match &paused.instance {
            Some(state) => Some(self.restored_instance(&image, state).await?),
            None => None,
        };
        let descriptors = paused
            .instance
            .as_ref()
            .map_or(&[][..], |state| &state.descriptors);
        if let Some(live) = &mut live {
            let fs = &mut live.store.data_mut().fs;
            fs.attach(staged.clone().or_else(|| spec.workspace.clone()));
            fs.restore_descriptors(descriptors).map_err(invalid)?;
        }
        match (staged, &spec.workspace) {
            (Some(staged), Some(target)) => {
                trees::replace(target, trees::take(&staged));
                if let Some(live) = &mut live {
                    let fs = &mut live.store.data_mut().fs;
                    fs.attach(Some(target.clone()));
                    fs.restore_descriptors(descriptors).map_err(invalid)?;
                }
            }
            (Some(staged), None) => spec.workspace = Some(staged),
            (None, _) => {}
        }
        Ok(Session::with_instance(self.clone(), spec, live))
    }

    /// A fresh instance of `image` holding `state` (but for the descriptors, restored once
    /// the workspace is in place).
    async fn restored_instance(
        &self,
        image: &Arc<GuestImage>,
        state: &InstanceState,
    ) -> Result<LiveInstance, ResumeError> {
        let mut scratch = Vec::with_capacity(state.scratch.len());
        for (path, record) in &state.scratch {
            scratch.push((
                path.as_str(),
                trees::rebuild(record).map_err(ResumeError::Invalid)?,
            ));
        }
        let mut live = fresh_instance(self.returning(), image)
            .await
            .map_err(ResumeError::Unavailable)?;
        // The resumed session took the spare (or would have): the next one is made beside
        // it, off the resume's path.
        let (sandbox, for_spare) = (self.clone(), image.clone());
        tokio::spawn(async move { make_spare(sandbox.returning(), &for_spare).await });
        restore_instance(&mut live, state, scratch).map_err(ResumeError::Invalid)?;
        Ok(live)
    }
}

/// Puts `state` into `live`, a fresh instance of the image it was paused in.
fn restore_instance(
    live: &mut LiveInstance,
    state: &InstanceState,
    scratch: Vec<(&str, crate::workspace::Tree)>,
) -> Result<(), String> {
    let memory = live
        .store
        .data()
        .guest_memory
        .ok_or("the image exports no memory")?;
    let page_size = memory.page_size(&live.store);
    let target = state.memory_len;
    let current = memory.data_size(&live.store) as u64;
    if !target.is_multiple_of(page_size) || target < current {
        return Err(format!("a memory of {target} bytes cannot be this image's"));
    }
    if target > current {
        memory
            .grow(&mut live.store, (target - current) / page_size)
            .map_err(|error| format!("growing the memory to {target} bytes: {error}"))?;
    }
    write_runs(memory.data_mut(&mut live.store), &state.pages)?;
    for (name, value) in &state.globals {
        let Some(Extern::Global(global)) = live.instance.get_export(&mut live.store, name) else {
            return Err(format!("the image exports no global `{name}`"));
        };
        if global.ty(&live.store).mutability() != Mutability::Var {
            return Err(format!("the global `{name}` is immutable"));
        }
        let value = match *value {
            GlobalValue::I32(bits) => Val::I32(bits as i32),
            GlobalValue::I64(bits) => Val::I64(bits as i64),
            GlobalValue::F32(bits) => Val::F32(bits),
            GlobalValue::F64(bits) => Val::F64(bits),
        };
        global
            .set(&mut live.store, value)
            .map_err(|error| format!("the global `{name}`: {error}"))?;
    }
    for (name, size) in &state.tables {
        let Some(Extern::Table(table)) = live.instance.get_export(&mut live.store, name) else {
            return Err(format!("the image exports no table `{name}`"));
        };
        if table.size(&live.store) != *size {
            return Err(format!("the table `{name}` has another size in this image"));
        }
    }
    let mounts = live.store.data().fs.scratch_trees();
    for (path, tree) in scratch {
        let (_, target) = mounts
            .iter()
            .find(|(guest_path, _)| guest_path == path)
            .ok_or_else(|| format!("the image has no scratch folder `{path}`"))?;
        trees::replace(target, tree);
    }
    live.store.data_mut().restart_clock(state.clock_ns);
    Ok(())
}
