//! The CPython guest's image: the read-only runtime files (the standard library's zip,
//! matplotlib's data), snapshotted with wasmtime-wizer after the runtime and packages are
//! loaded, compiled, cached and tagged like the other images, and loaded.

use std::hash::Hash;
use std::path::Path;
use std::sync::Arc;

use cordon_protocol::execution::Limits;
use sha2::Digest;
use wasmtime::{Config, Engine, Linker, Module, OptLevel, Store};

use crate::cache::{
    CPYTHON_KIND, DigestHasher, Verified, default_cache_dir, deserialize, deserialize_bytes,
    image_kinds, lock_cache, prune_older_images, prune_retired_images, secure_dir, stamp_path,
    tag_key, tag_path, verify, write_atomically,
};
use crate::config::SandboxConfig;
use crate::engine::tracked_max;
use crate::error::SandboxError;
use crate::hmac::hmac_sha256;
use crate::host_state::HostState;
use crate::image::{GuestImage, GuestKind, Spare, identity};
use crate::meter::Meter;
use crate::wasi_fs::Mount;
use crate::workspace::{Quota, Workspace};

use super::artifacts::{self, ArtifactError};
use super::engine::linker;
use super::turn::turn;
use super::zip;

/// Cordon's guest runtime, loaded into the image: CPython's own part, then the guest
/// contract both Python guests share.
const RUNTIME: &str = concat!(
    include_str!("runtime.py"),
    "\n",
    include_str!("../../../../guest-sdk/python/contract.py")
);
/// Bump when the way the image is made changes (bootstrap, layout, snapshot steps).
const RECIPE: &str = "cordon-cpython-v1";
/// Packages imported into the image unless `CORDON_CPYTHON_PRELOAD` (comma-separated,
/// possibly empty) says otherwise.
pub const DEFAULT_PRELOAD: &[&str] = &["numpy", "pandas", "matplotlib"];

/// The preopen layout, in descriptor order. It is part of the image: wasi-libc's table of
/// preopens is filled while the image is made and kept in the snapshot, so every instance
/// must see the same guest paths at the same descriptors (3, 4, 5; the workspace is 6).
const GUEST_LIB: &str = "/usr/local/lib";
/// matplotlib finds its data next to its package, i.e. "inside" the zip.
const GUEST_MPL_DATA: &str = "/usr/local/lib/python315.zip/matplotlib/mpl-data";
const GUEST_TMP: &str = "/tmp";
/// The zip's name in the guest (`sys.path` of the build).
const ZIP_NAME: &str = "python315.zip";
const MPL_DATA_ZIP: &str = "matplotlib/mpl-data.zip";

/// The native wasm stack: deep Python recursion must end in `RecursionError` first.
const WASM_STACK: usize = 16 << 20;

/// The packages the image imports.
fn preload() -> Vec<String> {
    match std::env::var("CORDON_CPYTHON_PRELOAD") {
        Ok(list) => list
            .split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty())
            .map(str::to_owned)
            .collect(),
        Err(_) => DEFAULT_PRELOAD
            .iter()
            .map(|&name| name.to_owned())
            .collect(),
    }
}

fn fail(what: &str) -> impl FnOnce(wasmtime::Error) -> SandboxError + '_ {
    move |error| SandboxError::Image(format!("{what}: {error:#}"))
}

