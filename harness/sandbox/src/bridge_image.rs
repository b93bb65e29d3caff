//! The images of the bridge guests (RustPython as `python-lite`, QuickJS as
//! `javascript`): the embedded wasm, pre-initialized (`snapshot.rs`), precompiled, cached
//! on disk (`cache.rs`), and loaded as an `InstancePre`.
//!
//! Cache key: the guest module's hash, the engine's compatibility hash (wasmtime version and
//! every setting that affects compiled code) and [`RECIPE`]. A changed guest, wasmtime or
//! configuration therefore never loads a stale artifact.

use std::hash::Hash;
use std::path::Path;

use cordon_guest::abi;
use cordon_protocol::execution::Language;
use sha2::Digest;
use wasmtime::{Engine, Linker, Module};

use crate::cache::{
    DigestHasher, Verified, deserialize, deserialize_bytes, image_kinds, lock_cache,
    prune_older_images, prune_retired_images, secure_dir, stamp_path, tag_key, tag_path, verify,
    write_atomically,
};
use crate::error::SandboxError;
use crate::hmac::hmac_sha256;
use crate::host_state::HostState;
use crate::image::{GuestImage, GuestKind, Spare, identity};
use crate::snapshot::snapshot;

/// Bump when the way images are made changes (snapshot steps, exports used).
const RECIPE: &str = "cordon-image-v1";

/// The guest modules built for wasm32-wasip1 by `cordon-images` (empty when not built).
fn embedded(language: Language) -> &'static [u8] {
    match language {
        Language::PythonLite => cordon_images::PYTHON_LITE,
        Language::Javascript => cordon_images::JAVASCRIPT,
        _ => &[],
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
    spare: Spare,
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
                if let Some(dir) = path.parent() {
                    prune_retired_images(dir, &image_kinds());
                }
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
        identity: identity(language.as_str(), &key),
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
