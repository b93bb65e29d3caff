//! The image cache: private, and a tampered image is discarded and recompiled, never run.
//! Uses the JavaScript image, which compiles in about a second.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use cordon_protocol::execution::{ExecutionStatus, Language};
use cordon_sandbox::{ExecutionRequest, Sandbox, SandboxConfig};

use crate::common::no_tools;

/// A sandbox on `dir` that loads the JavaScript image; returns its progress lines.
async fn open(dir: &Path) -> (Sandbox, Vec<String>) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let seen = lines.clone();
    let config = SandboxConfig::default()
        .preload(vec![Language::Javascript])
        .cache_dir(Some(dir.to_owned()))
        .max_instances(2)
        .progress(move |line| seen.lock().unwrap().push(line.to_owned()));
    let sandbox = Sandbox::new(config).await.expect("the sandbox starts");
    let lines = lines.lock().unwrap().clone();
    (sandbox, lines)
}

async fn works(sandbox: &Sandbox) {
    let request = ExecutionRequest::new(Language::Javascript, "6 * 7", no_tools());
    let result = sandbox.execute(request).wait().await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:#?}");
    assert_eq!(result.result, 42);
}

fn cached_image(dir: &Path) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.extension().is_some_and(|ext| ext == "cwasm"))
        .expect("a cached image")
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().mode() & 0o777
}

fn compiled(lines: &[String]) -> bool {
    lines.iter().any(|line| line.contains("preparing"))
}

#[tokio::test]
async fn a_tampered_cached_image_is_discarded_and_recompiled() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("cache");
    let (sandbox, lines) = open(&dir).await;
    assert!(compiled(&lines), "{lines:?}");
    works(&sandbox).await;
    drop(sandbox);
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join("cache.key")), 0o600);
    let image = cached_image(&dir);
    assert_eq!(mode(&image), 0o600);

    // Loaded from the cache when intact (hashed once, then known by its stamp).
    for _ in 0..2 {
        let (sandbox, lines) = open(&dir).await;
        assert!(!compiled(&lines), "{lines:?}");
        works(&sandbox).await;
    }
    assert!(image.with_extension("cwasm.stamp").exists());

    let mut bytes = std::fs::read(&image).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&image, &bytes).unwrap();
    let (sandbox, lines) = open(&dir).await;
    assert!(
        lines.iter().any(|line| line.contains("integrity check")),
        "{lines:?}"
    );
    assert!(compiled(&lines), "{lines:?}");
    works(&sandbox).await;
    assert_ne!(std::fs::read(&image).unwrap(), bytes, "rewritten");
}

#[tokio::test]
async fn cache_permissions_are_fixed_or_the_cache_refused() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("cache");
    drop(open(&dir).await);
    let image = cached_image(&dir);
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&image, std::fs::Permissions::from_mode(0o644)).unwrap();
    let key = dir.join("cache.key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (sandbox, lines) = open(&dir).await;
    works(&sandbox).await;
    assert_eq!(mode(&dir), 0o700);
    // A key others could read is replaced, so the image made with it is recompiled.
    assert_eq!(mode(&key), 0o600);
    assert!(compiled(&lines), "{lines:?}");
    assert_eq!(mode(&cached_image(&dir)), 0o600);

    // A directory of another user is not used at all (only root can set that up here).
    let probe = root.path().join("probe");
    std::fs::write(&probe, b"").unwrap();
    if std::fs::metadata(&probe).unwrap().uid() == 0 {
        let foreign = root.path().join("foreign");
        std::fs::create_dir(&foreign).unwrap();
        std::os::unix::fs::chown(&foreign, Some(65534), Some(65534)).unwrap();
        let (sandbox, lines) = open(&foreign).await;
        works(&sandbox).await;
        assert!(
            lines
                .iter()
                .any(|line| line.contains("not using the image cache")),
            "{lines:?}"
        );
        assert_eq!(std::fs::read_dir(&foreign).unwrap().count(), 0);
    }
}
