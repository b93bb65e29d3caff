//! How a run's episodes are dealt to its workers: each worker gets a share of consecutive
//! episodes of the suite's order (the seeds of one task follow each other, so a worker's
//! pooled session can start its next episode in place), and a worker whose share is done
//! takes the last episode of the share with the most left, so none idles while others
//! have work.

use std::collections::VecDeque;
use std::sync::Mutex;

/// Items dealt to `workers` in consecutive shares.
#[derive(Debug)]
pub(crate) struct Shares<T> {
    shares: Mutex<Vec<VecDeque<T>>>,
}

impl<T> Shares<T> {
    /// `items` in `workers` consecutive shares whose sizes differ by one at most.
    pub(crate) fn new(items: Vec<T>, workers: usize) -> Shares<T> {
        let workers = workers.max(1);
        let total = items.len();
        let mut items = items.into_iter();
        let shares = (0..workers)
            .map(|w| {
                let size = (w + 1) * total / workers - w * total / workers;
                items.by_ref().take(size).collect()
            })
            .collect();
        Shares {
            shares: Mutex::new(shares),
        }
    }

    /// The next item for `worker`: the first of its share, else the last of the longest
    /// share; `None` once every share is done.
    pub(crate) fn next(&self, worker: usize) -> Option<T> {
        let mut shares = self.shares.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(item) = shares.get_mut(worker).and_then(VecDeque::pop_front) {
            return Some(item);
        }
        shares
            .iter_mut()
            .max_by_key(|share| share.len())
            .and_then(VecDeque::pop_back)
    }
}

#[cfg(test)]
mod tests {
    use super::Shares;

    #[test]
    fn workers_take_consecutive_items_then_the_ends_of_the_longest_shares() {
        let shares = Shares::new((0..10).collect(), 3);
        // Shares of 3, 3 and 4: [0 1 2] [3 4 5] [6 7 8 9].
        assert_eq!(shares.next(0), Some(0));
        assert_eq!(shares.next(2), Some(6));
        assert_eq!(shares.next(0), Some(1));
        assert_eq!(shares.next(0), Some(2));
        // Worker 0 is done with its share: it takes from the end of the longest, worker 2's.
        assert_eq!(shares.next(0), Some(9));
        assert_eq!(shares.next(1), Some(3));
        let mut rest: Vec<i32> = std::iter::from_fn(|| shares.next(1)).collect();
        rest.sort_unstable();
        assert_eq!(rest, [4, 5, 7, 8]);
        assert_eq!(shares.next(2), None);
        assert_eq!(Shares::new(vec![1], 4).next(3), Some(1));
        assert_eq!(Shares::<u8>::new(Vec::new(), 0).next(0), None);
    }
}
