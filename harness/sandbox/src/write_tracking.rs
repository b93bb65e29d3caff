//! Exact written-page tracking for memory slots the pool resets in place.
//!
//! wasmtime resets a returned slot's memory in place by asking Linux's `PAGEMAP_SCAN`
//! for its written pages and copying the image back into those. Outside a range armed
//! for userfaultfd's asynchronous write protection the kernel has no record of writes,
//! and counts every page of a page table the run touched as written (Linux 6.18: a page
//! written, or only read, is reported with most of its page table). A RustPython run
//! writes few pages, yet its slot's reset copied many times as many (figures in
//! `docs/benchmarks.md`), so RustPython could not be reset in place at all.
//!
//! [`track`] arms a fresh instance's memory: registered with one process-wide
//! userfaultfd in `WP_ASYNC` mode and write-protected while its contents are still the
//! image's. The kernel then lifts a page's protection at its first write, in the fault
//! itself (no event, no handler thread), and `PAGEMAP_SCAN` reports exactly the pages
//! written since the memory was armed. A memory stays armed while its slot keeps its
//! mapping: pages once written stay reported, so a slot's reset copies the pages any of
//! its runs wrote (up to the pool's keep-resident budget), and the next run writes them
//! without a fault. The kernel also lifts the protection for its own writes (a `read`
//! into guest memory), so nothing a host call does is missed.
//!
//! Arming is never needed for correctness: a page left unarmed is over-reported, which
//! costs the reset time, never a stale page. Only a page protected while it held
//! something other than the image would be missed, so memory is armed only before any
//! guest code has run in it. Where the kernel refuses (before 6.7, or a seccomp filter
//! without `userfaultfd`), [`available`] says so and the caller keeps its slots unmapped.

/// The length of the range [`track`] arms for a memory of `size` bytes that may grow to
/// `max` bytes: its size now and some growth, in whole host pages, never past `max` (the
/// pool's slots are at least that large, so the range stays in the instance's own slot).
pub(crate) fn tracked_len(size: usize, max: usize) -> usize {
    let page = crate::touched_pages::page_size();
    (size.saturating_add(GROWTH_TRACKED) / page * page).min(max / page * page)
}

/// Memory beyond a fresh instance's size armed with it. Untracked memory is over-reported
/// only around what a run wrote (the rest of each 2 MiB block it touched), so what is worth
/// tracking is the first block a growing heap moves into; each MiB armed costs a little
/// per instance made (the scan in [`track`]) and once per slot (figures in
/// `docs/benchmarks.md`).
const GROWTH_TRACKED: usize = 2 << 20;

#[cfg(target_os = "linux")]
pub(crate) use linux::{available, track};

#[cfg(not(target_os = "linux"))]
pub(crate) fn available() -> bool {
    false
}

/// # Safety
/// As on Linux.
#[cfg(not(target_os = "linux"))]
pub(crate) unsafe fn track(_base: *mut u8, _len: usize) {}

#[cfg(target_os = "linux")]
#[allow(
    unsafe_code,
    reason = "userfaultfd and PAGEMAP_SCAN ioctls on a range of a pool slot"
)]
mod linux {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::sync::OnceLock;

    // The kernel's ABI (include/uapi/linux/userfaultfd.h and fs.h); Debian 12's headers
    // and the libc crate predate `WP_ASYNC` and `PAGEMAP_SCAN`.
    const UFFD_API: u64 = 0xAA;
    const UFFD_USER_MODE_ONLY: libc::c_int = 1;
    const UFFD_FEATURE_WP_UNPOPULATED: u64 = 1 << 13;
    const UFFD_FEATURE_WP_ASYNC: u64 = 1 << 15;
    const UFFDIO_REGISTER_MODE_WP: u64 = 1 << 1;
    const UFFDIO_WRITEPROTECT_MODE_WP: u64 = 1 << 0;
    const PM_SCAN_WP_MATCHING: u64 = 1 << 0;
    const PM_SCAN_CHECK_WPASYNC: u64 = 1 << 1;
    pub(super) const PAGE_IS_WRITTEN: u64 = 1 << 1;
    const PAGE_IS_PRESENT: u64 = 1 << 3;
    const PAGE_IS_SWAPPED: u64 = 1 << 4;

