//! The database file on disk: where it lives by default, its WAL companions, and keeping
//! them owner-only.

use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use super::error::{Result, StoreError};

/// Where `cordon serve` keeps its database unless told otherwise:
/// `$XDG_DATA_HOME/cordon/cordon.db`, else `~/.local/share/cordon/cordon.db`.
pub fn default_db_path() -> Option<std::path::PathBuf> {
    let data = std::env::var_os("XDG_DATA_HOME")
        .filter(|dir| !dir.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|dir| !dir.is_empty())
                .map(|home| std::path::PathBuf::from(home).join(".local/share"))
        })?;
    Some(data.join("cordon").join("cordon.db"))
}

/// The `-wal` and `-shm` files SQLite keeps next to the database in WAL mode.
pub(super) fn companions(path: &Path) -> [PathBuf; 2] {
    ["-wal", "-shm"].map(|suffix| {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    })
}

/// Makes `path` owner-only: creates it 0600 when `create` and it is missing, and clears
/// the group and other bits of an existing file (never sets any).
pub(super) fn make_private(path: &Path, create: bool) -> Result<()> {
    let io = |source| StoreError::Io {
        path: path.display().to_string(),
        source,
    };
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .write(create)
        .create(create)
        .truncate(false)
        .mode(0o600)
        .open(path);
    let file = match opened {
        Ok(file) => file,
        Err(error) if !create && error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(io(error)),
    };
    let mode = file.metadata().map_err(io)?.permissions().mode();
    if mode & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(mode & 0o7700))
            .map_err(io)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use crate::store::handle::SqliteStore;
    use crate::store::test_rows::computer;
    use pretty_assertions::assert_eq;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn the_database_and_its_wal_files_are_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state").join("cordon.db");
        let store = SqliteStore::open(&path).unwrap();
        store.insert_computer(&computer("cmp_a")).unwrap();
        assert_eq!(
            mode(path.parent().unwrap()),
            0o700,
            "the directory Cordon created"
        );
        assert_eq!(mode(&path), 0o600);
        for companion in companions(&path) {
            assert!(companion.exists(), "{} (WAL mode)", companion.display());
            assert_eq!(mode(&companion), 0o600, "{}", companion.display());
        }
    }

    #[test]
    fn existing_wider_files_are_tightened_and_an_existing_directory_keeps_its_mode() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = dir.path().join("cordon.db");
        drop(SqliteStore::open(&path).unwrap());
        let paths = [
            path.clone(),
            companions(&path)[0].clone(),
            companions(&path)[1].clone(),
        ];
        for file in &paths {
            if !file.exists() {
                std::fs::write(file, b"").unwrap();
            }
            std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        store.insert_computer(&computer("cmp_b")).unwrap();
        for file in &paths {
            assert_eq!(mode(file), 0o600, "{}", file.display());
        }
        assert_eq!(mode(dir.path()), 0o755, "not Cordon's directory");
        // Owner bits are never added.
        drop(store);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).unwrap();
        let _ = SqliteStore::open(&path);
        assert_eq!(mode(&path), 0o400);
    }
}
