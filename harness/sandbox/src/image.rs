//! Guest images: the embedded wasm, pre-initialized (snapshotted after interpreter start-up
//! with wasmtime-wizer), precompiled, cached on disk, and loaded as an `InstancePre`.
//!
//! Cache key: the guest module's hash, the engine's compatibility hash (wasmtime version and
//! every setting that affects compiled code) and [`RECIPE`]. A changed guest, wasmtime or
//! configuration therefore never loads a stale artifact.
//!
//! Integrity: wasmtime runs a `.cwasm` as the machine code it contains, so a cached file
//! is loaded only if its tag — HMAC-SHA256 under a per-cache secret key (`cache.key`,
//! 0600), written beside it at compile time — matches. A file that fails is deleted and
//! the image recompiled. The directory is kept 0700 and must belong to this user; one
//! that belongs to someone else is not used at all (images are then compiled in memory).
//! Hashing the Python image costs about 75 ms, so a verified file also gets a stamp: a
//! tag of its inode, size, mtime and ctime. Any write changes the ctime, which nobody
//! but root can set back, so while the stamp matches the file is loaded without
//! rehashing it.

use cordon_core::ids::constant_time_eq;
use std::fs::{DirBuilder, File, OpenOptions};
use std::hash::{Hash, Hasher};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
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
/// The cache's secret key for image tags.
const KEY_FILE: &str = "cache.key";
pub(crate) const KEY_LEN: usize = 32;

/// The guest modules built for wasm32-wasip1 by the build script (empty when not built).
fn embedded(language: Language) -> &'static [u8] {
    match language {
        Language::PythonLite => include_bytes!(env!("CORDON_GUEST_PYTHON")),
        Language::Javascript => include_bytes!(env!("CORDON_GUEST_JAVASCRIPT")),
        _ => &[],
    }
}

/// A loaded image, ready to instantiate.
pub(crate) struct GuestImage {
    pub(crate) pre: InstancePre<HostState>,
    /// How executions enter the guest.
    pub(crate) kind: GuestKind,
    /// An instance made ahead of the next fresh execution.
    pub(crate) spare: crate::driver::Spare,
    /// Its engine resets returned slots in place and the kernel tracks written pages
    /// exactly: each instance's memory is armed for it (see [`crate::dirty`]), up to this
    /// many bytes (the pool's largest memory).
    pub(crate) tracked_max: Option<usize>,
}

