//! The published MiniWoB++ pages: the PyPI package `miniwob`, pinned by version and by the
//! sha256 and size of its sdist, fetched once into Cordon's cache (as the CPython guest's
//! wheel is: the package index's PEP 503 page, `CORDON_PYPI_INDEX` for a mirror, a lock so
//! one process installs while others wait, a staging folder renamed into place).
//!
//! Only `miniwob/html/` (the pages), `miniwob/registration.py` (the list of task types)
//! and the licence are taken out of the sdist. Nothing of the package is in Cordon's tree.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::tar;

/// The package and version; upgrading is a reviewed change of the pins below.
pub const PACKAGE: &str = "miniwob";
pub const VERSION: &str = "1.1.0";
/// The sdist as the index lists it, its sha256 and size.
pub const SDIST: &str = "miniwob-1.1.0.tar.gz";
pub const SDIST_SHA256: &str = "37aefd67bcae51ecaf4bd3ba84e33eb904012a3459a7c342b338f81eae187048";
const SDIST_SIZE: usize = 1_644_501;
/// The sdist's top folder.
const TOP: &str = "miniwob-1.1.0/";
/// Most bytes the sdist may inflate to (it is ~10 MB).
const MAX_UNPACKED: u64 = 64 << 20;
/// The environment variable naming a local copy of the sdist (machines without network).
pub const SDIST_ENV: &str = "CORDON_MINIWOB_SDIST";
const DEFAULT_INDEX: &str = "https://pypi.org/simple";

/// Why the MiniWoB++ pages are not available.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PackageError {
    /// Nothing is cached and the sdist could not be fetched.
    #[error(
        "the MiniWoB++ pages (PyPI `{PACKAGE}` {VERSION}) are not in Cordon's cache and \
         fetching them failed: {0}. On a machine with network, `cordon bench --list miniwob` \
         fetches them (CORDON_PYPI_INDEX names a mirror). Offline, copy the sdist here and \
         point at it: `pip download --no-deps --no-binary :all: {PACKAGE}=={VERSION} -d . && \
         {SDIST_ENV}=./{SDIST} cordon bench --list miniwob`"
    )]
    Fetch(String),
    /// The sdist is not the pinned one.
    #[error("{file} does not match its pin (expected {expected}, found {found})")]
    Tampered {
        file: String,
        expected: String,
        found: String,
    },
    /// The sdist's contents are not what the suite needs.
    #[error("the {SDIST} sdist is unusable: {0}")]
    Archive(String),
    /// Reading or writing the cache failed.
    #[error("MiniWoB++ cache {path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    /// No cache directory is known.
    #[error("no cache directory for the MiniWoB++ pages: set CORDON_CACHE_DIR or HOME")]
    NoCache,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> PackageError + '_ {
    move |error| PackageError::Io {
        path: path.to_owned(),
        error,
    }
}

/// The installed pages of the pinned version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Package {
    dir: PathBuf,
}

impl Package {
    /// The folder the pages are served from (`miniwob/`, `flight/`, `core/`, `common/`).
    pub fn html(&self) -> PathBuf {
        self.dir.join("html")
    }

    /// The package's `registration.py` (one `register(id="miniwob/NAME-v1")` per task).
    pub fn registration(&self) -> PathBuf {
        self.dir.join("registration.py")
    }

    /// Whether `path` is inside this installation.
    pub fn holds(&self, path: &Path) -> bool {
        path.starts_with(&self.dir)
    }
}

/// Where the pinned version is installed under `cache_dir`.
pub fn install_dir(cache_dir: &Path) -> PathBuf {
    cache_dir
        .join("miniwob")
        .join(format!("{PACKAGE}-{VERSION}"))
}

fn installed(dir: &Path) -> bool {
    dir.join("registration.py").is_file() && dir.join("html/core/core.js").is_file()
}

/// Where the sdist comes from when it is not installed yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The package index (PEP 503 "simple" API).
    pub index: String,
    /// A local copy of the sdist, used instead of the index.
    pub local: Option<PathBuf>,
}

impl Source {
    /// `CORDON_PYPI_INDEX` (default PyPI) and `CORDON_MINIWOB_SDIST`.
    pub fn from_env() -> Source {
        Source {
            index: std::env::var("CORDON_PYPI_INDEX").unwrap_or_else(|_| DEFAULT_INDEX.to_owned()),
            local: std::env::var_os(SDIST_ENV).map(PathBuf::from),
        }
    }
}

/// The installed pages under Cordon's default cache directory, fetched first when needed
/// from where the environment says ([`Source::from_env`]).
pub async fn ensure_default(
    progress: &(dyn Fn(&str) + Send + Sync),
) -> Result<Package, PackageError> {
    let cache = cordon_sandbox::default_cache_dir().ok_or(PackageError::NoCache)?;
    ensure(&cache, &Source::from_env(), progress).await
}

