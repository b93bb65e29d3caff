//! Why a tool search gave no result: always the model's to read (it can search again).

/// A search that could not run; the model reads the message, the client the code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum SearchError {
    /// The input has no `query` string, or an empty one.
    #[error("the input needs `query`: a non-empty string")]
    NoQuery,
    /// The query is longer than the search takes.
    #[error("the query is {len} characters long; at most {max} are accepted")]
    TooLong {
        /// Its length in characters.
        len: usize,
        /// The bound.
        max: usize,
    },
    /// The regular expression does not compile (bad syntax, an unsupported feature such as
    /// look-around or a backreference, or too large once compiled).
    #[error("invalid pattern: {0}")]
    InvalidPattern(String),
}

impl SearchError {
    /// The vendor's `error_code` for this error (`tool_search_tool_result_error`).
    pub(crate) fn code(&self) -> &'static str {
        "invalid_tool_input"
    }
}