/// How a guest is entered, and what its instances need besides the store.
pub(crate) enum GuestKind {
    /// A Cordon guest: `cordon_execute` with the request in the inbox.
    Bridge,
    /// The CPython guest: a `turn` that calls its runtime, the read-only runtime files
    /// mounted in front of the workspace.
    Cpython {
        mounts: std::sync::Arc<[crate::wasi_fs::Mount]>,
    },
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

/// A `Hasher` that feeds SHA-256, so `Hash` values make a stable cache key.
#[derive(Default)]
pub(crate) struct DigestHasher(pub(crate) Sha256);

impl Hasher for DigestHasher {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

fn cache_key(engine: &Engine, wasm: &[u8]) -> String {
    let mut hasher = DigestHasher::default();
    RECIPE.hash(&mut hasher);
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hasher.0.update(wasm);
    hex::encode(&hasher.0.finalize()[..16])
}

/// Loads (or makes, then caches) the image for `language`, its fresh instances made as
/// `spare` and `tracked_max` say (see [`GuestImage`]).
pub(crate) async fn load(
    engine: &Engine,
    linker: &Linker<HostState>,
    language: Language,
    cache_dir: Option<&Path>,
    progress: &(dyn Fn(&str) + Send + Sync),
    spare: crate::driver::Spare,
    tracked_max: Option<usize>,
) -> Result<GuestImage, SandboxError> {
    let wasm = embedded(language);
    if wasm.is_empty() {
        return Err(SandboxError::ImageMissing {
            language: language.as_str(),
        });
    }
    let key = cache_key(engine, wasm);
    let cache_dir = cache_dir.filter(|dir| match secure_dir(dir) {
        Ok(()) => true,
        Err(reason) => {
            progress(&format!(
                "not using the image cache {}: {reason}",
                dir.display()
            ));
            false
        }
    });
    let cached = cache_dir.map(|dir| dir.join(format!("{}-{key}.cwasm", language.as_str())));
    // Several processes may start at once on a new machine; one builds, the others wait.
    let _guard = cached.as_deref().and_then(lock_cache);
    // Under the lock: the first process makes the key, the others read it.
    let tag_key = match cache_dir.map(tag_key).transpose() {
        Ok(tag_key) => tag_key,
        Err(reason) => {
            progress(&format!("not using the image cache: {reason}"));
            None
        }
    };
    let cached = cached.filter(|_| tag_key.is_some());
    let verified = match (cached.as_deref(), &tag_key) {
        (Some(path), Some(tag_key)) => match verify(path, tag_key) {
            Verified::Intact => deserialize(engine, path),
            Verified::Missing => None,
            Verified::Failed(reason) => {
                progress(&format!(
                    "the cached {} image failed its integrity check ({reason}); discarding it",
                    language.as_str()
                ));
                let _ = std::fs::remove_file(path);
                let _ = std::fs::remove_file(tag_path(path));
                let _ = std::fs::remove_file(stamp_path(path));
                None
            }
        },
        _ => None,
    };
    let module = match verified {
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
            let written = match (cached.as_deref(), &tag_key) {
                (Some(path), Some(tag_key)) => write_atomically(path, &compiled)
                    .and_then(|()| {
                        let tag = hex::encode(hmac_sha256(tag_key, &compiled));
                        write_atomically(&tag_path(path), tag.as_bytes())
                    })
                    .ok(),
                _ => None,
            };
            if let (Some(()), Some(path)) = (written, cached.as_deref()) {
                prune_older_images(path);
            }
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
    Ok(GuestImage {
        pre,
        kind: GuestKind::Bridge,
        spare,
        tracked_max,
    })
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
pub(crate) fn deserialize(engine: &Engine, path: &Path) -> Option<Module> {
    // SAFETY: the caller verified the file's tag: it is what `Engine::precompile_module`
    // of an engine with the same compatibility hash (it is in the file name) produced
    // and we wrote, in a 0700 directory of this user; wasmtime still checks its header
    // and version before using it.
    unsafe { Module::deserialize_file(engine, path) }.ok()
}

/// Makes `dir` (0700) or checks an existing one: it must be a directory of this user;
/// group or other permissions on it are removed.
pub(crate) fn secure_dir(dir: &Path) -> Result<(), String> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|error| format!("cannot create it: {error}"))?;
    let meta = std::fs::metadata(dir).map_err(|error| error.to_string())?;
    if !meta.is_dir() {
        return Err("not a directory".into());
    }
    let me = rustix::process::getuid().as_raw();
    if meta.uid() != me {
        return Err(format!(
            "it belongs to uid {}, not to this user (uid {me})",
            meta.uid()
        ));
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|error| format!("cannot make it private (0700): {error}"))?;
    }
    Ok(())
}

/// The cache's tag key: read from [`KEY_FILE`], or made when there is none. A key file
/// others could read, or not of this user, or malformed, is replaced — every tag made
/// with it then fails and the images are recompiled.
pub(crate) fn tag_key(dir: &Path) -> Result<[u8; KEY_LEN], String> {
    let path = dir.join(KEY_FILE);
    let me = rustix::process::getuid().as_raw();
    if let Ok(meta) = std::fs::symlink_metadata(&path) {
        let private = meta.is_file() && meta.uid() == me && meta.mode() & 0o077 == 0;
        if private && meta.len() == KEY_LEN as u64 {
            let mut key = [0u8; KEY_LEN];
            File::open(&path)
                .and_then(|mut file| file.read_exact(&mut key))
                .map_err(|error| format!("cannot read {KEY_FILE}: {error}"))?;
            return Ok(key);
        }
        std::fs::remove_file(&path)
            .map_err(|error| format!("cannot replace {KEY_FILE}: {error}"))?;
    }
    let mut key = [0u8; KEY_LEN];
    File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut key))
        .map_err(|error| format!("no randomness for a cache key: {error}"))?;
    write_atomically(&path, &key).map_err(|error| format!("cannot write {KEY_FILE}: {error}"))?;
    Ok(key)
}

