//! An execution's events as Server-Sent Events: a cursor over the stored log that waits for
//! new events while the execution runs, so a stream resumed after `Last-Event-ID` misses
//! nothing and repeats nothing.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;

use super::live_sandboxes::LiveSandboxes;
use crate::store::EventRow;

/// Events read from the store per query while streaming.
const EVENT_PAGE: usize = 256;
/// Longest wait for an announcement before the log is read again anyway (an
/// announcement is lost while the listening connection reconnects).
const ANNOUNCED_WAIT: Duration = Duration::from_secs(1);
/// Pause between reads of an execution running elsewhere when nothing announces events
/// (SQLite).
const POLL_EVERY: Duration = Duration::from_millis(10);

pub(super) fn sse(
    sandboxes: Arc<LiveSandboxes>,
    id: String,
    after: u64,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let cursor = Cursor {
        sandboxes,
        id,
        after,
        buffered: VecDeque::new(),
        finished: false,
    };
    let stream = futures::stream::unfold(cursor, |mut cursor| async move {
        let row = cursor.next().await?;
        let event = Event::default()
            .event(row.event_type)
            .id(row.seq.to_string())
            .data(row.data);
        Some((Ok(event), cursor))
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// Reads an execution's log from the store, waiting for new events while it runs.
struct Cursor {
    sandboxes: Arc<LiveSandboxes>,
    id: String,
    after: u64,
    buffered: VecDeque<EventRow>,
    finished: bool,
}

impl Cursor {
    async fn next(&mut self) -> Option<EventRow> {
        loop {
            if let Some(row) = self.buffered.pop_front() {
                self.after = row.seq;
                self.finished = row.event_type == "execution.completed";
                return Some(row);
            }
            if self.finished {
                return None;
            }
            // Subscribe before reading: an event stored after the read changes the
            // receiver, so it cannot slip between the read and the wait.
            let receiver = self.sandboxes.subscribe(&self.id);
            // Running in another replica (or not yet registered here): its events are
            // announced by the database (PostgreSQL), subscribed before the read too.
            let announced = match receiver {
                Some(_) => None,
                None => self.sandboxes.store.announcements(&self.id).await,
            };
            let rows = self.read().await?;
            if !rows.is_empty() {
                self.buffered.extend(rows);
                continue;
            }
            match receiver {
                Some(mut receiver) => {
                    if receiver.changed().await.is_err() {
                        // The execution ended; everything it logged is stored.
                        let rows = self.read().await?;
                        if rows.is_empty() {
                            return None;
                        }
                        self.buffered.extend(rows);
                    }
                }
                None => {
                    // Not running here. Ended: its log is complete (recovery appends the
                    // end of executions that were cut off). Running: in another replica,
                    // or its row is newer than its live entry (a few microseconds at
                    // creation); wait for the next event.
                    let running = matches!(
                        self.sandboxes.store.execution(&self.id).await,
                        Ok(Some(row)) if row.status == crate::store::RUNNING
                    );
                    if !running {
                        let rows = self.read().await?;
                        if rows.is_empty() {
                            return None;
                        }
                        self.buffered.extend(rows);
                    } else if let Some(mut announced) = announced {
                        let _ = tokio::time::timeout(ANNOUNCED_WAIT, announced.changed()).await;
                    } else {
                        tokio::time::sleep(POLL_EVERY).await;
                    }
                }
            }
        }
    }

    async fn read(&self) -> Option<Vec<EventRow>> {
        match self
            .sandboxes
            .store
            .events_after(&self.id, self.after, EVENT_PAGE)
            .await
        {
            Ok(rows) => Some(rows),
            Err(error) => {
                eprintln!("cordon serve: reading events of {}: {error}", self.id);
                None
            }
        }
    }
}
