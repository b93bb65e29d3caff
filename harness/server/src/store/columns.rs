//! Conversions between Rust values and the values of SQLite columns, and a row read whole
//! as a tuple.

use cordon_protocol::execution::Language;
use rusqlite::Row;

pub(super) fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

pub(super) fn to_u64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// A row's columns, in order, as a tuple of their types (`(String, i64, Option<String>)`):
/// the reader to give `query_row` or `query_map` for a row read whole.
pub(super) fn row_tuple<T>(row: &Row<'_>) -> rusqlite::Result<T>
where
    T: for<'a> TryFrom<&'a Row<'a>, Error = rusqlite::Error>,
{
    T::try_from(row)
}

pub(super) fn language_from(name: &str) -> Language {
    Language::parse(name).unwrap_or(Language::Python)
}