    #[repr(C)]
    struct UffdioApi {
        api: u64,
        features: u64,
        ioctls: u64,
    }

    #[repr(C)]
    struct UffdioRange {
        start: u64,
        len: u64,
    }

    #[repr(C)]
    struct UffdioRegister {
        range: UffdioRange,
        mode: u64,
        ioctls: u64,
    }

    #[repr(C)]
    struct UffdioWriteprotect {
        range: UffdioRange,
        mode: u64,
    }

    #[repr(C)]
    pub(super) struct PageRegion {
        pub(super) start: u64,
        pub(super) end: u64,
        pub(super) categories: u64,
    }

    #[repr(C)]
    #[derive(Default, Clone, Copy)]
    pub(super) struct PmScanArg {
        pub(super) size: u64,
        pub(super) flags: u64,
        pub(super) start: u64,
        pub(super) end: u64,
        pub(super) walk_end: u64,
        pub(super) vec: u64,
        pub(super) vec_len: u64,
        pub(super) max_pages: u64,
        pub(super) category_inverted: u64,
        pub(super) category_mask: u64,
        pub(super) category_anyof_mask: u64,
        pub(super) return_mask: u64,
    }

    /// `_IOWR(kind, number, T)` in the generic encoding (x86-64, AArch64, RISC-V, …).
    const fn read_write<T>(kind: u8, number: u8) -> libc::c_ulong {
        ((3 << 30) | (size_of::<T>() << 16) | ((kind as usize) << 8) | number as usize)
            as libc::c_ulong
    }

    const UFFDIO_API: libc::c_ulong = read_write::<UffdioApi>(0xAA, 0x3F);
    const UFFDIO_REGISTER: libc::c_ulong = read_write::<UffdioRegister>(0xAA, 0x00);
    const UFFDIO_WRITEPROTECT: libc::c_ulong = read_write::<UffdioWriteprotect>(0xAA, 0x06);
    pub(super) const PAGEMAP_SCAN: libc::c_ulong = read_write::<PmScanArg>(b'f', 16);

