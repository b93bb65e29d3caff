//! Ids handed to clients (executions, sandboxes, sessions, calls) and the bearer tokens
//! compared against them: unguessable, so holding one is as good as being told it.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};

/// `prefix_` and 32 hex digits (128 bits), unique in the process and unguessable.
pub fn fresh_id(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    // std's RandomState is randomly keyed per instance: two keyed hashes give 128 bits.
    let a = std::hash::RandomState::new().hash_one((count, std::process::id()));
    let b = std::hash::RandomState::new().hash_one((count, a));
    format!("{prefix}_{a:016x}{b:016x}")
}

/// Compares without stopping at the first difference, so response timing does not reveal
/// how much of a guessed token or tag was right.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_distinct_and_carry_their_prefix() {
        let a = fresh_id("exec");
        let b = fresh_id("exec");
        assert_ne!(a, b);
        assert!(
            a.starts_with("exec_") && a.len() == "exec_".len() + 32,
            "{a}"
        );
    }

    #[test]
    fn constant_time_eq_compares_whole_slices() {
        assert!(constant_time_eq(b"token", b"token"));
        assert!(!constant_time_eq(b"token", b"tokem"));
        assert!(!constant_time_eq(b"token", b"token2"));
    }
}
