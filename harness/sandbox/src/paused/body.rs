//! A paused session's body: [`PausedSession`] field by field (the framing around it,
//! hash and compression, is `blob.rs`). Decoding checks shapes (lengths, flags, kinds);
//! whether the contents fit an image is checked when resuming.

use cordon_protocol::execution::Language;

use super::codec::{Reader, Writer, malformed};
use super::error::BlobError;
use super::memory::CHUNK;
use super::state::{GlobalValue, InstanceState, NodeRecord, PageRun, PausedSession, TreeRecord};
use crate::wasi_fs::DescriptorRecord;
use crate::workspace::Quota;

pub(crate) fn encode(paused: &PausedSession) -> Vec<u8> {
    let mut out = Writer::default();
    out.str(paused.language.as_str());
    out.bytes.extend_from_slice(&paused.image);
    out.bool(paused.workspace.is_some());
    if let Some(tree) = &paused.workspace {
        tree_out(&mut out, tree);
    }
    out.bool(paused.instance.is_some());
    if let Some(state) = &paused.instance {
        instance_out(&mut out, state);
    }
    out.bytes
}

pub(crate) fn decode(bytes: &[u8]) -> Result<PausedSession, BlobError> {
    let mut input = Reader::new(bytes);
    let language = input.str("language")?;
    let language = Language::ALL
        .into_iter()
        .find(|known| known.as_str() == language)
        .ok_or_else(|| malformed(format!("unknown language `{language}`")))?;
    let mut image = [0u8; 32];
    for byte in &mut image {
        *byte = input.u8("image identity")?;
    }
    let workspace = if input.bool("workspace flag")? {
        Some(tree_in(&mut input)?)
    } else {
        None
    };
    let instance = if input.bool("instance flag")? {
        Some(instance_in(&mut input)?)
    } else {
        None
    };
    input.finish()?;
    Ok(PausedSession {
        language,
        image,
        workspace,
        instance,
    })
}

fn instance_out(out: &mut Writer, state: &InstanceState) {
    out.u64(state.memory_len);
    out.len(state.pages.len());
    for run in &state.pages {
        out.u64(run.first);
        out.bytes(&run.data);
    }
    out.len(state.globals.len());
    for (name, value) in &state.globals {
        out.str(name);
        let (kind, bits) = match *value {
            GlobalValue::I32(bits) => (0, u64::from(bits)),
            GlobalValue::I64(bits) => (1, bits),
            GlobalValue::F32(bits) => (2, u64::from(bits)),
            GlobalValue::F64(bits) => (3, bits),
        };
        out.u8(kind);
        out.u64(bits);
    }
    out.len(state.tables.len());
    for (name, size) in &state.tables {
        out.str(name);
        out.u64(*size);
    }
    out.u64(state.clock_ns);
    out.len(state.scratch.len());
    for (path, tree) in &state.scratch {
        out.str(path);
        tree_out(out, tree);
    }
    out.len(state.descriptors.len());
    for fd in &state.descriptors {
        out.u32(fd.fd);
        out.u64(fd.mount.map_or(0, |index| u64::from(index) + 1));
        out.u64(fd.ino);
        out.u8(u8::from(fd.dir)
            | u8::from(fd.read) << 1
            | u8::from(fd.write) << 2
            | u8::from(fd.append) << 3);
        out.u64(fd.pos);
        out.u64(fd.rights_base);
        out.u64(fd.rights_inheriting);
    }
}