pub(crate) fn tag_path(cwasm: &Path) -> PathBuf {
    let mut name = cwasm.as_os_str().to_owned();
    name.push(".tag");
    PathBuf::from(name)
}

pub(crate) fn stamp_path(cwasm: &Path) -> PathBuf {
    let mut name = cwasm.as_os_str().to_owned();
    name.push(".stamp");
    PathBuf::from(name)
}

/// Images of one kind kept besides the current one when a new one is written: a second
/// build or checkout on the same machine still finds its own, and the cache does not grow
/// by one image per build (a CPython image is 313 MB).
const OLDER_IMAGES_KEPT: usize = 1;

/// Removes the images `<kind>-<key>.cwasm` (with their tag and stamp) next to `current`,
/// of the same kind, except the [`OLDER_IMAGES_KEPT`] most recently written. Best effort:
/// a process that has an image mapped keeps its mapping.
pub(crate) fn prune_older_images(current: &Path) {
    let (Some(dir), Some(name)) = (
        current.parent(),
        current.file_name().and_then(|name| name.to_str()),
    ) else {
        return;
    };
    let Some((kind, _)) = name.rsplit_once('-') else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut older: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let file_name = entry.file_name();
            let file_name = file_name.to_str()?;
            let key = file_name
                .strip_prefix(kind)?
                .strip_prefix('-')?
                .strip_suffix(".cwasm")?;
            let is_key = key.len() == 32 && key.bytes().all(|byte| byte.is_ascii_hexdigit());
            if !is_key || file_name == name {
                return None;
            }
            Some((entry.metadata().ok()?.modified().ok()?, entry.path()))
        })
        .collect();
    older.sort_by_key(|(modified, _)| std::cmp::Reverse(*modified));
    for (_, path) in older.into_iter().skip(OLDER_IMAGES_KEPT) {
        for file in [tag_path(&path), stamp_path(&path), path] {
            let _ = std::fs::remove_file(file);
        }
    }
}

/// The stamp of a verified image: its tag bound to the file's identity and change times.
pub(crate) fn stamp(key: &[u8; KEY_LEN], meta: &std::fs::Metadata, tag: &str) -> String {
    let identity = format!(
        "cordon-stamp-v1 {} {} {} {}.{} {}.{} {tag}",
        meta.dev(),
        meta.ino(),
        meta.size(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec()
    );
    hex::encode(hmac_sha256(key, identity.as_bytes()))
}

pub(crate) enum Verified {
    Intact,
    Missing,
    Failed(String),
}

/// Checks a cached image against its tag; makes a readable-by-others file private first.
pub(crate) fn verify(path: &Path, key: &[u8; KEY_LEN]) -> Verified {
    let Ok(mut file) = File::open(path) else {
        return Verified::Missing;
    };
    let Ok(meta) = file.metadata() else {
        return Verified::Failed("cannot stat it".into());
    };
    if meta.uid() != rustix::process::getuid().as_raw() {
        return Verified::Failed(format!("it belongs to uid {}", meta.uid()));
    }
    if meta.mode() & 0o077 != 0 {
        let _ = file.set_permissions(std::fs::Permissions::from_mode(0o600));
    }
    let Ok(tag) = std::fs::read_to_string(tag_path(path)) else {
        return Verified::Failed("no tag".into());
    };
    let Ok(expected) = hex::decode(tag.trim()) else {
        return Verified::Failed("malformed tag".into());
    };
    // Stat again: making the file private changed its ctime.
    let stamp = file
        .metadata()
        .ok()
        .map(|meta| stamp(key, &meta, tag.trim()));
    if let Some(stamp) = &stamp
        && std::fs::read_to_string(stamp_path(path)).is_ok_and(|seen| seen.trim() == stamp)
    {
        return Verified::Intact;
    }
    let mut mac = Hmac::new(key);
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        match file.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => mac.update(&buffer[..n]),
            Err(error) => return Verified::Failed(format!("cannot read it: {error}")),
        }
    }
    if constant_time_eq(&mac.finalize(), &expected) {
        if let Some(stamp) = stamp {
            let _ = write_atomically(&stamp_path(path), stamp.as_bytes());
        }
        Verified::Intact
    } else {
        Verified::Failed("its content does not match its tag".into())
    }
}