    /// The process's userfaultfd in asynchronous write-protect mode (it must stay open:
    /// closing it would drop every registration), or none where the kernel refuses, or
    /// does not track a scratch mapping's one written page exactly.
    fn userfaultfd() -> Option<&'static OwnedFd> {
        static FD: OnceLock<Option<OwnedFd>> = OnceLock::new();
        FD.get_or_init(|| {
            // User-mode-only is what an unprivileged process may open where
            // `vm.unprivileged_userfaultfd` is 0; asynchronous write faults are resolved
            // by the kernel whatever mode they come from.
            let flags = libc::O_CLOEXEC | libc::O_NONBLOCK | UFFD_USER_MODE_ONLY;
            // SAFETY: a plain system call; a non-negative result is a new descriptor we own.
            let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) };
            let fd = libc::c_int::try_from(fd).ok().filter(|fd| *fd >= 0)?;
            // SAFETY: `fd` was just opened and is owned by nothing else.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            let wanted = UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED;
            let mut api = UffdioApi {
                api: UFFD_API,
                features: wanted,
                ioctls: 0,
            };
            // SAFETY: `api` is the argument this request expects and outlives the call.
            let refused = unsafe { libc::ioctl(fd.as_raw_fd(), UFFDIO_API, &raw mut api) } != 0;
            // Older kernels grant what they have and say so, rather than refuse.
            if refused || api.features & wanted != wanted {
                return None;
            }
            tracks_exactly(&fd).then_some(fd)
        })
        .as_ref()
    }

    /// Arms a scratch mapping, writes one page of it and reads the count back: the whole
    /// path works here (registration, protection, `PAGEMAP_SCAN`), or nothing is armed.
    fn tracks_exactly(fd: &OwnedFd) -> bool {
        let page = crate::touched_pages::page_size();
        let len = 4 * page;
        // SAFETY: a new private anonymous mapping, used only here and unmapped at the end.
        unsafe {
            let base = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if base == libc::MAP_FAILED {
                return false;
            }
            let start = base as usize;
            let exact = arm(fd, start, len) && {
                std::ptr::write_volatile(base.cast::<u8>().add(page), 1);
                std::ptr::read_volatile(base.cast::<u8>().add(2 * page));
                written_pages(start, start + len) == Some(1)
            };
            libc::munmap(base, len);
            exact
        }
    }

    /// The pages of `[start, end)` that read as written (what wasmtime's reset copies is
    /// this, less file and zero pages).
    fn written_pages(start: usize, end: usize) -> Option<usize> {
        let written = PmScanArg {
            category_mask: PAGE_IS_WRITTEN,
            ..PmScanArg::default()
        };
        let mut pages = 0;
        scan_all(start, end, written, |region| {
            pages += (region.end - region.start) as usize / crate::touched_pages::page_size();
        })?;
        Some(pages)
    }

    /// Whether this kernel tracks written pages exactly for [`track`]ed memory.
    pub(crate) fn available() -> bool {
        userfaultfd().is_some()
    }

    /// `PAGEMAP_SCAN` over `[start, end)` with `arg`'s filters set, into `regions`: the
    /// number of regions reported, and where the walk stopped (`end`, or earlier when
    /// `regions` filled up).
    fn scan(
        start: usize,
        end: usize,
        mut arg: PmScanArg,
        regions: &mut [PageRegion],
    ) -> Option<(usize, usize)> {
        let pagemap = crate::touched_pages::pagemap()?;
        arg.size = size_of::<PmScanArg>() as u64;
        arg.start = start as u64;
        arg.end = end as u64;
        arg.vec = regions.as_mut_ptr() as u64;
        arg.vec_len = regions.len() as u64;
        // SAFETY: `arg` describes `regions`, which the kernel fills (at most `vec_len`),
        // and outlives the call. The range is only read, unless `arg` asks for matching
        // pages to be write-protected, which the caller vouches for.
        let found = unsafe { libc::ioctl(pagemap.as_raw_fd(), PAGEMAP_SCAN, &raw mut arg) };
        let found = usize::try_from(found).ok()?;
        Some((found, arg.walk_end as usize))
    }

    /// [`scan`] over the whole range, however many regions it takes: `each` sees every
    /// region reported. `None` if the kernel refused.
    pub(super) fn scan_all(
        start: usize,
        end: usize,
        arg: PmScanArg,
        mut each: impl FnMut(&PageRegion),
    ) -> Option<()> {
        let mut regions = [const {
            PageRegion {
                start: 0,
                end: 0,
                categories: 0,
            }
        }; 64];
        let mut cursor = start;
        while cursor < end {
            let (found, walk_end) = scan(cursor, end, arg, &mut regions)?;
            regions[..found].iter().for_each(&mut each);
            if found < regions.len() || walk_end <= cursor {
                break;
            }
            cursor = walk_end;
        }
        Some(())
    }

    /// Registers `[start, start + len)` for asynchronous write protection and protects it.
    ///
    /// # Safety
    /// As for [`track`]: what the range holds now must be what its next reset restores.
    unsafe fn arm(fd: &OwnedFd, start: usize, len: usize) -> bool {
        let range = || UffdioRange {
            start: start as u64,
            len: len as u64,
        };
        let mut register = UffdioRegister {
            range: range(),
            mode: UFFDIO_REGISTER_MODE_WP,
            ioctls: 0,
        };
        let mut protect = UffdioWriteprotect {
            range: range(),
            mode: UFFDIO_WRITEPROTECT_MODE_WP,
        };
        // SAFETY: both arguments are what their requests expect and outlive the calls.
        // Protection only makes the next write to each page fault once; contents are
        // unchanged.
        unsafe {
            libc::ioctl(fd.as_raw_fd(), UFFDIO_REGISTER, &raw mut register) == 0
                && libc::ioctl(fd.as_raw_fd(), UFFDIO_WRITEPROTECT, &raw mut protect) == 0
        }
    }

    /// Arms `[base, base + len)` (see the module's notes). A range armed already (a slot
    /// that kept its mapping) only has its discarded pages protected again: a reset that
    /// ran past its budget unmapped the rest of the memory, and a page unmapped after it
    /// was written reads as written from then on (after one large run every later reset of
    /// the slot filled its budget: `docs/benchmarks.md`). One scan does both: it fails where any
    /// part of the range is not armed (a slot new to this process, or whose image wasmtime
    /// mapped again), and the range is then armed whole.
    ///
    /// # Safety
    /// The range must lie within one pool slot's memory reservation, page-aligned, and
    /// hold exactly what a fresh instance of its image holds: no guest code has run in it
    /// since it was instantiated. A page protected while holding anything else would not
    /// be reset for the slot's next instance.
    pub(crate) unsafe fn track(base: *mut u8, len: usize) {
        let Some(fd) = userfaultfd() else { return };
        let start = base as usize;
        if len == 0 {
            return;
        }
        // Written, neither mapped nor swapped out: discarded, so holding the image's
        // contents again (a swapped-out page holds what was written, and is left alone).
        let discarded = PmScanArg {
            flags: PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC,
            category_inverted: PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
            category_mask: PAGE_IS_WRITTEN | PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
            ..PmScanArg::default()
        };
        if scan_all(start, start + len, discarded, |_| {}).is_some() {
            return;
        }
        // SAFETY: the caller vouches that the range is one slot's pristine memory. A
        // refusal leaves it unarmed (over-reported), which costs time only.
        unsafe {
            arm(fd, start, len);
        }
    }
}

