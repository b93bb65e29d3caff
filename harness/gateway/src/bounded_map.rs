//! A bounded map of things the gateway keeps between two client requests (calls that ran
//! inline, calls waiting for approval, ids of containers that are gone).
//!
//! Clients decide how many such things exist, so the map is capped: past its size the
//! oldest half is forgotten. What is forgotten degrades to a clear refusal later (an
//! approval for an unknown call, a container that "does not exist"), never to a leak.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Key → value, at most `max` entries, oldest forgotten first.
#[derive(Debug)]
pub(crate) struct BoundedMap<V> {
    max: usize,
    inner: Mutex<Entries<V>>,
}

#[derive(Debug)]
struct Entries<V> {
    /// Insertions so far: each entry's age is the count at its insertion.
    count: u64,
    map: HashMap<String, (u64, V)>,
}

impl<V> BoundedMap<V> {
    /// An empty map holding at most `max` (at least 2) entries.
    pub(crate) fn new(max: usize) -> Self {
        BoundedMap {
            max: max.max(2),
            inner: Mutex::new(Entries {
                count: 0,
                map: HashMap::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Entries<V>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `value` under `key` (replacing what was there).
    pub(crate) fn insert(&self, key: &str, value: V) {
        let mut entries = self.lock();
        entries.count += 1;
        if entries.map.len() >= self.max && !entries.map.contains_key(key) {
            let cutoff = entries.count.saturating_sub(self.max as u64 / 2);
            entries.map.retain(|_, (age, _)| *age >= cutoff);
        }
        let age = entries.count;
        entries.map.insert(key.to_owned(), (age, value));
    }

    /// Takes the value under `key` out (each value is taken at most once).
    pub(crate) fn remove(&self, key: &str) -> Option<V> {
        self.lock().map.remove(key).map(|(_, value)| value)
    }

    /// Whether `key` is kept.
    #[cfg(test)]
    pub(crate) fn contains(&self, key: &str) -> bool {
        self.lock().map.contains_key(key)
    }

    /// Whether nothing is kept.
    pub(crate) fn is_empty(&self) -> bool {
        self.lock().map.is_empty()
    }

    /// How many entries are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().map.len()
    }
}

impl<V: Clone> BoundedMap<V> {
    /// A copy of the value under `key`.
    pub(crate) fn get(&self, key: &str) -> Option<V> {
        self.lock().map.get(key).map(|(_, value)| value.clone())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn the_oldest_half_goes_when_full_and_values_are_taken_once() {
        let kept = BoundedMap::new(10);
        for i in 0..10 {
            kept.insert(&format!("k{i}"), i);
        }
        assert_eq!(kept.len(), 10);
        kept.insert("k10", 10);
        assert!(kept.len() <= 10, "{}", kept.len());
        assert!(!kept.contains("k0"), "the oldest is forgotten");
        assert_eq!(kept.get("k10"), Some(10));
        assert_eq!(kept.remove("k9"), Some(9));
        assert_eq!(kept.remove("k9"), None);
        // Replacing a key does not evict.
        let len = kept.len();
        kept.insert("k10", 11);
        assert_eq!(kept.len(), len);
        assert_eq!(kept.get("k10"), Some(11));
    }
}
