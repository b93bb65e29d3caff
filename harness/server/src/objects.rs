//! The object store: where the large things at rest live (paused sandboxes, workspaces),
//! beside the database that records small ones. A local folder by default; any
//! S3-compatible store (`s3://bucket/prefix`) when several replicas share them.
//!
//! Built on the `object_store` crate rather than on files of our own: its S3 client is the
//! one the Arrow ecosystem runs in production, and the local folder implementation writes
//! through a temporary file and a rename, so a reader never sees half an object.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

/// Why the object store could not do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ObjectsError {
    /// The location given on the command line is not one the store understands.
    #[error(
        "the object store location {location:?} is not usable: {reason} (give a folder, \
         file:///folder or s3://bucket/prefix)"
    )]
    Location {
        /// What was given.
        location: String,
        /// Why it was refused.
        reason: String,
    },
    /// A key with characters or segments that could leave its prefix.
    #[error(
        "the object key {0:?} is not allowed (letters, digits, `_`, `-`, `.`, `/` only, no `..`)"
    )]
    Key(String),
    /// An object of a local store could not be made owner-only.
    #[error("could not make {path} owner-only: {source}")]
    Private {
        /// The object's file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The store answered with an error.
    #[error("the object store failed: {0}")]
    Store(#[from] object_store::Error),
}

/// A handle on the object store; cheap to clone.
#[derive(Clone)]
pub struct Objects {
    store: Arc<dyn ObjectStore>,
    prefix: ObjectPath,
    shown: String,
    /// The folder of a local store: its objects (paused sandboxes' memory and files) are
    /// made owner-only, as the database is.
    folder: Option<std::path::PathBuf>,
}

impl fmt::Debug for Objects {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Objects").field("at", &self.shown).finish()
    }
}

impl Objects {
    /// The store at `location`: a folder path (created if missing), `file:///folder`, or
    /// `s3://bucket/prefix`. S3 settings come from the usual AWS variables
    /// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT`,
    /// `AWS_ALLOW_HTTP=true` for a plain-HTTP endpoint such as a local S3-compatible
    /// server); the non-secret ones may also ride in the query:
    /// `s3://bucket/prefix?endpoint=http://127.0.0.1:9000&region=us-east-1&allow_http=true`.
    pub fn open(location: &str) -> Result<Objects, ObjectsError> {
        Objects::open_with(location, std::iter::empty::<(String, String)>())
    }

    /// [`Objects::open`] with S3 settings given here (the `object_store` crate's
    /// `AmazonS3ConfigKey` names: `endpoint`, `region`, `access_key_id`, …), over the
    /// environment's.
    pub fn open_with(
        location: &str,
        settings: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Objects, ObjectsError> {
        let refuse = |reason: String| ObjectsError::Location {
            location: location.to_owned(),
            reason,
        };
        if let Some(rest) = location.strip_prefix("s3://") {
            let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(refuse("no bucket named".into()));
            }
            let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
            let from_query = url::form_urlencoded::parse(query.as_bytes()).into_owned();
            for (name, value) in from_query {
                if SECRET_SETTINGS.contains(&name.as_str()) {
                    // A location is shown in logs and process lists; keys stay in the
                    // environment.
                    return Err(refuse(format!(
                        "`{name}` may not be in the location: set it in the environment"
                    )));
                }
                builder = with_setting(builder, &name, value).map_err(refuse)?;
            }
            for (name, value) in settings {
                builder = with_setting(builder, &name, value).map_err(refuse)?;
            }
            let store = builder.build().map_err(|e| refuse(e.to_string()))?;
            let prefix = prefix.trim_matches('/');
            return Ok(Objects {
                store: Arc::new(store),
                prefix: ObjectPath::parse(prefix)
                    .map_err(|_| refuse("the prefix is not a plain path".into()))?,
                shown: format!("s3://{bucket}/{prefix}"),
                folder: None,
            });
        }
        let folder = location.strip_prefix("file://").unwrap_or(location);
        if folder.is_empty() || folder.contains("://") {
            return Err(refuse("unknown scheme".into()));
        }
        {
            use std::os::unix::fs::DirBuilderExt as _;
            // Created owner-only (an existing folder keeps its mode).
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(folder)
                .map_err(|e| refuse(e.to_string()))?;
        }
        let store = LocalFileSystem::new_with_prefix(folder).map_err(|e| refuse(e.to_string()))?;
        Ok(Objects {
            store: Arc::new(store),
            prefix: ObjectPath::default(),
            shown: folder.to_owned(),
            folder: Some(std::path::PathBuf::from(folder)),
        })
    }

    /// A store in this process's memory only (tests, and servers given no location):
    /// what it holds is gone when the process exits.
    pub fn in_memory() -> Objects {
        Objects {
            store: Arc::new(object_store::memory::InMemory::new()),
            prefix: ObjectPath::default(),
            shown: "memory".to_owned(),
            folder: None,
        }
    }