/// The runtime files, in memory: a folder holding the zip alone, matplotlib's data taken
/// out of the zip, and `/tmp` (shared and writable while the image is made; at run time a
/// scratch folder each instance gets empty).
fn mounts(stdlib_zip: Vec<u8>, tmp_writable: bool) -> Result<Arc<[Mount]>, SandboxError> {
    let unlimited = Quota {
        bytes: u64::MAX,
        files: u64::MAX,
    };
    let bad_zip = |error: zip::ZipError| {
        SandboxError::Image(format!("the standard library's zip is unusable: {error}"))
    };
    let mpl_data = Workspace::new(unlimited);
    {
        let archive = zip::Archive::new(&stdlib_zip).map_err(bad_zip)?;
        if let Some(member) = archive.find(MPL_DATA_ZIP) {
            let inner = archive.read(member).map_err(bad_zip)?;
            let inner = zip::Archive::new(&inner).map_err(bad_zip)?;
            for member in inner.members() {
                if member.is_dir() {
                    continue;
                }
                let bytes = inner.read(member).map_err(bad_zip)?;
                // The inner zip's names may start with `mpl-data/`.
                let name = member
                    .name
                    .strip_prefix("mpl-data/")
                    .unwrap_or(&member.name);
                mpl_data.write(name, &bytes).map_err(|error| {
                    SandboxError::Image(format!("matplotlib data {name}: {error}"))
                })?;
            }
        }
    }
    let lib = Workspace::new(unlimited);
    lib.write(ZIP_NAME, &stdlib_zip)
        .map_err(|error| SandboxError::Image(format!("the standard library: {error}")))?;
    // Every instance reads these same trees: frozen, a read moves no time and nothing
    // else changes, so no sandbox sees what another read.
    lib.freeze();
    mpl_data.freeze();
    // While the image is made, /tmp is one writable tree (matplotlib builds its font list
    // there); at run time each instance gets an empty one of its own (a scratch mount).
    let tmp = Workspace::new(if tmp_writable {
        Quota {
            bytes: 64 << 20,
            files: 10_000,
        }
    } else {
        Quota { bytes: 0, files: 0 }
    });
    Ok(Arc::from(vec![
        Mount {
            guest_path: GUEST_LIB.into(),
            tree: lib,
            writable: false,
            scratch: false,
        },
        Mount {
            guest_path: GUEST_MPL_DATA.into(),
            tree: mpl_data,
            writable: false,
            scratch: false,
        },
        Mount {
            guest_path: GUEST_TMP.into(),
            tree: tmp,
            writable: tmp_writable,
            scratch: !tmp_writable,
        },
    ]))
}

fn cache_key(engine: &Engine, packages: &[String]) -> String {
    let mut hasher = DigestHasher::default();
    RECIPE.hash(&mut hasher);
    engine.precompile_compatibility_hash().hash(&mut hasher);
    artifacts::SNAPSHOT_WASM.sha256.hash(&mut hasher);
    artifacts::STDLIB_ZIP.sha256.hash(&mut hasher);
    RUNTIME.hash(&mut hasher);
    packages.hash(&mut hasher);
    hex::encode(&hasher.0.finalize()[..16])
}

/// Reads the verified standard library; a cached copy that fails its check is discarded
/// and installed afresh once.
async fn installed_stdlib(
    cache_dir: &Path,
    progress: &(dyn Fn(&str) + Send + Sync),
) -> Result<(artifacts::Artifacts, Vec<u8>), SandboxError> {
    let unavailable = |error: ArtifactError| SandboxError::Image(error.to_string());
    let installed = artifacts::ensure(cache_dir, progress)
        .await
        .map_err(unavailable)?;
    let key = tag_key(cache_dir).ok();
    match installed.read_stamped(&artifacts::STDLIB_ZIP, key.as_ref()) {
        Ok(zip) => Ok((installed, zip)),
        Err(error @ ArtifactError::Tampered { .. }) => {
            progress(&format!(
                "the cached CPython files failed their check ({error}); installing them again"
            ));
            artifacts::discard(cache_dir);
            let installed = artifacts::ensure(cache_dir, progress)
                .await
                .map_err(unavailable)?;
            let zip = installed
                .read(&artifacts::STDLIB_ZIP)
                .map_err(unavailable)?;
            Ok((installed, zip))
        }
        Err(error) => Err(unavailable(error)),
    }
}