/// The installed pages, fetching and extracting them first when needed. One process
/// installs while others wait on the lock.
pub async fn ensure(
    cache_dir: &Path,
    source: &Source,
    progress: &(dyn Fn(&str) + Send + Sync),
) -> Result<Package, PackageError> {
    let dir = install_dir(cache_dir);
    if installed(&dir) {
        return Ok(Package { dir });
    }
    let root = dir.parent().unwrap_or(cache_dir).to_owned();
    let lock = cordon_sandbox::take_install_lock(&root)
        .await
        .map_err(|failed| io(&failed.path)(failed.error))?;
    if !installed(&dir) {
        let sdist = match &source.local {
            Some(path) => {
                progress(&format!(
                    "installing the MiniWoB++ pages from {}",
                    path.display()
                ));
                std::fs::read(path).map_err(io(path))?
            }
            None => download(&source.index, progress).await?,
        };
        let target = dir.clone();
        tokio::task::spawn_blocking(move || extract(&sdist, &target))
            .await
            .map_err(|e| PackageError::Fetch(format!("extract task failed: {e}")))??;
    }
    drop(lock);
    Ok(Package { dir })
}

/// Checks the sdist against its pins, then writes the pages, the task list and the
/// licence into a fresh folder that replaces `dir` in one rename.
pub fn extract(sdist: &[u8], dir: &Path) -> Result<(), PackageError> {
    if sdist.len() != SDIST_SIZE {
        return Err(PackageError::Tampered {
            file: SDIST.into(),
            expected: format!("{SDIST_SIZE} bytes"),
            found: format!("{} bytes", sdist.len()),
        });
    }
    let found = hex::encode(Sha256::digest(sdist));
    if found != SDIST_SHA256 {
        return Err(PackageError::Tampered {
            file: SDIST.into(),
            expected: SDIST_SHA256.into(),
            found,
        });
    }
    let mut unpacked = Vec::new();
    flate2::read::GzDecoder::new(sdist)
        .take(MAX_UNPACKED)
        .read_to_end(&mut unpacked)
        .map_err(|e| PackageError::Archive(e.to_string()))?;
    let files = tar::files(&unpacked).map_err(|e| PackageError::Archive(e.to_string()))?;
    let staging = dir.with_extension(format!("tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    let mut wanted = 0;
    for file in files {
        let Some(inner) = file.path.strip_prefix(TOP) else {
            continue;
        };
        let target = if let Some(page) = inner.strip_prefix("miniwob/html/") {
            staging.join("html").join(page)
        } else if inner == "miniwob/registration.py" || inner == "LICENSE" {
            wanted += 1;
            staging.join(inner.rsplit('/').next().unwrap_or(inner))
        } else {
            continue;
        };
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        std::fs::write(&target, file.data).map_err(io(&target))?;
    }
    if wanted != 2 || !installed(&staging) {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(PackageError::Archive(
            "it lacks miniwob/registration.py, LICENSE or the pages".into(),
        ));
    }
    let _ = std::fs::remove_dir_all(dir);
    std::fs::rename(&staging, dir).map_err(io(dir))
}

async fn download(
    index: &str,
    progress: &(dyn Fn(&str) + Send + Sync),
) -> Result<Vec<u8>, PackageError> {
    let fail = |what: &str, e: &dyn std::fmt::Display| PackageError::Fetch(format!("{what}: {e}"));
    let client = reqwest::Client::builder()
        .user_agent(concat!("cordon/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(std::time::Duration::from_secs(15))
        .timeout(std::time::Duration::from_secs(120))
        .build()
        .map_err(|e| fail("HTTP client", &e))?;
    let url = cordon_sandbox::find_on_index(&client, index, PACKAGE, SDIST)
        .await
        .map_err(PackageError::Fetch)?;
    progress(&format!(
        "fetching the MiniWoB++ pages ({PACKAGE} {VERSION}, {} kB) from {index}",
        SDIST_SIZE / 1000
    ));
    let mut response = client
        .get(url)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|e| fail("downloading the sdist", &e))?;
    let mut bytes = Vec::with_capacity(SDIST_SIZE);
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| fail("downloading the sdist", &e))?
    {
        if bytes.len() + chunk.len() > SDIST_SIZE {
            return Err(PackageError::Fetch(
                "the sdist is larger than pinned".into(),
            ));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sdist_link_is_found_by_its_exact_name() {
        let page_url = reqwest::Url::parse("https://example.test/simple/miniwob/").unwrap();
        let page = format!(
            r#"<a href="https://files.example.test/x/{SDIST}.asc">sig</a>
               <a href="../../packages/ab/{SDIST}#sha256={SDIST_SHA256}">{SDIST}</a>"#
        );
        let url = cordon_sandbox::link_to(&page_url, &page, SDIST).unwrap();
        assert_eq!(
            url.as_str(),
            format!("https://example.test/packages/ab/{SDIST}#sha256={SDIST_SHA256}")
        );
        assert!(cordon_sandbox::link_to(&page_url, "<a href=\"other.tar.gz\">", SDIST).is_none());
    }

    #[test]
    fn an_sdist_that_is_not_the_pinned_one_is_refused_before_it_is_opened() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let error = extract(&vec![0u8; SDIST_SIZE], &out).unwrap_err();
        assert!(
            matches!(&error, PackageError::Tampered { file, .. } if file == SDIST),
            "{error}"
        );
        assert!(matches!(
            extract(b"short", &out),
            Err(PackageError::Tampered { .. })
        ));
        assert!(!out.exists());
    }
}
