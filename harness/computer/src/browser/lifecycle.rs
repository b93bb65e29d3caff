//! [`Browser`]: one Chromium process serving many sessions. Launching it, pumping its
//! CDP connection, watching the process, restarting it when it is lost, and closing it.

use super::chromium::{process_alive, spawn_chromium};
use super::options::BrowserOptions;
use super::state::{Life, Shared};
use crate::error::{Error, Result};
use futures::StreamExt as _;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::RwLock;

/// One Chromium process serving many sessions, restarted when it crashes or hangs. Cheap
/// to clone.
#[derive(Clone)]
pub struct Browser {
    pub(super) shared: Arc<Shared>,
}

impl std::fmt::Debug for Browser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let life = self.shared.life();
        f.debug_struct("Browser")
            .field("generation", &life.generation)
            .field("pid", &life.pid)
            .field("user_data_dir", &life.user_data_dir)
            .finish_non_exhaustive()
    }
}

impl Browser {
    /// Starts Chromium with a fresh profile directory.
    pub async fn launch(opts: BrowserOptions) -> Result<Self> {
        if !opts.executable.exists() {
            return Err(Error::BrowserMissing {
                path: opts.executable.display().to_string(),
                package: if super::frames::is_headless_shell(&opts.executable) {
                    "chromium-headless-shell"
                } else {
                    "chromium"
                },
            });
        }
        let (browser, handler, user_data_dir, pid) = spawn_chromium(&opts).await?;
        let shared = Arc::new(Shared {
            browser: RwLock::new(browser),
            life: Mutex::new(Life {
                generation: 1,
                pid,
                user_data_dir,
                lost: None,
                history: HashMap::new(),
                tasks: Vec::new(),
            }),
            lost_tx: tokio::sync::watch::Sender::new(0),
            restart: tokio::sync::Mutex::new(()),
            policies: Mutex::new(HashMap::new()),
            contexts: Mutex::new(HashMap::new()),
            refused: Mutex::new(HashMap::new()),
            navigating: Mutex::new(HashSet::new()),
            frame_turn: Arc::new(tokio::sync::Mutex::new(())),
            screens: tokio::sync::Mutex::default(),
            opts,
        });
        let this = Self { shared };
        this.start(handler, 1, pid).await?;
        Ok(this)
    }

    /// The process id of the current Chromium (for diagnostics and tests).
    pub fn pid(&self) -> Option<u32> {
        self.shared.life().pid
    }

    /// How many Chromium processes this browser has started (1 until a restart).
    pub fn generation(&self) -> u64 {
        self.shared.life().generation
    }

    /// Pumps the CDP connection, watches the process, and guards requests.
    async fn start(
        &self,
        mut handler: chromiumoxide::Handler,
        generation: u64,
        pid: Option<u32>,
    ) -> Result<()> {
        let weak = Arc::downgrade(&self.shared);
        let pump = tokio::spawn(async move {
            // Errors here are per-message (a malformed event); keep pumping.
            while handler.next().await.is_some() {}
            if let Some(shared) = weak.upgrade() {
                shared.mark_lost(generation, "the connection to Chromium closed".into());
            }
        });
        // A dead process leaves the websocket open-but-silent for a while: watch the
        // process itself so its sessions fail at once.
        let weak = Arc::downgrade(&self.shared);
        let watchdog = tokio::spawn(async move {
            let Some(pid) = pid else { return };
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let Some(shared) = weak.upgrade() else { return };
                if !process_alive(pid) {
                    shared.mark_lost(generation, format!("Chromium (pid {pid}) exited"));
                    return;
                }
                if shared.life().generation != generation {
                    return;
                }
            }
        });
        self.shared.life().tasks.extend([pump, watchdog]);
        self.start_fetch_guard().await
    }

    /// Replaces a lost Chromium process with a new one. Sessions of the old one keep
    /// failing with [`Error::BrowserLost`]; nothing else is carried over.
    pub(super) async fn ensure_running(&self) -> Result<u64> {
        let _one = self.shared.restart.lock().await;
        let (generation, lost, old_tasks, old_dir) = {
            let mut life = self.shared.life();
            match life.lost.clone() {
                None => return Ok(life.generation),
                Some(why) => (
                    life.generation,
                    why,
                    std::mem::take(&mut life.tasks),
                    life.user_data_dir.clone(),
                ),
            }
        };
        for t in old_tasks {
            t.abort();
        }
        let (browser, handler, user_data_dir, pid) = spawn_chromium(&self.shared.opts).await?;
        // Readers still talking to the old process give up within the request timeout.
        let mut old = {
            let mut current = self.shared.browser.write().await;
            std::mem::replace(&mut *current, browser)
        };
        // A hung process is still there: kill (and reap) it.
        let _killed = old.kill().await;
        let _removed = std::fs::remove_dir_all(&old_dir);
        let next = generation + 1;
        {
            let mut life = self.shared.life();
            life.history.insert(generation, lost);
            life.generation = next;
            life.pid = pid;
            life.user_data_dir = user_data_dir;
            life.lost = None;
        }
        self.start(handler, next, pid).await?;
        Ok(next)
    }

    /// After a command timed out: is the browser itself still answering? If not, it is
    /// marked lost (a page stuck in a script loop only hangs its own session).
    pub(super) async fn probe(&self, generation: u64) -> bool {
        let answer = tokio::time::timeout(Duration::from_secs(3), async {
            self.shared.browser.read().await.version().await
        })
        .await;
        let alive = matches!(answer, Ok(Ok(_)));
        if !alive {
            self.shared
                .mark_lost(generation, "Chromium stopped answering".into());
        }
        alive
    }

    /// Stops Chromium and removes its profile directory.
    pub async fn close(self) -> Result<()> {
        let _one = self.shared.restart.lock().await;
        let lost = self.shared.life().lost.is_some();
        let mut browser = self.shared.browser.write().await;
        if lost {
            let _killed = browser.kill().await;
        } else {
            let closed = tokio::time::timeout(Duration::from_secs(5), async {
                let _closed = browser.close().await;
                browser.wait().await
            })
            .await;
            if closed.is_err() {
                let _killed = browser.kill().await;
            }
        }
        drop(browser);
        let (tasks, dir) = {
            let mut life = self.shared.life();
            (std::mem::take(&mut life.tasks), life.user_data_dir.clone())
        };
        for t in tasks {
            t.abort();
        }
        let _removed = std::fs::remove_dir_all(&dir);
        Ok(())
    }
}
