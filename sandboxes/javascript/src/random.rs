//! The random numbers behind `Math.random` and `crypto`: xorshift64* seeded from WASI in
//! each instance, never from anything frozen into the snapshot.

use std::cell::Cell;

thread_local! {
    /// xorshift64* state behind `Math.random` and `crypto`; 0 (unseeded) in the snapshot.
    /// QuickJS seeds its own generator from the clock when the context is created, so it
    /// would be frozen into the snapshot and every instance would draw the same numbers.
    static RANDOM: Cell<u64> = const { Cell::new(0) };
}

pub(crate) fn random_u64() -> u64 {
    RANDOM.with(|cell| {
        let mut state = cell.get();
        if state == 0 {
            state = wasi_random_u64() | 1;
        }
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        cell.set(state);
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    })
}

/// Eight bytes from WASI's `random_get`: fresh in every instance, unlike anything
/// computed before the snapshot. Rust's std has no stable API for it.
#[allow(unsafe_code, reason = "calls the WASI random_get import")]
fn wasi_random_u64() -> u64 {
    #[link(wasm_import_module = "wasi_snapshot_preview1")]
    unsafe extern "C" {
        fn random_get(buf: *mut u8, buf_len: usize) -> u16;
    }
    let mut bytes = [0u8; 8];
    // SAFETY: `bytes` is valid for `bytes.len()` writable bytes for the whole call.
    let errno = unsafe { random_get(bytes.as_mut_ptr(), bytes.len()) };
    if errno != 0 {
        // No random source: the clock still differs between instances.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos());
        return nanos as u64;
    }
    u64::from_le_bytes(bytes)
}
