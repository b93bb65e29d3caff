//! Rows the store's unit tests share: a live computer session and its steps.

use super::computers::{ComputerRow, ComputerStepRow};

pub(super) fn computer(id: &str) -> ComputerRow {
    ComputerRow {
        id: id.into(),
        setup: serde_json::json!({"url": "http://127.0.0.1:9/"}),
        trajectory: format!("/tmp/trajectories/{id}"),
        ttl_ms: 1000,
        created_ms: 1,
        expires_ms: 1001,
        state: "live".into(),
        reason: None,
        finished_ms: None,
        current_url: None,
        steps: 0,
        pending: None,
    }
}

pub(super) fn step(n: u64, asks: Option<&str>, resolves: Option<(&str, &str)>) -> ComputerStepRow {
    ComputerStepRow {
        step: n,
        status: if asks.is_some() {
            "approval_required"
        } else {
            "ok"
        }
        .into(),
        data: serde_json::json!({"step": n}),
        screenshot: Some(format!("step-{n:04}.png")),
        current_url: Some(format!("http://127.0.0.1:9/#{n}")),
        pending: asks.map(|id| serde_json::json!({"approval_id": id})),
        asks: asks.map(str::to_owned),
        resolves: resolves.map(|(a, b)| (a.to_owned(), b.to_owned())),
    }
}
