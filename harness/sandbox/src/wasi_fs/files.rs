//! The files state of one instance: its descriptors, the runtime mounts its image
//! preopens, and the workspace they point into. The guest-facing calls are in `calls.rs`.

use std::collections::HashMap;
use std::sync::Arc;

use crate::workspace::{Errno, GUEST_ROOT, Quota, ROOT, Tree, Workspace, errno};

use super::abi::{MAX_FDS, MFILE, PREOPEN_FD, ROFS, rights};

/// Which tree a descriptor points into.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Source {
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

pub(super) struct Open {
    pub(super) source: Source,
    pub(super) ino: u64,
    pub(super) dir: bool,
    pub(super) read: bool,
    pub(super) write: bool,
    pub(super) append: bool,
    pub(super) pos: u64,
    pub(super) rights_base: u64,
    pub(super) rights_inheriting: u64,
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
    pub(super) fds: HashMap<u32, Open>,
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
    pub(super) fn workspace_fd(&self) -> u32 {
        PREOPEN_FD + self.mounts.len() as u32
    }

    /// The guest path of a preopened descriptor.
    pub(super) fn preopen_path(&self, fd: i32) -> Option<&str> {
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

    pub(super) fn writable(&self, source: Source) -> bool {
        match source {
            // The placeholder of an execution without a workspace is read-only.
            Source::Workspace => !matches!(
                (&self.workspace, &self.placeholder),
                (Some(workspace), Some(placeholder)) if workspace.same_tree(placeholder)
            ),
            Source::Runtime(index) => self.mounts.get(index).is_some_and(|mount| mount.writable),
        }
    }

    pub(super) fn open(&self, fd: i32) -> Result<&Open, Errno> {
        u32::try_from(fd)
            .ok()
            .and_then(|fd| self.fds.get(&fd))
            .ok_or(errno::BADF)
    }

    pub(super) fn open_mut(&mut self, fd: i32) -> Result<&mut Open, Errno> {
        u32::try_from(fd)
            .ok()
            .and_then(|fd| self.fds.get_mut(&fd))
            .ok_or(errno::BADF)
    }

    pub(super) fn tree(&self, source: Source) -> Result<std::sync::MutexGuard<'_, Tree>, Errno> {
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
    pub(super) fn tree_of(&self, fd: i32) -> Result<std::sync::MutexGuard<'_, Tree>, Errno> {
        self.tree(self.open(fd)?.source)
    }

    /// The tree behind a descriptor, for changing it (`EROFS` on a read-only mount).
    pub(super) fn tree_to_change(&self, fd: i32) -> Result<std::sync::MutexGuard<'_, Tree>, Errno> {
        let source = self.open(fd)?.source;
        if !self.writable(source) {
            return Err(ROFS);
        }
        self.tree(source)
    }

    pub(super) fn insert(&mut self, open: Open) -> Result<u32, Errno> {
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
    pub(super) fn dir_fd(&self, fd: i32) -> Result<u64, Errno> {
        let open = self.open(fd)?;
        if open.dir {
            Ok(open.ino)
        } else {
            Err(errno::NOTDIR)
        }
    }
}

/// One open descriptor as a paused session stores it: where it points and how it was
/// opened, by value (the tree it points into is stored beside it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DescriptorRecord {
    pub(crate) fd: u32,
    /// `None`: the workspace; `Some(i)`: the image's runtime mount `i`.
    pub(crate) mount: Option<u32>,
    pub(crate) ino: u64,
    pub(crate) dir: bool,
    pub(crate) read: bool,
    pub(crate) write: bool,
    pub(crate) append: bool,
    pub(crate) pos: u64,
    pub(crate) rights_base: u64,
    pub(crate) rights_inheriting: u64,
}

impl FsState {
    /// The open descriptors, in descriptor order.
    pub(crate) fn descriptor_records(&self) -> Vec<DescriptorRecord> {
        let mut records: Vec<DescriptorRecord> = self
            .fds
            .iter()
            .map(|(fd, open)| DescriptorRecord {
                fd: *fd,
                mount: match open.source {
                    Source::Workspace => None,
                    Source::Runtime(index) => Some(index as u32),
                },
                ino: open.ino,
                dir: open.dir,
                read: open.read,
                write: open.write,
                append: open.append,
                pos: open.pos,
                rights_base: open.rights_base,
                rights_inheriting: open.rights_inheriting,
            })
            .collect();
        records.sort_by_key(|record| record.fd);
        records
    }

    /// Replaces the descriptors with `records` (after [`Self::attach`]), checking each
    /// against this instance: a descriptor number the guest could hold, a mount it has, a
    /// node of the right kind where the node still exists (a descriptor of a removed file
    /// answers `EBADF`, as it did), and no rights beyond what the calls grant.
    pub(crate) fn restore_descriptors(
        &mut self,
        records: &[DescriptorRecord],
    ) -> Result<(), String> {
        if records.len() > MAX_FDS {
            return Err(format!("{} descriptors (at most {MAX_FDS})", records.len()));
        }
        let mut fds = HashMap::with_capacity(records.len());
        for record in records {
            if record.fd < PREOPEN_FD || record.fd >= PREOPEN_FD + 4 * MAX_FDS as u32 {
                return Err(format!("descriptor {} is out of range", record.fd));
            }
            let source = match record.mount {
                None if self.workspace.is_some() => Source::Workspace,
                None => return Err(format!("descriptor {} needs a workspace", record.fd)),
                Some(index) if (index as usize) < self.mounts.len() => {
                    Source::Runtime(index as usize)
                }
                Some(index) => return Err(format!("no runtime mount {index}")),
            };
            if let Ok(node) = self.tree(source).map_err(|_| ()).and_then(|tree| {
                tree.node(record.ino)
                    .map(|node| matches!(node.kind, crate::workspace::Kind::Dir(_)))
                    .map_err(|_| ())
            }) && node != record.dir
            {
                return Err(format!("descriptor {} has the wrong kind", record.fd));
            }
            let allowed = rights::DIR_BASE | rights::FILE_ALL;
            let open = Open {
                source,
                ino: record.ino,
                dir: record.dir,
                read: record.read,
                write: record.write,
                append: record.append,
                pos: record.pos.min(crate::workspace::MAX_OFFSET),
                rights_base: record.rights_base & allowed,
                rights_inheriting: record.rights_inheriting & allowed,
            };
            if fds.insert(record.fd, open).is_some() {
                return Err(format!("descriptor {} appears twice", record.fd));
            }
        }
        self.fds = fds;
        Ok(())
    }

    /// This instance's scratch folders (`/tmp`), by guest path.
    pub(crate) fn scratch_trees(&self) -> Vec<(String, Workspace)> {
        self.mounts
            .iter()
            .filter(|mount| mount.scratch)
            .map(|mount| (mount.guest_path.clone(), mount.tree.clone()))
            .collect()
    }
}

impl Open {
    /// A preopened root directory.
    pub(super) fn root(source: Source) -> Open {
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

pub(super) fn is_stdio(fd: i32) -> bool {
    (0..=2).contains(&fd)
}
