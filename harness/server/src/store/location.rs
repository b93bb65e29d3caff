//! Where the store lives, as `--db` names it: a SQLite file (or `:memory:`), or a
//! PostgreSQL database (`postgres://…` / `postgresql://…`).

use std::path::{Path, PathBuf};

/// Where the store lives.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DbLocation {
    /// A SQLite database file, `:memory:`, or a `file:` URI SQLite parses itself.
    Sqlite(PathBuf),
    /// A PostgreSQL connection URL (`postgres://user:password@host:port/database`; a
    /// Unix socket directory as `host=/path` in the query or percent-encoded as the host).
    Postgres(String),
}

impl DbLocation {
    /// Reads a `--db` value: a `postgres://` or `postgresql://` URL, else a SQLite path.
    pub fn parse(text: &Path) -> DbLocation {
        match text.to_str() {
            Some(url) if is_postgres_url(url) => DbLocation::Postgres(url.to_owned()),
            _ => DbLocation::Sqlite(text.to_owned()),
        }
    }

    /// How to name it in messages: the path, or the URL without its password.
    pub fn describe(&self) -> String {
        match self {
            DbLocation::Sqlite(path) => path.display().to_string(),
            DbLocation::Postgres(url) => without_password(url),
        }
    }
}

impl std::fmt::Debug for DbLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the password: this lands in logs.
        write!(f, "DbLocation({})", self.describe())
    }
}

/// Whether `text` is a PostgreSQL URL.
pub fn is_postgres_url(text: &str) -> bool {
    text.starts_with("postgres://") || text.starts_with("postgresql://")
}

/// `url` with the password of its user part (and a `password=` query value) replaced by
/// `***`.
pub(super) fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority_end, _) = rest
        .char_indices()
        .find(|(_, c)| matches!(c, '/' | '?'))
        .unwrap_or((rest.len(), ' '));
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((user, host)) => match user.split_once(':') {
            Some((name, _)) => format!("{name}:***@{host}"),
            None => authority.to_owned(),
        },
        None => authority.to_owned(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some(("password", _)) => "password=***".to_owned(),
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => tail.to_owned(),
    };
    format!("{scheme}://{authority}{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_postgres_url_is_told_from_a_path_and_never_shows_its_password() {
        let url = "postgres://cordon:s3cret@db.internal:5432/cordon?password=x&sslmode=disable";
        let location = DbLocation::parse(Path::new(url));
        assert_eq!(location, DbLocation::Postgres(url.to_owned()));
        assert_eq!(
            location.describe(),
            "postgres://cordon:***@db.internal:5432/cordon?password=***&sslmode=disable"
        );
        assert!(!format!("{location:?}").contains("s3cret"));
        assert_eq!(
            DbLocation::parse(Path::new("postgresql://localhost/db")).describe(),
            "postgresql://localhost/db"
        );
        assert_eq!(
            DbLocation::parse(Path::new("state/cordon.db")),
            DbLocation::Sqlite(PathBuf::from("state/cordon.db"))
        );
    }
}
