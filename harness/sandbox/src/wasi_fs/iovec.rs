//! A guest's iovec arrays (`fd_read`, `fd_write` and their positioned forms): each buffer
//! checked to lie in its memory, and the lot bounded before the host allocates or copies
//! anything for them — the guest chooses every count and length.

use std::ops::Range;

use crate::workspace::{Errno, errno};

use super::abi::FAULT;

/// Buffers one call may name, as Linux's `UIO_MAXIOV` (POSIX's `IOV_MAX`, 1024 in
/// wasi-libc too): more is `EINVAL`. It bounds the host's table of them.
pub(super) const MAX_IOVECS: usize = 1024;

/// Bytes one write call takes at most. Buffers may overlap, so a guest could otherwise
/// name far more bytes than its memory holds; the caller is told how many were written and
/// writes the rest again, as with any short write.
pub(super) const MAX_WRITE_PER_CALL: usize = 16 << 20;

/// The buffers of the iovec array at `iovs`: ranges of `mem`, at most [`MAX_IOVECS`].
pub(super) fn buffers(mem: &[u8], iovs: i32, count: i32) -> Result<Vec<Range<usize>>, Errno> {
    // WASI's count is unsigned: a negative one is a count in the billions.
    let count = usize::try_from(count).map_err(|_| errno::INVAL)?;
    if count > MAX_IOVECS {
        return Err(errno::INVAL);
    }
    let start = usize::try_from(iovs).map_err(|_| FAULT)?;
    let end = start.checked_add(count * 8).ok_or(FAULT)?;
    let (table, _) = mem.get(start..end).ok_or(FAULT)?.as_chunks::<8>();
    table
        .iter()
        .map(|&[b0, b1, b2, b3, l0, l1, l2, l3]| {
            let buf = u32::from_le_bytes([b0, b1, b2, b3]) as usize;
            let len = u32::from_le_bytes([l0, l1, l2, l3]) as usize;
            let end = buf.checked_add(len).ok_or(FAULT)?;
            if end > mem.len() {
                return Err(FAULT);
            }
            Ok(buf..end)
        })
        .collect()
}

/// The first `max` bytes `buffers` name: a prefix of them, the last one cut.
pub(super) fn capped(mut buffers: Vec<Range<usize>>, max: usize) -> Vec<Range<usize>> {
    let mut left = max;
    let mut kept = 0;
    for buffer in &mut buffers {
        let take = buffer.len().min(left);
        buffer.end = buffer.start + take;
        left -= take;
        kept += 1;
        if left == 0 {
            break;
        }
    }
    buffers.truncate(kept);
    buffers
}

/// What one write call takes from the iovec array at `iovs`: its buffers, at most
/// [`MAX_WRITE_PER_CALL`] bytes in all. Nothing is copied: the caller reads them from the
/// guest's memory straight into the file or the output.
pub(super) fn write_buffers(mem: &[u8], iovs: i32, count: i32) -> Result<Vec<Range<usize>>, Errno> {
    Ok(capped(buffers(mem, iovs, count)?, MAX_WRITE_PER_CALL))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Guest memory of `size` bytes with an iovec table at 0 naming `count` times the same
    /// buffer `[64, size)`.
    fn overlapping(size: usize, count: usize) -> Vec<u8> {
        let mut mem = vec![0u8; size];
        for index in 0..count {
            let at = index * 8;
            mem[at..at + 4].copy_from_slice(&64u32.to_le_bytes());
            mem[at + 4..at + 8].copy_from_slice(&((size - 64) as u32).to_le_bytes());
        }
        mem
    }

    fn total(buffers: &[Range<usize>]) -> usize {
        buffers.iter().map(Range::len).sum()
    }

    #[test]
    fn overlapping_write_buffers_are_bounded_per_call() {
        // 8 × 4 MiB named from 4 MiB of memory: 32 MiB asked for, 16 MiB taken.
        let mem = overlapping(4 << 20, 8);
        let taken = write_buffers(&mem, 0, 8).unwrap();
        assert_eq!(total(&taken), MAX_WRITE_PER_CALL);
        // Four whole buffers of 4 MiB - 64 bytes and the start of a fifth.
        assert_eq!(taken.len(), 5);
        assert_eq!(taken[4].len(), 4 * 64);
        let small = overlapping(1024, 2);
        assert_eq!(
            total(&write_buffers(&small, 0, 2).unwrap()),
            2 * (1024 - 64)
        );
    }

    #[test]
    fn a_huge_iovec_array_is_refused_before_the_host_allocates_for_it() {
        // 64 MiB of memory holds a table of 8 Mi buffers (a host table of them would be
        // 128 MiB); each names the same 64 MiB: 512 TiB asked for in one call.
        let size = 64 << 20;
        let count = size / 8 - 8;
        let mem = overlapping(size, count);
        assert_eq!(
            buffers(&mem, 0, i32::try_from(count).unwrap()),
            Err(errno::INVAL)
        );
        // The most a call may name: 1024 × 64 MiB, of which a write takes 16 MiB.
        let taken = write_buffers(&mem, 0, MAX_IOVECS as i32).unwrap();
        assert_eq!(total(&taken), MAX_WRITE_PER_CALL);
        assert_eq!(taken.len(), 1);
    }

    #[test]
    fn iovec_tables_and_buffers_outside_memory_are_faults() {
        let mem = overlapping(1024, 2);
        assert_eq!(buffers(&mem, 1020, 1), Err(FAULT));
        assert_eq!(buffers(&mem, -8, 1), Err(FAULT));
        assert_eq!(buffers(&mem, 0, -1), Err(errno::INVAL));
        let mut bad = mem.clone();
        bad[4..8].copy_from_slice(&4096u32.to_le_bytes());
        assert_eq!(buffers(&bad, 0, 1), Err(FAULT));
        bad[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(buffers(&bad, 0, 1), Err(FAULT));
    }
}
