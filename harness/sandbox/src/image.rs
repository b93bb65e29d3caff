//! Guest images: the embedded wasm, pre-initialized (snapshotted after interpreter start-up
//! with wasmtime-wizer), precompiled, cached on disk, and loaded as an `InstancePre`.
//!
//! Cache key: the guest module's hash, the engine's compatibility hash (wasmtime version and
//! every setting that affects compiled code) and [`RECIPE`]. A changed guest, wasmtime or
//! configuration therefore never loads a stale artifact.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use cordon_guest::abi;
use cordon_protocol::execution::Language;
use sha2::{Digest, Sha256};
use wasmtime::{Engine, InstancePre, Linker, Module, Store};
use wasmtime_wasi::WasiCtxBuilder;
use wasmtime_wasi::p1::WasiP1Ctx;

use crate::SandboxError;
use crate::host::HostState;

/// Bump when the way images are made changes (snapshot steps, exports used).
const RECIPE: &str = "cordon-image-v1";

/// The guest modules built for wasm32-wasip1 by the build script (empty when not built).
fn embedded(language: Language) -> &'static [u8] {
    match language {
        Language::Python => include_bytes!(env!("CORDON_GUEST_PYTHON")),
        Language::Javascript => include_bytes!(env!("CORDON_GUEST_JAVASCRIPT")),
        _ => &[],
    }
}

/// A loaded image, ready to instantiate.
pub(crate) struct GuestImage {
    pub(crate) pre: InstancePre<HostState>,
}

impl std::fmt::Debug for GuestImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuestImage").finish_non_exhaustive()
    }
}

/// Where precompiled images live: `$CORDON_CACHE_DIR`, else `$XDG_CACHE_HOME/cordon`, else
/// `~/.cache/cordon`.
pub fn default_cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("CORDON_CACHE_DIR") {
        return Some(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(dir).join("cordon"));
    }
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache/cordon"))
}

fn cache_key(engine: &Engine, wasm: &[u8]) -> String {
    struct Sha(Sha256);
    impl Hasher for Sha {
        fn finish(&self) -> u64 {
            0
        }
        fn write(&mut self, bytes: &[u8]) {
            self.0.update(bytes);
        }
    }
    let mut hasher = Sha(Sha256::new());
    RECIPE.hash(&mut hasher);
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hasher.0.update(wasm);
    hex::encode(&hasher.0.finalize()[..16])
}

/// Loads (or makes, then caches) the image for `language`.
pub(crate) async fn load(
    engine: &Engine,
    linker: &Linker<HostState>,
    language: Language,
    cache_dir: Option<&Path>,
    progress: &(dyn Fn(&str) + Send + Sync),
) -> Result<GuestImage, SandboxError> {
    let wasm = embedded(language);
    if wasm.is_empty() {
        return Err(SandboxError::ImageMissing {
            language: language.as_str(),
        });
    }
    let key = cache_key(engine, wasm);
    let cached = cache_dir.map(|dir| dir.join(format!("{}-{key}.cwasm", language.as_str())));
    // Several processes may start at once on a new machine; one builds, the others wait.
    let _guard = cached.as_deref().and_then(lock_cache);
    let module = match cached.as_deref().and_then(|path| deserialize(engine, path)) {
        Some(module) => module,
        None => {
            progress(&format!(
                "preparing the {} image (first run with this build: snapshot + compile, about 10-60 s)",
                language.as_str()
            ));
            let snapshot = snapshot(wasm).await?;
            let engine_for_compile = engine.clone();
            let compiled = tokio::task::spawn_blocking(move || {
                engine_for_compile.precompile_module(&snapshot)
            })
            .await
            .map_err(|error| SandboxError::Image(format!("compile task failed: {error}")))?
            .map_err(|error| {
                SandboxError::Image(format!("compiling the snapshot failed: {error:#}"))
            })?;
            let written = cached
                .as_deref()
                .and_then(|path| write_atomically(path, &compiled).ok());
            match written
                .and_then(|()| cached.as_deref().and_then(|path| deserialize(engine, path)))
            {
                Some(module) => module,
                // No usable cache directory: load from memory (costs the compile each start).
                None => deserialize_bytes(engine, &compiled)?,
            }
        }
    };
    check_exports(&module)?;
    let pre = linker.instantiate_pre(&module).map_err(|error| {
        SandboxError::Image(format!(
            "linking the {} image failed: {error:#}",
            language.as_str()
        ))
    })?;
    Ok(GuestImage { pre })
}

fn check_exports(module: &Module) -> Result<(), SandboxError> {
    for name in [abi::EXPORT_EXECUTE, abi::EXPORT_ABI_VERSION, "memory"] {
        if module.get_export(name).is_none() {
            return Err(SandboxError::Image(format!(
                "the image does not export `{name}`"
            )));
        }
    }
    Ok(())
}

#[allow(
    unsafe_code,
    reason = "loading precompiled code we compiled and wrote ourselves"
)]
fn deserialize(engine: &Engine, path: &Path) -> Option<Module> {
    if !path.exists() {
        return None;
    }
    // SAFETY: the file was produced by `Engine::precompile_module` of an engine with the
    // same compatibility hash (it is in the file name) and written atomically by us; wasmtime
    // still checks its header and version before using it.
    unsafe { Module::deserialize_file(engine, path) }.ok()
}