/// Fetches (when needed) and verifies the artifacts; loads or makes the image.
pub(crate) async fn load(
    engine: &Engine,
    linker: &Linker<HostState>,
    config: &SandboxConfig,
) -> Result<GuestImage, SandboxError> {
    let progress = &*config.progress;
    let cache_dir = config
        .cache_dir
        .clone()
        .or_else(default_cache_dir)
        .ok_or_else(|| {
            SandboxError::Image(
                "the CPython guest needs a cache directory (set CORDON_CACHE_DIR)".into(),
            )
        })?;
    secure_dir(&cache_dir).map_err(|reason| {
        SandboxError::Image(format!("cache directory {}: {reason}", cache_dir.display()))
    })?;
    let (installed, stdlib_zip) = installed_stdlib(&cache_dir, progress).await?;
    let packages = preload();
    let key = cache_key(engine, &packages);
    let cached = cache_dir.join(format!("{CPYTHON_KIND}-{key}.cwasm"));
    let module = cached_module(engine, &cached, progress, || {
        build_image(&installed, stdlib_zip.clone(), &packages, engine, progress)
    })
    .await?;
    let mounts = mounts(stdlib_zip, false)?;
    let tracked_max = tracked_max(config);
    let pre = linker
        .instantiate_pre(&module)
        .map_err(fail("linking the CPython image"))?;
    Ok(GuestImage {
        pre,
        kind: GuestKind::Cpython { mounts },
        spare: Spare::new(true, tracked_max.is_none()),
        tracked_max,
        identity: identity(CPYTHON_KIND, &key),
    })
}

/// The tagged `.cwasm` at `path`, or a fresh one made by `make` (under the cache lock, so
/// concurrent first starts build it once).
async fn cached_module<F, Fut>(
    engine: &Engine,
    path: &Path,
    progress: &(dyn Fn(&str) + Send + Sync),
    make: F,
) -> Result<Module, SandboxError>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<Vec<u8>, SandboxError>>,
{
    let lock_path = path.to_owned();
    let _guard = tokio::task::spawn_blocking(move || lock_cache(&lock_path))
        .await
        .ok()
        .flatten();
    let dir = path.parent().unwrap_or(Path::new("."));
    let tag_key = tag_key(dir).map_err(SandboxError::Image)?;
    match verify(path, &tag_key) {
        Verified::Intact => {
            if let Some(module) = deserialize(engine, path) {
                return Ok(module);
            }
        }
        Verified::Missing => {}
        Verified::Failed(reason) => {
            progress(&format!(
                "the cached CPython image failed its integrity check ({reason}); discarding it"
            ));
        }
    }
    for stale in [path.to_owned(), tag_path(path), stamp_path(path)] {
        let _ = std::fs::remove_file(stale);
    }
    let compiled = make().await?;
    write_atomically(path, &compiled)
        .and_then(|()| {
            let tag = hex::encode(hmac_sha256(&tag_key, &compiled));
            write_atomically(&tag_path(path), tag.as_bytes())
        })
        .map_err(|error| SandboxError::Image(format!("writing {}: {error}", path.display())))?;
    prune_older_images(path);
    prune_retired_images(dir, &image_kinds());
    match deserialize(engine, path) {
        Some(module) => Ok(module),
        None => deserialize_bytes(engine, &compiled),
    }
}

/// Snapshots the interpreter with the runtime and `packages` loaded, then compiles it for
/// `engine`. Minutes of CPU and gigabytes of memory per compile (figures in
/// `docs/benchmarks.md`): once per machine.
async fn build_image(
    installed: &artifacts::Artifacts,
    stdlib_zip: Vec<u8>,
    packages: &[String],
    engine: &Engine,
    progress: &(dyn Fn(&str) + Send + Sync),
) -> Result<Vec<u8>, SandboxError> {
    let started = std::time::Instant::now();
    let wasm = installed
        .read(&artifacts::SNAPSHOT_WASM)
        .map_err(|error| SandboxError::Image(error.to_string()))?;
    progress(&format!(
        "preparing the CPython image (first run on this machine: snapshot with {} loaded, \
         then compile; several minutes and about 2.5 GB of memory)",
        if packages.is_empty() {
            "nothing".to_owned()
        } else {
            packages.join(", ")
        }
    ));
    let snapshot = snapshot(&wasm, stdlib_zip, packages, progress).await?;
    drop(wasm);
    progress(&format!(
        "compiling the CPython image ({} MB of wasm)",
        snapshot.len() >> 20
    ));
    let engine = engine.clone();
    let compiled = tokio::task::spawn_blocking(move || engine.precompile_module(&snapshot))
        .await
        .map_err(|error| SandboxError::Image(format!("compile task failed: {error}")))?
        .map_err(fail("compiling the CPython image"))?;
    progress(&format!(
        "the CPython image is ready ({} MB, {} s)",
        compiled.len() >> 20,
        started.elapsed().as_secs()
    ));
    Ok(compiled)
}

