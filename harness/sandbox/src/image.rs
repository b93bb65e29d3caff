//! A loaded guest image and the instances made from it: [`GuestImage`], a
//! [`LiveInstance`] (an instance with its store), instantiating one (its memory armed for
//! write tracking), and the [`Spare`] instance each image makes ahead of its next
//! execution. Loading images is `bridge_image.rs` and `cpython/image.rs`; running an
//! execution on an instance is `driver.rs`.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use wasmtime::{Instance, InstancePre, Store, UpdateDeadline};

use crate::host_state::HostState;
use crate::meter::{Meter, stop};
use crate::touched_pages::{self, PageRun};
use crate::wasi_fs::{Mount, instance_mounts};
use crate::write_tracking;

/// A loaded image, ready to instantiate.
pub(crate) struct GuestImage {
    pub(crate) pre: InstancePre<HostState>,
    /// How executions enter the guest.
    pub(crate) kind: GuestKind,
    /// An instance made ahead of the next fresh execution.
    pub(crate) spare: Spare,
    /// Its engine resets returned slots in place and the kernel tracks written pages
    /// exactly: each instance's memory is armed for it (see [`crate::write_tracking`]), up
    /// to this many bytes (the pool's largest memory).
    pub(crate) tracked_max: Option<usize>,
    /// What the image is, exactly (its kind and cache key, hashed): a paused session
    /// resumes only into an instance of the image it was paused in.
    pub(crate) identity: [u8; 32],
}

/// The identity of the image of `kind` (a language, or CPython's cache kind) with cache
/// key `key` (which hashes the module, the engine and the recipe).
pub(crate) fn identity(kind: &str, key: &str) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    hasher.update(kind.as_bytes());
    hasher.update([0]);
    hasher.update(key.as_bytes());
    hasher.finalize().into()
}

/// How a guest is entered, and what its instances need besides the store.
pub(crate) enum GuestKind {
    /// A Cordon guest: `cordon_execute` with the request in the inbox.
    Bridge,
    /// The CPython guest: a `turn` that calls its runtime, the read-only runtime files
    /// mounted in front of the workspace.
    Cpython { mounts: Arc<[Mount]> },
}

impl std::fmt::Debug for GuestImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuestImage").finish_non_exhaustive()
    }
}

/// An instance with its store, kept by sessions between executions.
pub(crate) struct LiveInstance {
    pub(crate) store: Store<HostState>,
    pub(crate) instance: Instance,
    /// Entered with a `turn` (the CPython guest) rather than `cordon_execute`.
    pub(crate) turns: bool,
}

/// A session's instance slot: the instance it keeps between executions (none before its
/// first, after a limit, or once paused), and whether it was paused (then it runs nothing:
/// its state lives on in the paused blob, and two copies must not diverge).
#[derive(Default)]
pub(crate) struct SessionSlot {
    pub(crate) live: Option<LiveInstance>,
    pub(crate) paused: bool,
}

/// A fresh instance of `image`, its memory armed for write tracking where the image says.
pub(crate) async fn instantiate(image: &GuestImage) -> Result<LiveInstance, String> {
    // Each image's own engine: the CPython guest has one of its own.
    let mut store = Store::new(image.pre.module().engine(), HostState::new(Meter::new()));
    let turns = match &image.kind {
        GuestKind::Bridge => false,
        GuestKind::Cpython { mounts } => {
            store.data_mut().fs.set_mounts(instance_mounts(mounts));
            true
        }
    };
    // No cap while the snapshot's own memory is mapped; each execution sets its limit.
    store.data_mut().memory.limit = usize::MAX;
    store.limiter(|state| &mut state.memory);
    store.epoch_deadline_callback(|state| match state.data().meter.check() {
        // Yield so other executions on this worker thread get their turn.
        Ok(()) => Ok(UpdateDeadline::Yield(1)),
        Err(reason) => Err(stop(reason)),
    });
    store.set_epoch_deadline(1);
    let instance = image
        .pre
        .instantiate_async(&mut store)
        .await
        .map_err(|error| format!("could not instantiate the guest: {error:#}"))?;
    let memory = instance.get_memory(&mut store, "memory");
    store.data_mut().guest_memory = memory;
    if let (Some(max), Some(memory)) = (image.tracked_max, memory) {
        let len = write_tracking::tracked_len(memory.data_size(&store), max);
        // SAFETY: the memory starts its pool slot, every slot of which holds `max` bytes,
        // and no guest code has run in it: it holds what the image does.
        #[allow(unsafe_code, reason = "arming a fresh instance's own memory slot")]
        unsafe {
            write_tracking::track(memory.data_ptr(&store), len);
        }
    }
    Ok(LiveInstance {
        store,
        instance,
        turns,
    })
}

