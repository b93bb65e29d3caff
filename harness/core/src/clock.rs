//! The wall clock as records store it.

/// Now, in Unix milliseconds (0 before 1970, saturating far in the future).
pub fn now_ms() -> u64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}
