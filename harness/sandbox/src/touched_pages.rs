//! Which pages of a guest's memory a run touched, and faulting such pages in ahead of a
//! run, so a fresh instance's first touches do not each stop for the kernel.
//!
//! A fresh instance maps its image copy-on-write: every page a run reads is mapped on its
//! first read (a minor fault) and every page it writes is copied on its first write. For
//! RustPython's `print(1)` that was ~250 faults, about 40 % of the run (perf, this
//! machine). [`touched`] reads, from `/proc/self/pagemap`, which pages a finished run left
//! mapped, and [`populate`] maps (or copies) the same pages in a new instance with
//! `MADV_POPULATE_READ` / `MADV_POPULATE_WRITE`, in a few calls instead of a fault per
//! page. Both are Linux-only; elsewhere nothing is learned and nothing populated.

/// A stretch of consecutive pages that a run read, or wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PageRun {
    /// The first page's offset into the memory, in pages.
    pub(crate) first: usize,
    pub(crate) count: usize,
    /// Written (a private copy of the page), rather than only read (the image's page).
    pub(crate) written: bool,
}

/// Bits of a `/proc/<pid>/pagemap` entry (Documentation/admin-guide/mm/pagemap.rst).
const PAGEMAP_PRESENT: u64 = 1 << 63;
const PAGEMAP_FILE_OR_SHARED: u64 = 1 << 61;

/// The size of a host page.
pub(crate) fn page_size() -> usize {
    rustix::param::page_size()
}

/// Turns pagemap entries (one per page, in order) into runs of read and written pages,
/// keeping at most `budget` pages (the lowest first: the image's data and the early heap,
/// which every run touches; a run that grew the heap by far leaves its tail out).
pub(crate) fn runs_of(entries: impl IntoIterator<Item = u64>, budget: usize) -> Vec<PageRun> {
    let mut runs: Vec<PageRun> = Vec::new();
    let mut kept = 0;
    for (page, entry) in entries.into_iter().enumerate() {
        if kept == budget {
            break;
        }
        if entry & PAGEMAP_PRESENT == 0 {
            continue;
        }
        // A page copied on write is anonymous; one still shared with the image (or with
        // the in-memory image's memfd) is a file page.
        let written = entry & PAGEMAP_FILE_OR_SHARED == 0;
        kept += 1;
        match runs.last_mut() {
            Some(last) if last.written == written && last.first + last.count == page => {
                last.count += 1;
            }
            _ => runs.push(PageRun {
                first: page,
                count: 1,
                written,
            }),
        }
    }
    runs
}

/// This process's `/proc/self/pagemap`, opened once (none where it cannot be read).
#[cfg(target_os = "linux")]
pub(crate) fn pagemap() -> Option<&'static std::fs::File> {
    static PAGEMAP: std::sync::OnceLock<Option<std::fs::File>> = std::sync::OnceLock::new();
    PAGEMAP
        .get_or_init(|| std::fs::File::open("/proc/self/pagemap").ok())
        .as_ref()
}

/// The pages of `memory` that are mapped now: what a run since the instance was made
/// touched (plus the kernel's fault-around neighbours). At most `budget` pages.
#[cfg(target_os = "linux")]
pub(crate) fn touched(memory: &[u8], budget: usize) -> std::io::Result<Vec<PageRun>> {
    use std::os::unix::fs::FileExt;
    let Some(pagemap) = pagemap() else {
        return Err(std::io::ErrorKind::Unsupported.into());
    };
    let page = page_size();
    let first = memory.as_ptr() as usize / page;
    let pages = memory.len() / page;
    let mut raw = vec![0u8; pages * 8];
    pagemap.read_exact_at(&mut raw, (first as u64) * 8)?;
    let entries = raw
        .as_chunks::<8>()
        .0
        .iter()
        .map(|entry| u64::from_ne_bytes(*entry));
    Ok(runs_of(entries, budget))
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn touched(_memory: &[u8], _budget: usize) -> std::io::Result<Vec<PageRun>> {
    Err(std::io::ErrorKind::Unsupported.into())
}

/// Maps the pages `runs` read, and copies the pages they wrote, in `memory`, as a run's
/// first touches would. The contents do not change. Stops at the first refusal (a kernel
/// before 5.14 has no `MADV_POPULATE_*`): this only saves time.
#[cfg(target_os = "linux")]
#[allow(
    unsafe_code,
    reason = "madvise on a range of a borrowed slice; populating does not change contents"
)]
pub(crate) fn populate(memory: &mut [u8], runs: &[PageRun]) {
    let page = page_size();
    // Written pages first: copying a page that is not mapped yet needs no TLB flush, but
    // a read mapped first (the kernel maps a read's neighbours too) would have to be
    // flushed on every CPU the process runs on when it is copied, an interrupt per page
    // (measured: the populate then cost more than the faults it saved).
    let (written, read): (Vec<&PageRun>, Vec<&PageRun>) = runs.iter().partition(|r| r.written);
    for run in written.into_iter().chain(read) {
        // A run may have grown the memory past a new instance's size: what lies beyond it
        // is not mapped yet.
        let start = run.first * page;
        let len = (run.count * page).min(memory.len().saturating_sub(start));
        if len == 0 {
            continue;
        }
        let advice = if run.written {
            libc::MADV_POPULATE_WRITE
        } else {
            libc::MADV_POPULATE_READ
        };
        // SAFETY: the range lies within `memory`, which is mapped and borrowed mutably
        // for the call; populating faults pages in and does not change what they hold.
        let refused =
            unsafe { libc::madvise(memory[start..].as_mut_ptr().cast(), len, advice) } != 0;
        if refused {
            return;
        }
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn populate(_memory: &mut [u8], _runs: &[PageRun]) {}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPPED: u64 = PAGEMAP_PRESENT | PAGEMAP_FILE_OR_SHARED;
    const COPIED: u64 = PAGEMAP_PRESENT;

    #[test]
    fn pagemap_entries_become_runs_of_read_and_written_pages() {
        let entries = [0, MAPPED, MAPPED, COPIED, COPIED, 0, COPIED, MAPPED];
        let runs = runs_of(entries, usize::MAX);
        let run = |first, count, written| PageRun {
            first,
            count,
            written,
        };
        assert_eq!(
            runs,
            [
                run(1, 2, false),
                run(3, 2, true),
                run(6, 1, true),
                run(7, 1, false)
            ]
        );
    }

    #[test]
    fn runs_keep_the_lowest_pages_within_the_budget() {
        let entries = [COPIED, 0, COPIED, COPIED, COPIED];
        let runs = runs_of(entries, 2);
        assert_eq!(runs.iter().map(|r| r.count).sum::<usize>(), 2);
        assert_eq!(runs.last().map(|r| r.first + r.count), Some(3));
    }

    #[cfg(target_os = "linux")]
    #[test]
    #[allow(clippy::expect_used, reason = "tests")]
    fn a_written_page_reads_as_copied_and_populating_keeps_contents() {
        let page = page_size();
        // Anonymous memory: the first page written, the second never touched.
        let mut memory = vec![0u8; 8 * page];
        let offset = memory.as_ptr().align_offset(page);
        let aligned = &mut memory[offset..offset + 4 * page];
        aligned[0] = 7;
        let runs = touched(aligned, usize::MAX).expect("pagemap is readable");
        assert!(
            runs.iter().any(|r| r.first == 0 && r.written),
            "the written page is reported as written: {runs:?}"
        );
        populate(aligned, &runs);
        assert_eq!(aligned[0], 7);
        assert!(aligned[1..].iter().all(|b| *b == 0));
    }
}