/// A fresh instance of an image made ahead of the execution that will take it, with the
/// pages the image's fresh runs touch already faulted in where its slots are unmapped
/// between instances (see [`crate::pages`]). An execution that finds one ready skips
/// instantiating and nearly all of its page faults (figures for RustPython's `print(1)`
/// in `docs/benchmarks.md`). The instance is as fresh as one made on the spot: no guest
/// code has run in it.
#[derive(Default)]
pub(crate) struct Spare {
    /// Off for JavaScript: its slots keep their pages, and instantiating is a small part
    /// of its run (no gain in `benches/sandbox.rs`; see docs/benchmarks.md).
    enabled: bool,
    /// Fault the pages the last fresh run touched into the spare: off where slots are
    /// reset in place (their pages stay mapped).
    prefault: bool,
    ready: std::sync::Mutex<Option<LiveInstance>>,
    /// One spare is made at a time.
    filling: std::sync::atomic::AtomicBool,
    /// The pages the last fresh run touched (read, or written), to fault in ahead.
    touched: std::sync::Mutex<Arc<[PageRun]>>,
}

/// The most of a spare's memory faulted in ahead (a run that used more leaves the rest
/// to be faulted as it is touched).
const PREFAULT_BUDGET_BYTES: usize = 16 << 20;

impl Spare {
    pub(crate) fn new(enabled: bool, prefault: bool) -> Self {
        Spare {
            enabled,
            prefault,
            ..Spare::default()
        }
    }

    pub(crate) fn take(&self) -> Option<LiveInstance> {
        self.ready.lock().ok()?.take()
    }

    /// Puts back a spare taken only to be read (no guest code ran in it), unless another
    /// was made meanwhile.
    pub(crate) fn put_back(&self, live: LiveInstance) {
        if let Ok(mut ready) = self.ready.lock()
            && ready.is_none()
        {
            *ready = Some(live);
        }
    }

    /// Notes the pages a fresh instance's run touched, for the next spare.
    pub(crate) fn learn(&self, live: &LiveInstance) {
        let Some(memory) = live.store.data().guest_memory.filter(|_| self.prefault) else {
            return;
        };
        let budget = PREFAULT_BUDGET_BYTES / touched_pages::page_size();
        if let Ok(runs) = touched_pages::touched(memory.data(&live.store), budget)
            && let Ok(mut touched) = self.touched.lock()
        {
            *touched = runs.into();
        }
    }

    /// Makes the spare if there is none (and no other task is making it). A full pool
    /// leaves it unmade: executions then instantiate as they come.
    pub(crate) async fn refill(&self, image: &GuestImage) {
        let ready = || self.ready.lock().map_or(true, |ready| ready.is_some());
        if !self.enabled || ready() || self.filling.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Ok(mut live) = instantiate(image).await {
            if self.prefault
                && let Some(memory) = live.store.data().guest_memory
            {
                let touched = self.touched.lock().map(|t| t.clone()).unwrap_or_default();
                touched_pages::populate(memory.data_mut(&mut live.store), &touched);
            }
            if let Ok(mut ready) = self.ready.lock() {
                *ready = Some(live);
            }
        }
        self.filling.store(false, Ordering::SeqCst);
    }
}

impl std::fmt::Debug for Spare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spare")
            .field("enabled", &self.enabled)
            .field("prefault", &self.prefault)
            .finish_non_exhaustive()
    }
}
