//! A guest's memory as the filesystem calls read and write it: ranges checked to lie in
//! it, little-endian results, paths, and the call that lends a call's body the memory and
//! the store data at once.

use wasmtime::{Caller, Extern, Memory};

use crate::workspace::{Errno, MAX_DEPTH, errno};

use super::abi::{FAULT, ILSEQ};
use super::view::FilesView;

pub(super) fn range(mem: &[u8], ptr: i32, len: usize) -> Result<std::ops::Range<usize>, Errno> {
    let start = usize::try_from(ptr).map_err(|_| FAULT)?;
    let end = start.checked_add(len).ok_or(FAULT)?;
    if end > mem.len() {
        return Err(FAULT);
    }
    Ok(start..end)
}

pub(super) fn put_u32(mem: &mut [u8], ptr: i32, value: u32) -> Result<(), Errno> {
    let at = range(mem, ptr, 4)?;
    mem[at].copy_from_slice(&value.to_le_bytes());
    Ok(())
}

pub(super) fn put_u64(mem: &mut [u8], ptr: i32, value: u64) -> Result<(), Errno> {
    let at = range(mem, ptr, 8)?;
    mem[at].copy_from_slice(&value.to_le_bytes());
    Ok(())
}

/// The longest path a call may name: the deepest tree of the longest names. It bounds
/// what the host copies out of the guest for one path.
pub(super) const MAX_PATH: usize = MAX_DEPTH * 256;

pub(super) fn path(mem: &[u8], ptr: i32, len: i32) -> Result<String, Errno> {
    let len = usize::try_from(len).map_err(|_| FAULT)?;
    if len > MAX_PATH {
        return Err(errno::NAMETOOLONG);
    }
    let at = range(mem, ptr, len)?;
    std::str::from_utf8(&mem[at])
        .map(str::to_owned)
        .map_err(|_| ILSEQ)
}

pub(super) fn put_bytes(mem: &mut [u8], ptr: i32, bytes: &[u8]) -> Result<(), Errno> {
    let at = range(mem, ptr, bytes.len())?;
    mem[at].copy_from_slice(bytes);
    Ok(())
}

/// The guest's exported memory: the one the store data found already, else by name.
fn memory<T: FilesView>(caller: &mut Caller<'_, T>) -> Option<Memory> {
    if let Some(memory) = caller.data().guest_memory() {
        return Some(memory);
    }
    match caller.get_export("memory") {
        Some(Extern::Memory(memory)) => Some(memory),
        _ => None,
    }
}

type Mem<'a, T> = (&'a mut [u8], &'a mut T);

pub(super) fn with_memory<T: FilesView + 'static, R>(
    caller: &mut Caller<'_, T>,
    body: impl FnOnce(&mut [u8], &mut T) -> Result<R, Errno>,
) -> Result<R, Errno> {
    let Some(memory) = memory(caller) else {
        return Err(FAULT);
    };
    let (mem, state): Mem<'_, T> = memory.data_and_store_mut(caller);
    body(mem, state)
}

pub(super) fn code(result: Result<(), Errno>) -> i32 {
    match result {
        Ok(()) => 0,
        Err(errno) => i32::from(errno),
    }
}
