//! Announcements of stored events (`LISTEN cordon_events`): one connection per process,
//! opened by the first event stream that waits on an execution running in another replica,
//! wakes the streams waiting on the execution an announcement names.
//!
//! A stream never relies on an announcement alone: it subscribes before it reads the log,
//! and re-reads after a bounded wait, so an announcement lost while the connection was
//! down delays it, never stalls it. Each time the connection (re)starts listening every
//! waiting stream is woken to re-read.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::poll_fn;
use tokio::sync::{mpsc, watch};
use tokio_postgres::{AsyncMessage, Config, NoTls};

use super::pool::Pool;
use crate::store::replicas_schema::EVENTS_CHANNEL;

/// How long a new subscriber waits for the first `LISTEN` to take effect.
const FIRST_LISTEN_WAIT: Duration = Duration::from_secs(2);
/// Pause before listening again after the connection ended.
const RECONNECT_AFTER: Duration = Duration::from_secs(1);

/// The waiting streams, by execution id, and whether the connection listens.
pub(crate) struct Announcements {
    config: Config,
    shared: Arc<Shared>,
}

struct Shared {
    waiting: Mutex<Waiting>,
    /// Counts the times the connection started listening (0: not yet).
    listening: watch::Sender<u64>,
}

#[derive(Default)]
struct Waiting {
    started: bool,
    by_execution: HashMap<String, watch::Sender<u64>>,
}

impl std::fmt::Debug for Announcements {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Announcements").finish_non_exhaustive()
    }
}

impl Shared {
    fn waiting(&self) -> std::sync::MutexGuard<'_, Waiting> {
        // A few map operations per critical section; no invariant spans a panic.
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wake(&self, execution_id: &str) {
        let mut waiting = self.waiting();
        if let Some(sender) = waiting.by_execution.get(execution_id) {
            if sender.receiver_count() == 0 {
                waiting.by_execution.remove(execution_id);
            } else {
                sender.send_modify(|n| *n = n.wrapping_add(1));
            }
        }
    }

    fn wake_all(&self) {
        let mut waiting = self.waiting();
        waiting
            .by_execution
            .retain(|_, sender| sender.receiver_count() > 0);
        for sender in waiting.by_execution.values() {
            sender.send_modify(|n| *n = n.wrapping_add(1));
        }
    }
}

impl Announcements {
    pub(super) fn new(config: Config) -> Announcements {
        Announcements {
            config,
            shared: Arc::new(Shared {
                waiting: Mutex::new(Waiting::default()),
                listening: watch::Sender::new(0),
            }),
        }
    }

    /// A receiver that changes when an event of `execution_id` is announced (or the
    /// connection starts listening again). The first call starts the connection on the
    /// pool's runtime and waits (briefly) until it listens.
    pub(super) async fn subscribe(&self, pool: &Pool, execution_id: &str) -> watch::Receiver<u64> {
        let (receiver, start) = {
            let mut waiting = self.shared.waiting();
            let start = !waiting.started;
            waiting.started = true;
            waiting
                .by_execution
                .retain(|_, sender| sender.receiver_count() > 0);
            let receiver = waiting
                .by_execution
                .entry(execution_id.to_owned())
                .or_insert_with(|| watch::Sender::new(0))
                .subscribe();
            (receiver, start)
        };
        if start {
            pool.spawn(listen(self.config.clone(), self.shared.clone()));
        }
        let mut listening = self.shared.listening.subscribe();
        let _ = tokio::time::timeout(FIRST_LISTEN_WAIT, listening.wait_for(|n| *n > 0)).await;
        receiver
    }
}

/// Listens for as long as the store lives, reconnecting when the connection ends.
async fn listen(config: Config, shared: Arc<Shared>) {
    loop {
        if let Ok((client, mut connection)) = config.connect(NoTls).await {
            let (announced, mut announcements) = mpsc::unbounded_channel::<String>();
            // The connection's messages: announcements go to the channel; its end (an
            // error, the server going away) closes it.
            let driver = tokio::spawn(async move {
                while let Some(Ok(message)) = poll_fn(|cx| connection.poll_message(cx)).await {
                    if let AsyncMessage::Notification(notification) = message
                        && announced.send(notification.payload().to_owned()).is_err()
                    {
                        break;
                    }
                }
            });
            if client
                .batch_execute(&format!("LISTEN {EVENTS_CHANNEL}"))
                .await
                .is_ok()
            {
                // Events stored before the `LISTEN` took effect were not announced. Woken
                // before `listening` moves: a subscriber that saw it listening has had
                // this wake already.
                shared.wake_all();
                shared.listening.send_modify(|n| *n = n.wrapping_add(1));
                while let Some(execution_id) = announcements.recv().await {
                    shared.wake(&execution_id);
                }
            }
            driver.abort();
            drop(client);
        }
        tokio::time::sleep(RECONNECT_AFTER).await;
    }
}
