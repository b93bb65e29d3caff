//! What a page has in flight — requests, and its main frame's load — from CDP's start and
//! end events in whatever order they are read.
//!
//! chromiumoxide delivers each event type on a channel of its own and fills those channels
//! in no fixed order (each type's queue is flushed in turn after a batch of messages), so
//! an end can be read before its start. Measured: a request's `Network.loadingFinished`
//! before its `Network.requestWillBeSent` (often, for resources from the HTTP cache), and
//! `Page.frameStoppedLoading` before `Page.frameStartedLoading` (a page's brief load
//! without navigation). Read naively, the request stayed in flight, or the frame loading,
//! for good, and settling waited its whole cap (docs/benchmarks.md, "Sessions reused
//! between episodes").

use std::cmp::Ordering;
use std::collections::{HashSet, VecDeque};

/// How many ends whose start has not been read are remembered. Ends whose start never
/// comes (requests of a document already left, whose ids were dropped with it) are
/// forgotten oldest first.
const UNMATCHED_ENDS: usize = 256;

/// Requests started and not ended, whichever of the two events is read first.
#[derive(Debug, Default)]
pub(super) struct InFlight {
    open: HashSet<String>,
    /// Ends read before their start, oldest first.
    ended_first: VecDeque<String>,
}

impl InFlight {
    /// A request started (its first `requestWillBeSent`; a redirect is not a new start).
    pub(super) fn start(&mut self, id: String) {
        if let Some(at) = self.ended_first.iter().position(|e| *e == id) {
            self.ended_first.remove(at);
            return;
        }
        self.open.insert(id);
    }

    /// A request finished or failed.
    pub(super) fn end(&mut self, id: String) {
        if self.open.remove(&id) {
            return;
        }
        if self.ended_first.len() == UNMATCHED_ENDS {
            self.ended_first.pop_front();
        }
        self.ended_first.push_back(id);
    }

    /// Forgets the requests in flight (they will never report back: a new document, an
    /// error page, the settle cap). Ends read early are kept: their starts may still come.
    pub(super) fn clear(&mut self) {
        self.open.clear();
    }

    pub(super) fn is_empty(&self) -> bool {
        self.open.is_empty()
    }
}

/// The main frame's load starts and stops read since the state was last resolved. Chromium
/// reports them strictly in turn (start, stop, start, …), so their counts alone give the
/// state after them, whatever order they were read in: more starts, loading; more stops,
/// not; as many, as before them. (Should one be lost, the next read with unequal counts
/// sets the state right again, as a single start or stop always did.)
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct LoadTurns {
    started: u32,
    stopped: u32,
}

impl LoadTurns {
    pub(super) fn start(&mut self) {
        self.started += 1;
    }

    pub(super) fn stop(&mut self) {
        self.stopped += 1;
    }

    /// Whether the frame loads after the events read so far, `before` them it did or not.
    pub(super) fn loading(self, before: bool) -> bool {
        match self.started.cmp(&self.stopped) {
            Ordering::Greater => true,
            Ordering::Less => false,
            Ordering::Equal => before,
        }
    }

    /// [`loading`](Self::loading), counting afresh from here.
    pub(super) fn resolve(&mut self, before: bool) -> bool {
        let loading = self.loading(before);
        *self = Self::default();
        loading
    }
}

#[cfg(test)]
mod tests {
    use super::{InFlight, LoadTurns, UNMATCHED_ENDS};

    #[test]
    fn a_load_read_stop_first_has_ended() {
        // Not loading; a load starts and stops, read stop first.
        let mut turns = LoadTurns::default();
        turns.stop();
        assert!(!turns.loading(false));
        turns.start();
        assert!(!turns.resolve(false), "the load started and stopped");
        // Loading; it stops and another starts, read in either order.
        let mut turns = LoadTurns::default();
        turns.start();
        turns.stop();
        assert!(turns.resolve(true), "another load runs");
        // A start alone, a stop alone.
        turns.start();
        assert!(turns.resolve(false));
        turns.stop();
        assert!(!turns.resolve(true));
        assert!(turns.resolve(true), "nothing read: unchanged");
    }

    #[test]
    fn a_request_ends_in_either_order() {
        let mut requests = InFlight::default();
        requests.start("a".into());
        requests.end("b".into());
        assert!(!requests.is_empty(), "a is in flight");
        requests.start("b".into());
        assert!(!requests.is_empty(), "a is still in flight");
        requests.end("a".into());
        assert!(
            requests.is_empty(),
            "both ended, b before its start was read"
        );
        requests.start("c".into());
        assert!(!requests.is_empty(), "c is a new request");
    }

    #[test]
    fn cleared_requests_stay_gone_and_early_ends_stay_known() {
        let mut requests = InFlight::default();
        requests.end("late".into());
        requests.start("old".into());
        requests.clear();
        assert!(requests.is_empty());
        requests.end("old".into());
        requests.start("late".into());
        assert!(
            requests.is_empty(),
            "the end read before the clear still counts"
        );
    }

    #[test]
    fn unmatched_ends_are_bounded() {
        let mut requests = InFlight::default();
        for i in 0..UNMATCHED_ENDS + 10 {
            requests.end(i.to_string());
        }
        assert_eq!(requests.ended_first.len(), UNMATCHED_ENDS);
        requests.start("0".into());
        assert!(
            !requests.is_empty(),
            "the oldest unmatched end was forgotten"
        );
        requests.start((UNMATCHED_ENDS + 9).to_string());
        requests.end("0".into());
        assert!(requests.is_empty());
    }
}