#[cfg(test)]
#[cfg(target_os = "linux")]
#[allow(
    unsafe_code,
    clippy::expect_used,
    reason = "the test maps, writes and unmaps its own memory"
)]
mod tests {
    use super::linux::{PAGE_IS_WRITTEN, PmScanArg, scan_all};
    use super::*;

    const PAGE_IS_FILE: u64 = 1 << 2;
    const PAGE_IS_PFNZERO: u64 = 1 << 5;

    /// The pages of `[start, start + len)` wasmtime's reset would copy: written, neither
    /// a file page nor the zero page.
    fn reset_by_wasmtime(start: usize, len: usize) -> usize {
        let arg = PmScanArg {
            category_inverted: PAGE_IS_PFNZERO | PAGE_IS_FILE,
            category_mask: PAGE_IS_WRITTEN | PAGE_IS_PFNZERO | PAGE_IS_FILE,
            ..PmScanArg::default()
        };
        let mut pages = 0;
        scan_all(start, start + len, arg, |region| {
            pages += (region.end - region.start) as usize / crate::touched_pages::page_size();
        })
        .expect("the scan runs");
        pages
    }

    /// Whether this kernel tracks writes exactly; says so when a test is skipped for it.
    fn tracking_here() -> bool {
        if !available() {
            eprintln!("skipped: this kernel has no asynchronous userfaultfd write protection");
        }
        available()
    }