fn instance_in(input: &mut Reader<'_>) -> Result<InstanceState, BlobError> {
    let memory_len = input.u64("memory size")?;
    let count = input.count(16, "memory runs")?;
    let mut pages = Vec::with_capacity(count);
    for _ in 0..count {
        let first = input.u64("memory run start")?;
        let data = input.bytes("memory run")?;
        if data.is_empty() || !data.len().is_multiple_of(CHUNK) {
            return Err(malformed("a memory run is not a whole number of chunks"));
        }
        pages.push(PageRun {
            first,
            data: data.to_vec(),
        });
    }
    let count = input.count(17, "globals")?;
    let mut globals = Vec::with_capacity(count);
    for _ in 0..count {
        let name = input.str("global name")?.to_owned();
        let kind = input.u8("global type")?;
        let bits = input.u64("global value")?;
        let narrow = || u32::try_from(bits).map_err(|_| malformed("a 32-bit global holds more"));
        let value = match kind {
            0 => GlobalValue::I32(narrow()?),
            1 => GlobalValue::I64(bits),
            2 => GlobalValue::F32(narrow()?),
            3 => GlobalValue::F64(bits),
            other => return Err(malformed(format!("global type {other}"))),
        };
        globals.push((name, value));
    }
    let count = input.count(16, "tables")?;
    let mut tables = Vec::with_capacity(count);
    for _ in 0..count {
        tables.push((
            input.str("table name")?.to_owned(),
            input.u64("table size")?,
        ));
    }
    let clock_ns = input.u64("clock")?;
    let count = input.count(8, "scratch folders")?;
    let mut scratch = Vec::with_capacity(count);
    for _ in 0..count {
        let path = input.str("scratch path")?.to_owned();
        scratch.push((path, tree_in(input)?));
    }
    let count = input.count(45, "descriptors")?;
    let mut descriptors = Vec::with_capacity(count);
    for _ in 0..count {
        let fd = input.u32("descriptor")?;
        let mount = match input.u64("descriptor mount")? {
            0 => None,
            index => Some(
                u32::try_from(index - 1).map_err(|_| malformed("descriptor mount out of range"))?,
            ),
        };
        let ino = input.u64("descriptor node")?;
        let flags = input.u8("descriptor flags")?;
        if flags >> 4 != 0 {
            return Err(malformed("unknown descriptor flags"));
        }
        descriptors.push(DescriptorRecord {
            fd,
            mount,
            ino,
            dir: flags & 1 != 0,
            read: flags & 2 != 0,
            write: flags & 4 != 0,
            append: flags & 8 != 0,
            pos: input.u64("descriptor position")?,
            rights_base: input.u64("descriptor rights")?,
            rights_inheriting: input.u64("descriptor inherited rights")?,
        });
    }
    Ok(InstanceState {
        memory_len,
        pages,
        globals,
        tables,
        clock_ns,
        scratch,
        descriptors,
    })
}

fn tree_out(out: &mut Writer, tree: &TreeRecord) {
    out.u64(tree.quota.bytes);
    out.u64(tree.quota.files);
    out.u64(tree.next_ino);
    out.len(tree.nodes.len());
    for node in &tree.nodes {
        out.u64(node.ino);
        out.u64(node.parent);
        out.str(&node.name);
        out.bool(node.data.is_some());
        if let Some(data) = &node.data {
            out.bytes(data);
        }
        out.u64(node.modified_ns);
        out.u64(node.accessed_ns);
    }
}

fn tree_in(input: &mut Reader<'_>) -> Result<TreeRecord, BlobError> {
    let quota = Quota {
        bytes: input.u64("quota bytes")?,
        files: input.u64("quota files")?,
    };
    let next_ino = input.u64("next inode")?;
    let count = input.count(41, "tree nodes")?;
    let mut nodes = Vec::with_capacity(count);
    for _ in 0..count {
        let ino = input.u64("inode")?;
        let parent = input.u64("parent inode")?;
        let name = input.str("name")?.to_owned();
        let data = if input.bool("file flag")? {
            Some(input.bytes("file contents")?.to_vec())
        } else {
            None
        };
        nodes.push(NodeRecord {
            ino,
            parent,
            name,
            data,
            modified_ns: input.u64("modified time")?,
            accessed_ns: input.u64("access time")?,
        });
    }
    Ok(TreeRecord {
        quota,
        next_ino,
        nodes,
    })
}