    /// Where the store is, for logs (never carries credentials: they come from the
    /// environment, not the location).
    pub fn describe(&self) -> &str {
        &self.shown
    }

    /// Writes `bytes` at `key`, replacing what was there in one step.
    pub async fn put(&self, key: &str, bytes: Bytes) -> Result<(), ObjectsError> {
        let path = self.path(key)?;
        self.store.put(&path, PutPayload::from_bytes(bytes)).await?;
        if let Some(folder) = &self.folder {
            use std::os::unix::fs::PermissionsExt as _;
            let file = folder.join(key);
            let private = std::fs::Permissions::from_mode(0o600);
            std::fs::set_permissions(&file, private).map_err(|source| ObjectsError::Private {
                path: file.display().to_string(),
                source,
            })?;
            // Its folders (`paused/`) were made by the store with the default mode.
            let mut dir = file.parent();
            while let Some(at) = dir {
                if at == folder.as_path() || !at.starts_with(folder) {
                    break;
                }
                let _ = std::fs::set_permissions(at, std::fs::Permissions::from_mode(0o700));
                dir = at.parent();
            }
        }
        Ok(())
    }

    /// The object at `key`, or `None` when there is none.
    pub async fn get(&self, key: &str) -> Result<Option<Bytes>, ObjectsError> {
        let path = self.path(key)?;
        match self.store.get(&path).await {
            Ok(found) => Ok(Some(found.bytes().await?)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Removes the object at `key`; removing one that is not there is not an error.
    pub async fn delete(&self, key: &str) -> Result<(), ObjectsError> {
        let path = self.path(key)?;
        match self.store.delete(&path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// The store path of `key` under this store's prefix. Keys are Cordon's own (ids and
    /// fixed names), but they are checked anyway: one that could climb out of the prefix
    /// is refused rather than normalised.
    fn path(&self, key: &str) -> Result<ObjectPath, ObjectsError> {
        let plain = !key.is_empty()
            && key.split('/').all(|segment| {
                !segment.is_empty()
                    && segment != "."
                    && segment != ".."
                    && segment
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
            });
        if !plain {
            return Err(ObjectsError::Key(key.to_owned()));
        }
        Ok(self
            .prefix
            .parts()
            .chain(ObjectPath::from(key).parts())
            .collect())
    }
}

/// S3 settings that are credentials: never taken from a location string.
const SECRET_SETTINGS: [&str; 6] = [
    "secret_access_key",
    "aws_secret_access_key",
    "token",
    "session_token",
    "aws_session_token",
    "aws_token",
];

fn with_setting(
    builder: AmazonS3Builder,
    name: &str,
    value: String,
) -> Result<AmazonS3Builder, String> {
    let key: AmazonS3ConfigKey = name
        .parse()
        .map_err(|_| format!("`{name}` is not an S3 setting"))?;
    Ok(builder.with_config(key, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_folder_store_keeps_replaces_and_forgets_objects() {
        let dir = tempfile::tempdir().unwrap();
        let objects = Objects::open(dir.path().to_str().unwrap()).unwrap();
        assert_eq!(objects.get("paused/sbx_1").await.unwrap(), None);
        objects
            .put("paused/sbx_1", Bytes::from_static(b"first"))
            .await
            .unwrap();
        objects
            .put("paused/sbx_1", Bytes::from_static(b"second"))
            .await
            .unwrap();
        assert_eq!(
            objects.get("paused/sbx_1").await.unwrap().as_deref(),
            Some(&b"second"[..])
        );
        assert!(dir.path().join("paused/sbx_1").is_file());
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = |path: &std::path::Path| {
                std::fs::metadata(path).unwrap().permissions().mode() & 0o777
            };
            assert_eq!(mode(&dir.path().join("paused/sbx_1")), 0o600);
            assert_eq!(mode(&dir.path().join("paused")), 0o700);
        }
        objects.delete("paused/sbx_1").await.unwrap();
        objects.delete("paused/sbx_1").await.unwrap();
        assert_eq!(objects.get("paused/sbx_1").await.unwrap(), None);
    }

    #[tokio::test]
    async fn keys_that_could_leave_the_store_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let objects = Objects::open(dir.path().join("objects").to_str().unwrap()).unwrap();
        for key in [
            "",
            "../escape",
            "a/../../b",
            "a//b",
            "/abs",
            "a/./b",
            "sp ace",
            "a\\b",
        ] {
            let refused = objects.put(key, Bytes::from_static(b"x")).await;
            assert!(
                matches!(refused, Err(ObjectsError::Key(_))),
                "{key:?} was taken"
            );
        }
        assert!(!dir.path().join("escape").exists());
    }

    #[test]
    fn unknown_locations_are_refused_with_what_to_give() {
        for location in ["gs://bucket", "s3://", "ftp://host/x", ""] {
            let error = Objects::open(location).unwrap_err().to_string();
            assert!(error.contains("s3://bucket/prefix"), "{location}: {error}");
        }
    }
}

#[cfg(test)]
mod s3_tests;
