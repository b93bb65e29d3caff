//! The on-disk cache of compiled images (`~/.cache/cordon`): where it is, its secret key,
//! the tags and stamps that vouch for a cached file, the lock, atomic writes, and pruning.
//!
//! Integrity: wasmtime runs a `.cwasm` as the machine code it contains, so a cached file
//! is loaded only if its tag — HMAC-SHA256 under a per-cache secret key (`cache.key`,
//! 0600), written beside it at compile time — matches. A file that fails is deleted and
//! the image recompiled. The directory is kept 0700 and must belong to this user; one
//! that belongs to someone else is not used at all (images are then compiled in memory).
//! Hashing a large image at every start is slow (figures in `docs/benchmarks.md`), so a
//! verified file also gets a stamp: a tag of its inode, size, mtime and ctime. Any write
//! changes the ctime, which nobody but root can set back, so while the stamp matches the
//! file is loaded without rehashing it.

use cordon_core::ids::constant_time_eq;
use std::fs::{DirBuilder, File, OpenOptions};
use std::hash::Hasher;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use cordon_protocol::execution::Language;
use sha2::{Digest, Sha256};
use wasmtime::{Engine, Module};

use crate::error::SandboxError;
use crate::hmac::{Hmac, KEY_LEN, hmac_sha256};

/// The cache's secret key for image tags.
const KEY_FILE: &str = "cache.key";

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
/// by one image per build (a CPython image is hundreds of MB: `docs/benchmarks.md`).
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

/// The kind of the CPython guest's images (`cpython-<key>.cwasm`).
pub(crate) const CPYTHON_KIND: &str = "cpython";

/// Every kind of image this build writes, as its files are named (`<kind>-<key>.cwasm`):
/// the bridge guests by their language, the CPython guest as [`CPYTHON_KIND`].
pub(crate) fn image_kinds() -> [&'static str; 3] {
    [
        Language::PythonLite.as_str(),
        Language::Javascript.as_str(),
        CPYTHON_KIND,
    ]
}

/// Removes from `dir` the images (`<kind>-<key>.cwasm`, with their tag and stamp) of a
/// kind not in `kinds`: images no guest of this build will load again, such as those
/// cached under a guest's former name (RustPython's images were `python-<key>.cwasm`
/// before it became `python-lite`). [`prune_older_images`] only ever looks at the kind it
/// just wrote, so without this they would stay forever. Best effort, like it.
pub(crate) fn prune_retired_images(dir: &Path, kinds: &[&str]) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let file_name = entry.file_name();
        let Some(file_name) = file_name.to_str() else {
            continue;
        };
        let Some(image) = [".cwasm", ".cwasm.tag", ".cwasm.stamp"]
            .iter()
            .find_map(|suffix| file_name.strip_suffix(suffix))
        else {
            continue;
        };
        let Some((kind, key)) = image.rsplit_once('-') else {
            continue;
        };
        let is_key = key.len() == 32 && key.bytes().all(|byte| byte.is_ascii_hexdigit());
        if is_key && !kinds.contains(&kind) && entry.file_type().is_ok_and(|t| t.is_file()) {
            let _ = std::fs::remove_file(entry.path());
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

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn images_of_kinds_no_guest_uses_are_pruned_with_their_tags_and_stamps() {
        let dir = tempfile::tempdir().unwrap();
        let key = |n: u8| format!("{:032x}", n);
        let make = |name: &str| std::fs::write(dir.path().join(name), b"x").unwrap();
        let current = [
            format!("python-lite-{}.cwasm", key(1)),
            format!("python-lite-{}.cwasm.tag", key(1)),
            format!("python-lite-{}.cwasm.stamp", key(1)),
            format!("javascript-{}.cwasm", key(2)),
            format!("cpython-{}.cwasm", key(3)),
            format!("cpython-{}.cwasm.tag", key(3)),
        ];
        // What a build from before the `python-lite` rename left, and one of a guest since
        // gone; then files that are not images of any kind.
        let retired = [
            format!("python-{}.cwasm", key(4)),
            format!("python-{}.cwasm.tag", key(4)),
            format!("python-{}.cwasm.stamp", key(4)),
            format!("ruby-{}.cwasm", key(5)),
        ];
        let other = [
            "cache.key".to_owned(),
            ".lock".to_owned(),
            "python-notakey.cwasm".to_owned(),
            format!("python-{}.wasm", key(6)),
        ];
        for name in current.iter().chain(&retired).chain(&other) {
            make(name);
        }
        std::fs::create_dir(dir.path().join("cpython")).unwrap();

        prune_retired_images(dir.path(), &image_kinds());

        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        let mut expected: Vec<String> = current.iter().chain(&other).cloned().collect();
        expected.push("cpython".to_owned());
        expected.sort();
        assert_eq!(left, expected);
    }

    #[test]
    fn the_current_kinds_are_the_bridge_languages_and_cpython() {
        assert_eq!(image_kinds(), ["python-lite", "javascript", "cpython"]);
    }
}
