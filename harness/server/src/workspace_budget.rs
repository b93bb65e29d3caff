//! The server-wide budget of long-lived workspaces: how many may be live at once, and how
//! many workspace bytes all of them together may declare.
//!
//! Why: workspaces live in the server's memory and each may declare up to
//! [`MAX_WORKSPACE_BYTES`](crate::http::live_sandboxes::MAX_WORKSPACE_BYTES). Without a cap
//! on their number, any client could create sandboxes (or MCP REPL sessions) until the
//! process runs out of memory, taking every other client's work with it. A workspace's declared quota is reserved when it is created and
//! given back when the last holder of its [`Reservation`] lets go (deleted or expired, and
//! its executions stopped), so the sum of quotas of what is live never exceeds the total.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Live sandboxes at once unless told otherwise: as many as there are REPL sessions per
/// MCP connection, and at the default `workspace_bytes` (64 MiB) exactly the default total.
pub const DEFAULT_MAX_SANDBOXES: usize = 64;
/// Workspace bytes all live sandboxes may declare together unless told otherwise (4 GiB):
/// [`DEFAULT_MAX_SANDBOXES`] sandboxes at the default 64 MiB, or four at the 1 GiB maximum.
/// A fixed size rather than a share of RAM, so the cap is the same on every machine and
/// says in advance what a client will be refused.
pub const DEFAULT_MAX_WORKSPACE_BYTES_TOTAL: u64 = 4 << 30;

/// The caps of one [`Budget`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Capacity {
    /// Workspaces live at once.
    pub(crate) workspaces: usize,
    /// Sum of the declared quotas (bytes) of the live workspaces.
    pub(crate) bytes: u64,
}

/// Why a workspace cannot be reserved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BudgetError {
    /// As many workspaces as allowed are live.
    #[error("{max} workspaces are live, the most allowed at once")]
    TooMany {
        /// The cap.
        max: usize,
    },
    /// The quota asked for is more than all workspaces together may hold: it never fits.
    #[error("{asked} bytes asked for, more than the {total} allowed in all")]
    NeverFits {
        /// The quota asked for.
        asked: u64,
        /// The total cap.
        total: u64,
    },
    /// The quota would fit an emptier server, but the live workspaces hold too much of it.
    #[error("{asked} bytes asked for, but {reserved} of the {total} allowed are reserved")]
    Exhausted {
        /// The quota asked for.
        asked: u64,
        /// What the live workspaces reserve.
        reserved: u64,
        /// The total cap.
        total: u64,
    },
}

#[derive(Debug, Default)]
struct Used {
    workspaces: usize,
    bytes: u64,
}

/// What is reserved against a [`Capacity`]; shared by everything that creates workspaces
/// in one server.
#[derive(Debug)]
pub(crate) struct Budget {
    capacity: Capacity,
    used: Mutex<Used>,
}

/// One live workspace's share of a [`Budget`], given back when dropped.
#[derive(Debug)]
pub(crate) struct Reservation {
    budget: Arc<Budget>,
    bytes: u64,
}

impl Budget {
    pub(crate) fn new(capacity: Capacity) -> Arc<Budget> {
        Arc::new(Budget {
            capacity,
            used: Mutex::new(Used::default()),
        })
    }

    pub(crate) fn capacity(&self) -> Capacity {
        self.capacity
    }

    fn used(&self) -> MutexGuard<'_, Used> {
        // Each critical section is two additions or subtractions; no invariant spans a panic.
        self.used.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reserves one workspace of `bytes` quota, or says which cap it would break. The
    /// check and the reservation are one step, so concurrent creates cannot both pass.
    pub(crate) fn reserve(self: &Arc<Self>, bytes: u64) -> Result<Reservation, BudgetError> {
        let total = self.capacity.bytes;
        if bytes > total {
            return Err(BudgetError::NeverFits {
                asked: bytes,
                total,
            });
        }
        let mut used = self.used();
        if used.workspaces >= self.capacity.workspaces {
            return Err(BudgetError::TooMany {
                max: self.capacity.workspaces,
            });
        }
        if used.bytes.saturating_add(bytes) > total {
            return Err(BudgetError::Exhausted {
                asked: bytes,
                reserved: used.bytes,
                total,
            });
        }
        used.workspaces += 1;
        used.bytes += bytes;
        Ok(Reservation {
            budget: self.clone(),
            bytes,
        })
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut used = self.budget.used();
        used.workspaces = used.workspaces.saturating_sub(1);
        used.bytes = used.bytes.saturating_sub(self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(workspaces: usize, bytes: u64) -> Arc<Budget> {
        Budget::new(Capacity { workspaces, bytes })
    }

    #[test]
    fn refuses_past_either_cap_and_drop_gives_back() {
        let budget = budget(2, 100);
        let a = budget.reserve(60);
        assert!(a.is_ok());
        assert_eq!(
            budget.reserve(41).err(),
            Some(BudgetError::Exhausted {
                asked: 41,
                reserved: 60,
                total: 100
            })
        );
        let b = budget.reserve(40);
        assert!(b.is_ok());
        assert_eq!(
            budget.reserve(0).err(),
            Some(BudgetError::TooMany { max: 2 })
        );
        drop(a);
        assert!(
            budget.reserve(60).is_ok(),
            "the dropped reservation gave back its share"
        );
        assert_eq!(
            budget.reserve(101).err(),
            Some(BudgetError::NeverFits {
                asked: 101,
                total: 100
            })
        );
    }

    #[test]
    fn concurrent_reservations_never_exceed_the_caps() {
        let budget = budget(8, 8 * 10);
        let held: Vec<Reservation> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..64)
                .map(|_| scope.spawn(|| budget.reserve(10).ok()))
                .collect();
            handles
                .into_iter()
                .filter_map(|handle| handle.join().ok().flatten())
                .collect()
        });
        assert_eq!(held.len(), 8);
        drop(held);
        assert_eq!(budget.used().workspaces, 0);
        assert_eq!(budget.used().bytes, 0);
    }
}
