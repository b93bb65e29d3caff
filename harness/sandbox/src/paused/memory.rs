//! A paused instance's linear memory as the chunks that differ from its image: found
//! from the kernel's page map (pages the instance wrote are private copies; pages it only
//! read, or never touched, are still the image's), then compared with a fresh instance's
//! memory where one is at hand, so pages written back to what they held (a collector's
//! marks, a counter that went up and down) are not stored. Memory past the image's size
//! is stored only where it is not zero.
//!
//! Where the page map cannot be read (not Linux), every chunk is compared; without a
//! fresh instance to compare with, every written chunk is stored. Either way nothing that
//! differs is left out: a page the kernel does not report as written holds the image.

use super::state::PageRun;

/// The unit memory is stored in, whatever the host's page size (a blob moves between
/// hosts).
pub(crate) const CHUNK: usize = 4096;

/// The chunks of `memory` that may differ from the image: one flag per chunk.
fn candidates(memory: &[u8]) -> Vec<bool> {
    written_chunks(memory).unwrap_or_else(|| vec![true; memory.len() / CHUNK])
}

/// Bits of a `/proc/<pid>/pagemap` entry (Documentation/admin-guide/mm/pagemap.rst).
#[cfg(target_os = "linux")]
mod pagemap_bits {
    pub(super) const PRESENT: u64 = 1 << 63;
    pub(super) const SWAPPED: u64 = 1 << 62;
    pub(super) const FILE_OR_SHARED: u64 = 1 << 61;
}

/// The chunks of pages this process holds a private copy of (present and anonymous, or
/// swapped out): the pages written since the memory was mapped from the image.
#[cfg(target_os = "linux")]
fn written_chunks(memory: &[u8]) -> Option<Vec<bool>> {
    use pagemap_bits::{FILE_OR_SHARED, PRESENT, SWAPPED};
    use std::os::unix::fs::FileExt;
    let pagemap = crate::touched_pages::pagemap()?;
    let page = crate::touched_pages::page_size();
    let base = memory.as_ptr() as usize;
    if !page.is_multiple_of(CHUNK) || !base.is_multiple_of(page) {
        return None;
    }
    let pages = memory.len().div_ceil(page);
    let mut raw = vec![0u8; pages * 8];
    pagemap
        .read_exact_at(&mut raw, (base / page) as u64 * 8)
        .ok()?;
    let per_page = page / CHUNK;
    let mut chunks = vec![false; memory.len() / CHUNK];
    for (index, entry) in raw.as_chunks::<8>().0.iter().enumerate() {
        let entry = u64::from_ne_bytes(*entry);
        let private = entry & PRESENT != 0 && entry & FILE_OR_SHARED == 0;
        if private || entry & SWAPPED != 0 {
            let first = index * per_page;
            let end = (first + per_page).min(chunks.len());
            chunks[first..end].fill(true);
        }
    }
    Some(chunks)
}

#[cfg(not(target_os = "linux"))]
fn written_chunks(_memory: &[u8]) -> Option<Vec<bool>> {
    None
}

/// The runs of `memory` that differ from the image: its first `image_len` bytes are the
/// image's, and `image` (a fresh instance's memory, when at hand) holds them.
pub(crate) fn changed_runs(memory: &[u8], image: Option<&[u8]>, image_len: usize) -> Vec<PageRun> {
    let mut runs: Vec<PageRun> = Vec::new();
    let mut last_kept = None;
    for (index, candidate) in candidates(memory).into_iter().enumerate() {
        if !candidate {
            continue;
        }
        let start = index * CHUNK;
        let Some(chunk) = memory.get(start..start + CHUNK) else {
            break;
        };
        let unchanged = if start + CHUNK <= image_len {
            image
                .and_then(|image| image.get(start..start + CHUNK))
                .is_some_and(|original| original == chunk)
        } else {
            chunk.iter().all(|byte| *byte == 0)
        };
        if unchanged {
            continue;
        }
        match runs.last_mut() {
            Some(run) if last_kept == Some(index.wrapping_sub(1)) => {
                run.data.extend_from_slice(chunk);
            }
            _ => runs.push(PageRun {
                first: index as u64,
                data: chunk.to_vec(),
            }),
        }
        last_kept = Some(index);
    }
    runs
}

/// Writes `runs` into `memory` (a fresh instance's, grown to the paused size), refusing
/// any run that would reach past it.
pub(crate) fn write_runs(memory: &mut [u8], runs: &[PageRun]) -> Result<(), String> {
    for run in runs {
        let range = usize::try_from(run.first)
            .ok()
            .and_then(|first| first.checked_mul(CHUNK))
            .and_then(|start| Some(start..start.checked_add(run.data.len())?))
            .filter(|range| range.end <= memory.len())
            .ok_or_else(|| {
                format!(
                    "a memory run at chunk {} lies outside the memory",
                    run.first
                )
            })?;
        memory[range].copy_from_slice(&run.data);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_chunks_that_differ_from_the_image_or_from_zero_are_kept() {
        let image = vec![7u8; 4 * CHUNK];
        let mut memory = vec![7u8; 4 * CHUNK];
        memory.resize(8 * CHUNK, 0);
        memory[CHUNK + 5] = 1;
        memory[2 * CHUNK] = 2;
        memory[6 * CHUNK + 9] = 3;
        let runs = changed_runs(&memory, Some(&image), image.len());
        let firsts: Vec<(u64, usize)> = runs.iter().map(|r| (r.first, r.data.len())).collect();
        assert_eq!(firsts, [(1, 2 * CHUNK), (6, CHUNK)]);
        let mut restored = image.clone();
        restored.resize(8 * CHUNK, 0);
        write_runs(&mut restored, &runs).unwrap();
        assert!(restored == memory);
    }

    #[test]
    fn a_run_past_the_memory_is_refused() {
        let mut memory = vec![0u8; 2 * CHUNK];
        let run = PageRun {
            first: 1,
            data: vec![1; 2 * CHUNK],
        };
        assert!(write_runs(&mut memory, &[run]).is_err());
        let far = PageRun {
            first: u64::MAX,
            data: vec![1; CHUNK],
        };
        assert!(write_runs(&mut memory, &[far]).is_err());
    }
}