/// The Python source of the snapshot's one turn: defines `_cordon_runtime` from
/// `runtime.py` and loads the packages.
fn bootstrap(packages: &[String]) -> String {
    let names = packages
        .iter()
        .map(|name| format!("{:?}", name))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "def _cordon_bootstrap():\n\
         \x20   import sys, types\n\
         \x20   module = types.ModuleType('_cordon_runtime')\n\
         \x20   module.__file__ = '<cordon>'\n\
         \x20   sys.modules['_cordon_runtime'] = module\n\
         \x20   source = bytes.fromhex('{}').decode('utf-8')\n\
         \x20   exec(compile(source, '<cordon>', 'exec'), module.__dict__)\n\
         \x20   module._preload([{names}])\n\
         _cordon_bootstrap()\n\
         del _cordon_bootstrap\n",
        hex::encode(RUNTIME)
    )
}

/// Instruments the module, runs the bootstrap turn on it and snapshots the result.
async fn snapshot(
    wasm: &[u8],
    stdlib_zip: Vec<u8>,
    packages: &[String],
    progress: &(dyn Fn(&str) + Send + Sync),
) -> Result<Vec<u8>, SandboxError> {
    // Compiled once and thrown away: favour compile speed over code quality.
    let mut wasm_config = Config::new();
    wasm_config
        .wasm_exceptions(true)
        .max_wasm_stack(WASM_STACK)
        .async_stack_size(WASM_STACK + (1 << 20))
        .cranelift_opt_level(OptLevel::None);
    let engine = Engine::new(&wasm_config).map_err(fail("snapshot engine"))?;
    let linker = linker(&engine)?;
    let wizer = wasmtime_wizer::Wizer::new();
    let (context, instrumented) = wizer
        .instrument(wasm)
        .map_err(fail("instrumenting the interpreter"))?;
    progress("compiling the interpreter for the snapshot run");
    let compile_engine = engine.clone();
    let module = tokio::task::spawn_blocking(move || Module::new(&compile_engine, &instrumented))
        .await
        .map_err(|error| SandboxError::Image(format!("compile task failed: {error}")))?
        .map_err(fail("compiling the instrumented interpreter"))?;

    let meter = Meter::new();
    let limits = Limits {
        cpu_ms: u64::MAX,
        wall_ms: u64::MAX,
        ..Limits::default()
    };
    meter.reset(&limits, cordon_core::dispatch::EventSink::discard());
    let mut state = HostState::new(meter.clone());
    state.fs.set_mounts(mounts(stdlib_zip, true)?);
    let mut store = Store::new(&engine, state);
    let instance = linker
        .instantiate_async(&mut store, &module)
        .await
        .map_err(fail("instantiating the interpreter"))?;
    progress(&format!(
        "loading the runtime and {} into the snapshot",
        if packages.is_empty() {
            "the standard modules".to_owned()
        } else {
            packages.join(", ")
        }
    ));
    let status = turn(&mut store, instance, &bootstrap(packages)).await;
    let printed = {
        let mut output = meter.output();
        let (stdout, stderr) = output.take();
        format!("{stdout}{stderr}")
    };
    match status {
        Ok(0) => {}
        Ok(status) => {
            return Err(SandboxError::Image(format!(
                "loading the runtime into the CPython image failed (status {status}):\n{printed}"
            )));
        }
        Err(error) => {
            return Err(SandboxError::Image(format!(
                "loading the runtime into the CPython image trapped: {error:#}\n{printed}"
            )));
        }
    }
    if !printed.trim().is_empty() {
        progress(&format!(
            "the CPython image printed while loading: {}",
            printed.trim()
        ));
    }
    let open = store.data().fs.descriptors();
    if open > 3 + 1 + 3 {
        // A descriptor left open would be remembered by the guest but unknown to every
        // instance's fresh filesystem state.
        return Err(SandboxError::Image(format!(
            "the CPython image keeps {open} descriptors open after loading its runtime"
        )));
    }
    wizer
        .snapshot(
            &context,
            &mut wasmtime_wizer::WasmtimeWizer {
                store: &mut store,
                instance,
            },
        )
        .await
        .map_err(fail("snapshotting the CPython image"))
}