    /// A slot-like reservation: `accessible` bytes read-write, the rest of `reserved`
    /// inaccessible until "grown".
    fn reserve(reserved: usize, accessible: usize) -> *mut u8 {
        // SAFETY: a new anonymous mapping, then a change of protection within it.
        unsafe {
            let base = libc::mmap(
                std::ptr::null_mut(),
                reserved,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(base, libc::MAP_FAILED);
            assert_eq!(
                libc::mprotect(base, accessible, libc::PROT_READ | libc::PROT_WRITE),
                0
            );
            base.cast()
        }
    }

    #[test]
    fn armed_memory_reports_exactly_the_pages_written() {
        if !tracking_here() {
            return;
        }
        let page = crate::touched_pages::page_size();
        let (reserved, accessible) = (16 << 20, 4 << 20);
        let base = reserve(reserved, accessible);
        let start = base as usize;
        let len = tracked_len(accessible, reserved);
        assert_eq!(len, accessible + GROWTH_TRACKED, "some growth is tracked");
        // SAFETY: nothing has been written to the new mapping.
        unsafe { track(base, len) };
        // SAFETY: all within the accessible part, then within the part made accessible.
        unsafe {
            for offset in (0..accessible).step_by(3 * page) {
                std::ptr::read_volatile(base.add(offset));
            }
            base.add(7 * page).write_volatile(1);
            base.add(700 * page + 5).write_volatile(2);
            assert_eq!(reset_by_wasmtime(start, accessible), 2);
            // Arming again (a slot reused with its mapping) leaves written pages reported.
            track(base, len);
            assert_eq!(reset_by_wasmtime(start, accessible), 2);
            // The kernel's own writes into armed memory count.
            let mut pipe = [0; 2];
            assert_eq!(libc::pipe(pipe.as_mut_ptr()), 0);
            assert_eq!(libc::write(pipe[1], b"hello".as_ptr().cast(), 5), 5);
            assert_eq!(libc::read(pipe[0], base.add(900 * page).cast(), 5), 5);
            libc::close(pipe[0]);
            libc::close(pipe[1]);
            assert_eq!(reset_by_wasmtime(start, accessible), 3);
            // Memory grown after arming is tracked too.
            let grown = base.add(accessible);
            assert_eq!(
                libc::mprotect(grown.cast(), 1 << 20, libc::PROT_READ | libc::PROT_WRITE),
                0
            );
            grown.add(page).write_volatile(3);
            std::ptr::read_volatile(grown.add(2 * page));
            assert_eq!(reset_by_wasmtime(start, accessible + (1 << 20)), 4);
            libc::munmap(base.cast(), reserved);
        }
    }

    #[test]
    fn the_tracked_range_is_whole_pages_within_the_maximum() {
        let page = crate::touched_pages::page_size();
        assert_eq!(tracked_len(1 << 20, 2 << 20), 2 << 20);
        assert_eq!(tracked_len(1 << 20, 1 << 30), (1 << 20) + GROWTH_TRACKED);
        assert_eq!(tracked_len(1 << 20, (2 << 20) + 7), 2 << 20);
        assert_eq!(tracked_len(usize::MAX - 3, usize::MAX) % page, 0);
    }

    #[test]
    fn a_slot_armed_again_after_a_reset_past_its_budget_reports_only_what_was_written() {
        if !tracking_here() {
            return;
        }
        let page = crate::touched_pages::page_size();
        let len = 32 << 20;
        let base = reserve(len, len);
        let start = base as usize;
        // SAFETY: nothing has been written to the new mapping; then writes within it, the
        // discard wasmtime does past its budget, and a fresh mapping over part of it.
        unsafe {
            track(base, len);
            for index in 0..150 {
                base.add(index * 37 % 4096 * page).write_volatile(1);
            }
            for offset in ((16 << 20)..(28 << 20)).step_by(page) {
                base.add(offset).write_volatile(2);
            }
            // The reset copies back what fits its budget and discards the rest.
            assert_eq!(
                libc::madvise(base.add(16 << 20).cast(), 12 << 20, libc::MADV_DONTNEED),
                0
            );
            assert!(
                reset_by_wasmtime(start, len) > 3000,
                "discarded pages read as written"
            );
            track(base, len);
            assert_eq!(reset_by_wasmtime(start, len), 150);
            // The pages written before stay unprotected: writing them again is no fault,
            // and they are reported as before.
            base.write_volatile(3);
            assert_eq!(reset_by_wasmtime(start, len), 150);
            // A mapping put over part of the range (as wasmtime maps an image again) is
            // not armed: the next arming covers it, and one write there is one page.
            let remapped = libc::mmap(
                base.add(8 << 20).cast(),
                1 << 20,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            );
            assert_eq!(remapped, base.add(8 << 20).cast());
            track(base, len);
            base.add((8 << 20) + 5 * page).write_volatile(4);
            assert_eq!(reset_by_wasmtime(start + (8 << 20), 1 << 20), 1);
            libc::munmap(base.cast(), len);
        }
    }
}
