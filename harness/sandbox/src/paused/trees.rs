//! Directory trees (a workspace, `/tmp`) to [`TreeRecord`]s and back. Putting one back
//! checks it is a tree: the root first, every node under a directory recorded before it,
//! names a path component may have, no inode twice, no deeper than the workspace allows.

use std::collections::{BTreeMap, HashMap};

use super::state::{NodeRecord, TreeRecord};
use crate::workspace::{Kind, MAX_DEPTH, MAX_NAME, MAX_OFFSET, Node, ROOT, Tree, Workspace};

/// The tree behind `workspace`, root first, each directory's entries after it.
pub(crate) fn record(workspace: &Workspace) -> TreeRecord {
    let tree = workspace.lock();
    let mut nodes = Vec::with_capacity(tree.nodes.len());
    let mut pending = vec![(ROOT, ROOT, String::new())];
    while let Some((ino, parent, name)) = pending.pop() {
        let Some(node) = tree.nodes.get(&ino) else {
            continue;
        };
        let data = match &node.kind {
            Kind::File(data) => Some(data.clone()),
            Kind::Dir(entries) => {
                pending.extend(
                    entries
                        .iter()
                        .rev()
                        .map(|(name, child)| (*child, ino, name.clone())),
                );
                None
            }
        };
        nodes.push(NodeRecord {
            ino,
            parent,
            name,
            data,
            modified_ns: node.modified_ns,
            accessed_ns: node.accessed_ns,
        });
    }
    TreeRecord {
        quota: tree.quota,
        next_ino: tree.next_ino,
        nodes,
    }
}

/// The tree `record` describes, checked.
pub(crate) fn rebuild(record: &TreeRecord) -> Result<Tree, String> {
    let mut tree = Tree::new(record.quota);
    tree.nodes.clear();
    let mut depth: HashMap<u64, usize> = HashMap::with_capacity(record.nodes.len());
    let mut most = ROOT;
    for (index, node) in record.nodes.iter().enumerate() {
        let kind = match &node.data {
            Some(data) if (data.len() as u64) <= MAX_OFFSET => Kind::File(data.clone()),
            Some(_) => return Err("a file is larger than a file may be".into()),
            None => Kind::Dir(BTreeMap::new()),
        };
        if index == 0 {
            if node.ino != ROOT || node.data.is_some() || !node.name.is_empty() {
                return Err("a tree does not start with its root directory".into());
            }
            depth.insert(ROOT, 0);
        } else {
            if node.ino == ROOT || depth.contains_key(&node.ino) {
                return Err(format!("inode {} appears twice", node.ino));
            }
            let bad_name = node.name.is_empty()
                || node.name == "."
                || node.name == ".."
                || node.name.len() > MAX_NAME
                || node.name.contains(['/', '\0']);
            if bad_name {
                return Err(format!("`{}` is not a file name", node.name.escape_debug()));
            }
            let level = depth
                .get(&node.parent)
                .map(|level| level + 1)
                .filter(|level| *level <= MAX_DEPTH)
                .ok_or_else(|| format!("inode {} is not under a directory", node.ino))?;
            let Some(Node {
                kind: Kind::Dir(entries),
                ..
            }) = tree.nodes.get_mut(&node.parent)
            else {
                return Err(format!("inode {} is not under a directory", node.ino));
            };
            if entries.insert(node.name.clone(), node.ino).is_some() {
                return Err(format!("`{}` appears twice in a directory", node.name));
            }
            depth.insert(node.ino, level);
            tree.entries += 1;
        }
        if let Kind::File(data) = &kind {
            tree.bytes = tree.bytes.saturating_add(data.len() as u64);
        }
        most = most.max(node.ino);
        tree.nodes.insert(
            node.ino,
            Node {
                kind,
                parent: if index == 0 { ROOT } else { node.parent },
                modified_ns: node.modified_ns,
                accessed_ns: node.accessed_ns,
            },
        );
    }
    if tree.nodes.is_empty() {
        return Err("a tree without a root".into());
    }
    tree.next_ino = record.next_ino.max(most.saturating_add(1));
    Ok(tree)
}

/// What `workspace` holds, leaving it empty.
pub(crate) fn take(workspace: &Workspace) -> Tree {
    let mut tree = workspace.lock();
    let quota = tree.quota;
    std::mem::replace(&mut *tree, Tree::new(quota))
}

/// Replaces what `workspace` holds with `tree` (every handle to it sees the change).
pub(crate) fn replace(workspace: &Workspace, tree: Tree) {
    *workspace.lock() = tree;
}