#[allow(
    unsafe_code,
    reason = "loading precompiled code we just compiled in this process"
)]
fn deserialize_bytes(engine: &Engine, bytes: &[u8]) -> Result<Module, SandboxError> {
    // SAFETY: `bytes` come straight from `Engine::precompile_module` on this engine.
    unsafe { Module::deserialize(engine, bytes) }.map_err(|error| {
        SandboxError::Image(format!("loading the compiled image failed: {error:#}"))
    })
}

/// Holds an exclusive lock on the cache directory while an image is looked up or built.
fn lock_cache(path: &Path) -> Option<std::fs::File> {
    let dir = path.parent()?;
    std::fs::create_dir_all(dir).ok()?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(".lock"))
        .ok()?;
    file.lock().ok()?;
    Some(file)
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let temporary = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        std::process::id()
    ));
    std::fs::write(&temporary, bytes)?;
    std::fs::rename(&temporary, path)
}

/// State of the instance being snapshotted: WASI with stderr captured for diagnostics.
struct InitState {
    wasi: WasiP1Ctx,
    diagnostics: Arc<Mutex<Vec<u8>>>,
}

/// Runs the guest's initializer (interpreter start-up, imports) and snapshots the result.
async fn snapshot(wasm: &[u8]) -> Result<Vec<u8>, SandboxError> {
    let fail =
        |what: &str, error: wasmtime::Error| SandboxError::Image(format!("{what}: {error:#}"));
    let engine = Engine::new(&wasmtime::Config::new()).map_err(|e| fail("snapshot engine", e))?;
    let mut linker: Linker<InitState> = Linker::new(&engine);
    wasmtime_wasi::p1::add_to_linker_async(&mut linker, |state: &mut InitState| &mut state.wasi)
        .map_err(|e| fail("linking WASI", e))?;
    define_init_bridge(&mut linker).map_err(|e| fail("linking the bridge", e))?;
    let diagnostics = Arc::new(Mutex::new(Vec::new()));
    let pipe = wasmtime_wasi::p2::pipe::MemoryOutputPipe::new(64 * 1024);
    let wasi = WasiCtxBuilder::new()
        .stderr(pipe.clone())
        .stdout(pipe.clone())
        .build_p1();
    let mut store = Store::new(
        &engine,
        InitState {
            wasi,
            diagnostics: diagnostics.clone(),
        },
    );
    let mut wizer = wasmtime_wizer::Wizer::new();
    wizer.init_func(abi::EXPORT_INITIALIZE);
    let result = wizer
        .run(&mut store, wasm, async |store, module| {
            linker.instantiate_async(store, module).await
        })
        .await;
    result.map_err(|error| {
        let mut printed = pipe.contents().to_vec();
        printed.extend_from_slice(&diagnostics.lock().map(|d| d.clone()).unwrap_or_default());
        SandboxError::Image(format!(
            "pre-initializing the guest failed: {error:#}\n{}",
            String::from_utf8_lossy(&printed)
        ))
    })
}

/// During snapshotting only `output` (panic and diagnostic messages) may be used.
fn define_init_bridge(linker: &mut Linker<InitState>) -> wasmtime::Result<()> {
    linker.func_wrap(
        abi::IMPORT_MODULE,
        abi::IMPORT_OUTPUT,
        |mut caller: wasmtime::Caller<'_, InitState>, _stream: i32, ptr: i32, len: i32| {
            if let Some(wasmtime::Extern::Memory(memory)) = caller.get_export("memory") {
                let (start, len) = (
                    usize::try_from(ptr).unwrap_or(0),
                    usize::try_from(len).unwrap_or(0),
                );
                let bytes = memory
                    .data(&caller)
                    .get(start..start.saturating_add(len))
                    .map(<[u8]>::to_vec);
                if let (Some(bytes), Ok(mut sink)) = (bytes, caller.data().diagnostics.lock()) {
                    sink.extend_from_slice(&bytes);
                }
            }
        },
    )?;
    let unavailable = |name: &'static str| {
        move || -> wasmtime::Result<()> {
            wasmtime::bail!("`cordon.{name}` was called during pre-initialization")
        }
    };
    linker.func_wrap(abi::IMPORT_MODULE, abi::IMPORT_INBOX_READ, {
        let f = unavailable(abi::IMPORT_INBOX_READ);
        move |_: i32, _: i32| -> wasmtime::Result<i32> { f().map(|()| 0) }
    })?;
    linker.func_wrap(abi::IMPORT_MODULE, abi::IMPORT_CALL_TOOL, {
        let f = unavailable(abi::IMPORT_CALL_TOOL);
        move |_: i32, _: i32, _: i32, _: i32| -> wasmtime::Result<i32> { f().map(|()| 0) }
    })?;
    linker.func_wrap(abi::IMPORT_MODULE, abi::IMPORT_CALL_BATCH, {
        let f = unavailable(abi::IMPORT_CALL_BATCH);
        move |_: i32, _: i32| -> wasmtime::Result<i32> { f().map(|()| 0) }
    })?;
    linker.func_wrap(abi::IMPORT_MODULE, abi::IMPORT_FINISH, {
        let f = unavailable(abi::IMPORT_FINISH);
        move |_: i32, _: i32| -> wasmtime::Result<()> { f() }
    })?;
    Ok(())
}