/// HMAC-SHA256 (RFC 2104) over a stream; the key is shorter than SHA-256's block.
struct Hmac {
    inner: Sha256,
    outer_pad: [u8; 64],
}

impl Hmac {
    fn new(key: &[u8; KEY_LEN]) -> Self {
        let mut inner_pad = [0x36u8; 64];
        let mut outer_pad = [0x5cu8; 64];
        for (index, byte) in key.iter().enumerate() {
            inner_pad[index] ^= byte;
            outer_pad[index] ^= byte;
        }
        let mut inner = Sha256::new();
        inner.update(inner_pad);
        Hmac { inner, outer_pad }
    }

    fn update(&mut self, bytes: &[u8]) {
        self.inner.update(bytes);
    }

    fn finalize(self) -> [u8; 32] {
        let mut outer = Sha256::new();
        outer.update(self.outer_pad);
        outer.update(self.inner.finalize());
        outer.finalize().into()
    }
}

pub(crate) fn hmac_sha256(key: &[u8; KEY_LEN], bytes: &[u8]) -> [u8; 32] {
    let mut mac = Hmac::new(key);
    mac.update(bytes);
    mac.finalize()
}

#[allow(
    unsafe_code,
    reason = "loading precompiled code we just compiled in this process"
)]
pub(crate) fn deserialize_bytes(engine: &Engine, bytes: &[u8]) -> Result<Module, SandboxError> {
    // SAFETY: `bytes` come straight from `Engine::precompile_module` on this engine.
    unsafe { Module::deserialize(engine, bytes) }.map_err(|error| {
        SandboxError::Image(format!("loading the compiled image failed: {error:#}"))
    })
}

/// Holds an exclusive lock on the cache directory while an image is looked up or built.
pub(crate) fn lock_cache(path: &Path) -> Option<std::fs::File> {
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

/// Writes a private (0600) file under its final name in one step.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let temporary = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        std::process::id()
    ));
    let _ = std::fs::remove_file(&temporary);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temporary)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231_style_vectors() {
        // HMAC-SHA256 with a 32-byte key of 0x0b and "Hi There" (RFC 4231 case 1 uses a
        // 20-byte key; this value was computed with Python's hmac module).
        let key = [0x0bu8; KEY_LEN];
        assert_eq!(
            hex::encode(hmac_sha256(&key, b"Hi There")),
            "198a607eb44bfbc69903a0f1cf2bbdc5ba0aa3f3d9ae3c1c7a3b1696a0b68cf7"
        );
        let mut streamed = Hmac::new(&key);
        streamed.update(b"Hi ");
        streamed.update(b"There");
        assert_eq!(streamed.finalize(), hmac_sha256(&key, b"Hi There"));
    }

    #[test]
    fn writing_an_image_removes_all_but_the_newest_older_one_of_its_kind() {
        let dir = tempfile::tempdir().unwrap();
        let key = |n: u8| format!("{:032x}", n);
        let make = |name: &str, age_s: u64| {
            let path = dir.path().join(name);
            std::fs::write(&path, b"x").unwrap();
            let when = std::time::SystemTime::now() - std::time::Duration::from_secs(age_s);
            File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_modified(when)
                .unwrap();
        };
        for (n, age) in [(1, 300), (2, 200), (3, 100)] {
            make(&format!("python-{}.cwasm", key(n)), age);
            make(&format!("python-{}.cwasm.tag", key(n)), age);
        }
        // Other kinds (one whose name starts like this one's), and files that are not images.
        make(&format!("python-lite-{}.cwasm", key(7)), 900);
        make(&format!("javascript-{}.cwasm", key(8)), 900);
        make("python-notakey.cwasm", 900);
        make("cache.key", 900);
        make(&format!("python-{}.cwasm", key(9)), 0);

        prune_older_images(&dir.path().join(format!("python-{}.cwasm", key(9))));

        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        let mut expected = vec![
            "cache.key".to_owned(),
            format!("javascript-{}.cwasm", key(8)),
            format!("python-{}.cwasm", key(3)),
            format!("python-{}.cwasm.tag", key(3)),
            format!("python-{}.cwasm", key(9)),
            format!("python-lite-{}.cwasm", key(7)),
            "python-notakey.cwasm".to_owned(),
        ];
        expected.sort();
        assert_eq!(left, expected);
    }
}
