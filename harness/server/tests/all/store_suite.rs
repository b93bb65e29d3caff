//! The store suite: every test runs on SQLite and on PostgreSQL (`mod sqlite` and
//! `mod postgres` at the bottom), so the two backends keep one behaviour: the same ids,
//! the same event order, the same paging, the same recovery after an unclean stop.

#![allow(clippy::unwrap_used, reason = "tests")]

use std::collections::BTreeSet;

use cordon_protocol::execution::{
    ExecutionEvent, ExecutionResult, ExecutionStatus, Language, Limits, Stream, Usage,
};
use cordon_server::store::{
    COMPUTER_RESTART_REASON, ComputerRow, ComputerStepRow, NewConversationEntry, SandboxRow,
    StoreError,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::backing::Backing;

fn delta(text: &str) -> ExecutionEvent {
    ExecutionEvent::OutputDelta {
        stream: Stream::Stdout,
        text: text.into(),
    }
}

fn completed(stdout: &str) -> ExecutionEvent {
    ExecutionEvent::Completed(ExecutionResult {
        status: ExecutionStatus::Completed,
        limit: None,
        stdout: stdout.into(),
        stderr: String::new(),
        result: json!(42),
        result_encoding: None,
        error: None,
        tool_calls: Vec::new(),
        usage: Usage::default(),
        truncated: false,
    })
}

fn asks(approval_id: &str) -> ExecutionEvent {
    ExecutionEvent::ApprovalRequired {
        approval_id: approval_id.into(),
        call_id: format!("call_{approval_id}"),
        tool: "pay".into(),
        input: json!({"amount": 5}),
        reason: "money moves".into(),
    }
}

pub(crate) fn computer(id: &str) -> ComputerRow {
    ComputerRow {
        id: id.into(),
        setup: json!({"url": "http://127.0.0.1:9/"}),
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

pub(crate) fn step(n: u64, asks: Option<&str>, resolves: Option<(&str, &str)>) -> ComputerStepRow {
    ComputerStepRow {
        step: n,
        status: if asks.is_some() {
            "approval_required"
        } else {
            "ok"
        }
        .into(),
        data: json!({"step": n}),
        screenshot: Some(format!("step-{n:04}.png")),
        current_url: Some(format!("http://127.0.0.1:9/#{n}")),
        pending: asks.map(|id| json!({"approval_id": id})),
        asks: asks.map(str::to_owned),
        resolves: resolves.map(|(a, b)| (a.to_owned(), b.to_owned())),
    }
}

async fn an_execution_logs_its_events_in_order_and_ends_with_its_result(db: Backing) {
    let store = db.open().await;
    store
        .insert_execution("exec_1", "sbx_1", Language::PythonLite, "print(1)")
        .await
        .unwrap();
    let row = store.execution("exec_1").await.unwrap().unwrap();
    assert_eq!(
        (
            row.status.as_str(),
            row.language,
            row.finished_ms,
            row.result
        ),
        ("running", Language::PythonLite, None, None)
    );
    for (seq, text) in [(1, "a"), (2, "b"), (3, "c")] {
        store
            .append_event("exec_1", seq, &delta(text))
            .await
            .unwrap();
    }
    store
        .append_event("exec_1", 4, &asks("appr_1"))
        .await
        .unwrap();
    store
        .append_event("exec_1", 5, &asks("appr_2"))
        .await
        .unwrap();
    // A seq already taken is refused, and the log is unchanged.
    assert!(store.append_event("exec_1", 2, &delta("x")).await.is_err());
    let pending = store.pending_approvals("exec_1").await.unwrap();
    let ids: Vec<&str> = pending.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ids, ["appr_1", "appr_2"]);
    assert_eq!(pending[0].input, json!({"amount": 5}));
    assert_eq!(pending[0].call_id, "call_appr_1");
    assert!(store.decide_approval("appr_1", "approved").await.unwrap());
    assert!(!store.decide_approval("appr_1", "denied").await.unwrap());
    store
        .append_event("exec_1", 6, &completed("abc"))
        .await
        .unwrap();

    let events = store.events_after("exec_1", 0, usize::MAX).await.unwrap();
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5, 6]);
    assert_eq!(events[1].event_type, "output.delta");
    assert_eq!(events[1].data, serde_json::to_string(&delta("b")).unwrap());
    assert_eq!(events[5].event_type, "execution.completed");
    let page = store.events_after("exec_1", 2, 2).await.unwrap();
    assert_eq!(page.iter().map(|e| e.seq).collect::<Vec<_>>(), [3, 4]);

    let row = store.execution("exec_1").await.unwrap().unwrap();
    assert_eq!(row.status, "completed");
    assert!(row.finished_ms.is_some());
    let result = row.result.unwrap();
    assert_eq!((result.stdout.as_str(), result.result), ("abc", json!(42)));
    // The end expired the undecided approval; the decided one keeps its decision.
    assert_eq!(
        store.approval("appr_1").await.unwrap().unwrap().status,
        "approved"
    );
    assert_eq!(
        store.approval("appr_2").await.unwrap().unwrap().status,
        "expired"
    );
    assert!(store.pending_approvals("exec_1").await.unwrap().is_empty());

    assert!(store.delete_execution("exec_1").await.unwrap());
    assert!(!store.delete_execution("exec_1").await.unwrap());
    assert!(store.execution("exec_1").await.unwrap().is_none());
    assert!(
        store
            .events_after("exec_1", 0, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.approval("appr_2").await.unwrap().is_none());
}

async fn recovery_interrupts_what_was_running_with_a_final_event_from_its_log(db: Backing) {
    {
        let store = db.open().await;
        store
            .insert_execution("exec_run", "sbx_1", Language::Javascript, "1")
            .await
            .unwrap();
        store
            .append_event("exec_run", 1, &delta("1\n"))
            .await
            .unwrap();
        store
            .append_event("exec_run", 2, &asks("appr_9"))
            .await
            .unwrap();
        store
            .insert_execution("exec_done", "sbx_1", Language::Javascript, "2")
            .await
            .unwrap();
        store
            .append_event("exec_done", 1, &completed("2"))
            .await
            .unwrap();
        store.insert_sandbox(&sandbox("sbx_1")).await.unwrap();
        store.insert_computer(&computer("cmp_1")).await.unwrap();
        store
            .append_computer_step("cmp_1", &step(1, Some("appr_c"), None))
            .await
            .unwrap();
    }
    let store = db.open().await;
    let restart = crate::replica_suite::restart();
    assert_eq!(
        store
            .recover("the server restarted", &restart)
            .await
            .unwrap(),
        1
    );
    let row = store.execution("exec_run").await.unwrap().unwrap();
    assert_eq!(row.status, "interrupted");
    let result = row.result.unwrap();
    assert_eq!(result.stdout, "1\n");
    assert_eq!(result.error.unwrap().message, "the server restarted");
    let events = store.events_after("exec_run", 0, 10).await.unwrap();
    assert_eq!(events.len(), 3);
    assert_eq!(
        (events[2].seq, events[2].event_type.as_str()),
        (3, "execution.completed")
    );
    assert_eq!(
        store.approval("appr_9").await.unwrap().unwrap().status,
        "expired"
    );
    // What had ended is untouched.
    assert_eq!(
        store.execution("exec_done").await.unwrap().unwrap().status,
        "completed"
    );
    assert_eq!(
        store.events_after("exec_done", 0, 10).await.unwrap().len(),
        1
    );
    let sandbox = store.sandbox("sbx_1").await.unwrap().unwrap();
    assert_eq!(
        (sandbox.state.as_str(), sandbox.reason.as_deref()),
        (
            "interrupted",
            Some(cordon_server::store::SANDBOX_RESTART_REASON)
        )
    );
    let computer = store.computer("cmp_1").await.unwrap().unwrap();
    assert_eq!(computer.state, "interrupted");
    assert_eq!(computer.reason.as_deref(), Some(COMPUTER_RESTART_REASON));
    assert_eq!(computer.pending, None);
    assert_eq!(
        store.computer_approval("appr_c").await.unwrap(),
        Some(("cmp_1".to_owned(), "expired".to_owned()))
    );
    assert_eq!(store.recover("again", &restart).await.unwrap(), 0);
}

pub(crate) fn sandbox(id: &str) -> SandboxRow {
    SandboxRow {
        id: id.into(),
        language: Language::Javascript,
        tools: Vec::new(),
        limits: Limits::default(),
        stateful: true,
        ttl_ms: 60_000,
        created_ms: 10,
        expires_ms: 60_010,
        state: "live".into(),
        reason: None,
        paused_bytes: None,
        paused_key: None,
    }
}

async fn sandboxes_are_recorded_touched_and_ended_once(db: Backing) {
    let store = db.open().await;
    assert!(store.sandbox("sbx_1").await.unwrap().is_none());
    store.insert_sandbox(&sandbox("sbx_1")).await.unwrap();
    assert_eq!(
        store.sandbox("sbx_1").await.unwrap().unwrap(),
        sandbox("sbx_1")
    );
    store.touch_sandbox("sbx_1", 99_999).await.unwrap();
    store.end_sandbox("sbx_1", "expired", "idle").await.unwrap();
    // Only a live sandbox ends: the first reason stays.
    store
        .end_sandbox("sbx_1", "deleted", "later")
        .await
        .unwrap();
    let row = store.sandbox("sbx_1").await.unwrap().unwrap();
    assert_eq!(
        (row.expires_ms, row.state.as_str(), row.reason.as_deref()),
        (99_999, "expired", Some("idle"))
    );
    store.mark_sandbox_deleted("sbx_1").await.unwrap();
    assert_eq!(
        store.sandbox("sbx_1").await.unwrap().unwrap().state,
        "deleted"
    );
    assert!(
        store.insert_sandbox(&sandbox("sbx_1")).await.is_err(),
        "ids are unique"
    );
}

async fn computer_steps_approvals_and_deletion(db: Backing) {
    let store = db.open().await;
    store.insert_computer(&computer("cmp_1")).await.unwrap();
    store
        .append_computer_step("cmp_1", &step(1, None, None))
        .await
        .unwrap();
    store
        .append_computer_step("cmp_1", &step(2, Some("appr_1"), None))
        .await
        .unwrap();
    let row = store.computer("cmp_1").await.unwrap().unwrap();
    assert_eq!(row.steps, 2);
    assert_eq!(row.current_url.as_deref(), Some("http://127.0.0.1:9/#2"));
    assert_eq!(row.pending, Some(json!({"approval_id": "appr_1"})));
    // Another session's id does not touch it.
    store
        .expire_computer_approval("cmp_2", "appr_1")
        .await
        .unwrap();
    assert!(
        store
            .computer("cmp_1")
            .await
            .unwrap()
            .unwrap()
            .pending
            .is_some()
    );
    store
        .append_computer_step("cmp_1", &step(3, None, Some(("appr_1", "approved"))))
        .await
        .unwrap();
    assert_eq!(
        store.computer_approval("appr_1").await.unwrap().unwrap().1,
        "approved"
    );
    assert_eq!(
        store.computer("cmp_1").await.unwrap().unwrap().pending,
        None
    );
    store
        .append_computer_step("cmp_1", &step(4, Some("appr_2"), None))
        .await
        .unwrap();
    store
        .expire_computer_approval("cmp_1", "appr_2")
        .await
        .unwrap();
    let row = store.computer("cmp_1").await.unwrap().unwrap();
    assert_eq!((row.state.as_str(), row.pending), ("live", None));
    let steps = store.computer_steps("cmp_1", 1).await.unwrap();
    assert_eq!(
        steps,
        [
            (2, json!({"step": 2})),
            (3, json!({"step": 3})),
            (4, json!({"step": 4}))
        ]
    );
    assert_eq!(
        store
            .computer_screenshot("cmp_1", 3)
            .await
            .unwrap()
            .as_deref(),
        Some("step-0003.png")
    );
    assert_eq!(store.computer_screenshot("cmp_1", 9).await.unwrap(), None);
    store.touch_computer("cmp_1", 5000).await.unwrap();
    store
        .append_computer_step("cmp_1", &step(5, Some("appr_3"), None))
        .await
        .unwrap();
    store
        .end_computer("cmp_1", "closed", "deleted")
        .await
        .unwrap();
    let row = store.computer("cmp_1").await.unwrap().unwrap();
    assert_eq!(
        (row.state.as_str(), row.expires_ms, row.pending),
        ("closed", 5000, None)
    );
    assert!(row.finished_ms.is_some());
    assert_eq!(
        store.computer_approval("appr_3").await.unwrap().unwrap().1,
        "expired"
    );
    assert_eq!(
        store.delete_computer("cmp_1").await.unwrap().as_deref(),
        Some("/tmp/trajectories/cmp_1")
    );
    assert!(store.computer("cmp_1").await.unwrap().is_none());
    assert!(store.computer_steps("cmp_1", 0).await.unwrap().is_empty());
    assert!(store.computer_approval("appr_3").await.unwrap().is_none());
    assert_eq!(store.delete_computer("cmp_1").await.unwrap(), None);
}

async fn purge_deletes_what_ended_before_the_cutoff_and_nothing_live(db: Backing) {
    let store = db.open().await;
    for id in ["exec_old", "exec_running"] {
        store
            .insert_execution(id, "sbx_1", Language::PythonLite, "1")
            .await
            .unwrap();
    }
    store
        .append_event("exec_old", 1, &asks("appr_old"))
        .await
        .unwrap();
    store
        .append_event("exec_old", 2, &completed(""))
        .await
        .unwrap();
    store.insert_sandbox(&sandbox("sbx_live")).await.unwrap();
    let mut ended = sandbox("sbx_ended");
    ended.state = "expired".into();
    store.insert_sandbox(&ended).await.unwrap();
    store.insert_computer(&computer("cmp_old")).await.unwrap();
    store.insert_computer(&computer("cmp_live")).await.unwrap();
    store
        .append_computer_step("cmp_old", &step(1, Some("appr_9"), None))
        .await
        .unwrap();
    store
        .end_computer("cmp_old", "closed", "deleted")
        .await
        .unwrap();
    // Nothing ended before the epoch.
    assert_eq!(store.purge(0).await.unwrap(), Default::default());
    let cutoff = cordon_core::clock::now_ms() + 1;
    let purged = store.purge(cutoff).await.unwrap();
    assert_eq!(
        (purged.executions, purged.sandboxes, purged.computers),
        (1, 1, 1)
    );
    assert_eq!(purged.trajectories, ["/tmp/trajectories/cmp_old"]);
    assert!(store.execution("exec_old").await.unwrap().is_none());
    assert!(
        store
            .events_after("exec_old", 0, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.approval("appr_old").await.unwrap().is_none());
    assert!(store.execution("exec_running").await.unwrap().is_some());
    assert!(store.sandbox("sbx_live").await.unwrap().is_some());
    assert!(store.sandbox("sbx_ended").await.unwrap().is_none());
    assert!(store.computer("cmp_old").await.unwrap().is_none());
    assert!(store.computer_approval("appr_9").await.unwrap().is_none());
    assert!(store.computer("cmp_live").await.unwrap().is_some());
}

fn entry<'a>(kind: &'a str, data: &'a Value) -> NewConversationEntry<'a> {
    NewConversationEntry {
        kind,
        call_id: (kind == "tool_call").then_some("toolu_1"),
        round: Some(1),
        duration_ms: Some(7),
        data,
    }
}

async fn conversation_entries_append_in_order_even_when_concurrent(db: Backing) {
    let store = std::sync::Arc::new(db.open().await);
    store
        .begin_conversation("conv_1", "anthropic=http://x")
        .await
        .unwrap();
    store
        .begin_conversation("conv_1", "ignored=http://y")
        .await
        .unwrap();
    let data = json!({"name": "f"});
    assert_eq!(
        store
            .append_conversation_entry("conv_1", &entry("request", &data))
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        store
            .append_conversation_entry("conv_1", &entry("tool_call", &data))
            .await
            .unwrap(),
        2
    );
    let tasks: Vec<_> = (0..16)
        .map(|n| {
            let store = store.clone();
            tokio::spawn(async move {
                let data = json!({"n": n});
                store
                    .append_conversation_entry("conv_1", &entry("tool_result", &data))
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut seqs = BTreeSet::new();
    for task in tasks {
        seqs.insert(task.await.unwrap());
    }
    assert_eq!(
        seqs,
        (3..=18).collect::<BTreeSet<u64>>(),
        "one seq each, no gaps"
    );
    let row = store.conversation("conv_1").await.unwrap().unwrap();
    assert_eq!(row.upstream, "anthropic=http://x");
    assert_eq!(
        row.entries.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=18).collect::<Vec<u64>>()
    );
    assert_eq!(row.entries[1].call_id.as_deref(), Some("toolu_1"));
    assert_eq!(
        (row.entries[1].round, row.entries[1].duration_ms),
        (Some(1), Some(7))
    );
    assert_eq!(row.entries[0].data, data);
    assert!(store.conversation_exists("conv_1").await.unwrap());
    assert!(!store.conversation_exists("conv_2").await.unwrap());
    assert!(store.conversation("conv_2").await.unwrap().is_none());
    // An entry for a conversation never begun begins it.
    assert_eq!(
        store
            .append_conversation_entry("conv_3", &entry("request", &data))
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        store
            .conversation("conv_3")
            .await
            .unwrap()
            .unwrap()
            .upstream,
        ""
    );

    store
        .keep_response("resp_1", None, &json!([1]))
        .await
        .unwrap();
    store
        .keep_response("resp_2", Some("resp_1"), &json!([2]))
        .await
        .unwrap();
    store
        .keep_response("resp_2", Some("resp_1"), &json!([2, 3]))
        .await
        .unwrap();
    assert_eq!(
        store.response("resp_2").await.unwrap(),
        Some((Some("resp_1".to_owned()), json!([2, 3])))
    );
    assert_eq!(store.response("resp_9").await.unwrap(), None);
    assert_eq!(
        store
            .purge_conversations(cordon_core::clock::now_ms() + 1)
            .await
            .unwrap(),
        2
    );
    assert!(store.conversation("conv_1").await.unwrap().is_none());
    assert_eq!(store.response("resp_1").await.unwrap(), None);
}

async fn conversations_page_newest_first_without_gaps_or_repeats(db: Backing) {
    let store = db.open().await;
    let data = json!({});
    let mut all = BTreeSet::new();
    for n in 0..25 {
        let id = format!("conv_{n:02}");
        store.begin_conversation(&id, "x=y").await.unwrap();
        store
            .append_conversation_entry(&id, &entry("request", &data))
            .await
            .unwrap();
        all.insert(id);
    }
    assert!(store.list_conversations(0, None).await.unwrap().is_empty());
    let mut seen = Vec::new();
    let mut before = None;
    loop {
        let page = store.list_conversations(4, before).await.unwrap();
        let Some(last) = page.last() else { break };
        before = Some(last.updated_ms);
        // Newest first: by update time, then by id, both descending.
        for pair in page.windows(2) {
            assert!(
                (pair[0].updated_ms, &pair[0].id) > (pair[1].updated_ms, &pair[1].id),
                "{page:?}"
            );
        }
        assert!(page.iter().all(|c| c.entries == 1 && c.upstream == "x=y"));
        seen.extend(page.into_iter().map(|c| c.id));
    }
    assert_eq!(
        seen.len(),
        all.len(),
        "no conversation listed twice: {seen:?}"
    );
    assert_eq!(seen.into_iter().collect::<BTreeSet<_>>(), all);
}

async fn sessions_are_saved_replaced_loaded_and_purged(db: Backing) {
    let store = db.open().await;
    assert_eq!(store.load_session("sess_1").await.unwrap(), None);
    store.save_session("sess_1", "{\"a\":1}").await.unwrap();
    store.save_session("sess_1", "{\"a\":2}").await.unwrap();
    let (state, updated) = store.load_session("sess_1").await.unwrap().unwrap();
    assert_eq!(state, "{\"a\":2}");
    assert!(updated > 0);
    assert_eq!(store.purge_sessions(updated).await.unwrap(), 0);
    assert_eq!(store.purge_sessions(updated + 1).await.unwrap(), 1);
    assert!(!store.delete_session("sess_1").await.unwrap());
    store.save_session("sess_2", "{}").await.unwrap();
    assert!(store.delete_session("sess_2").await.unwrap());
}

async fn meta_values_are_set_replaced_and_removed(db: Backing) {
    let store = db.open().await;
    assert_eq!(store.meta("chromium_pid").await.unwrap(), None);
    store.set_meta("chromium_pid", Some("12")).await.unwrap();
    store.set_meta("chromium_pid", Some("34")).await.unwrap();
    assert_eq!(
        store.meta("chromium_pid").await.unwrap().as_deref(),
        Some("34")
    );
    store.set_meta("chromium_pid", None).await.unwrap();
    assert_eq!(store.meta("chromium_pid").await.unwrap(), None);
}

async fn migrations_apply_once_and_a_newer_database_is_refused(db: Backing) {
    {
        let store = db.open().await;
        store.insert_computer(&computer("cmp_1")).await.unwrap();
    }
    // Opening again migrates nothing twice and keeps the rows.
    let store = db.open().await;
    assert!(store.computer("cmp_1").await.unwrap().is_some());
    drop(store);
    db.record_future_migration().await;
    match db.try_open().await {
        Err(StoreError::SchemaVersion { found, .. }) => assert_eq!(found, 9999),
        other => panic!("a newer schema must be refused, got {other:?}"),
    }
}

async fn the_synchronous_bridge_reaches_the_store(db: Backing) {
    let store = std::sync::Arc::new(db.open().await);
    // The gateway's recorder calls the store from synchronous code, on a runtime thread.
    let inner = store.clone();
    let seq = tokio::task::spawn_blocking(move || {
        inner
            .wait(inner.begin_conversation("conv_sync", "x=y"))
            .unwrap();
        inner
            .wait(inner.append_conversation_entry("conv_sync", &entry("request", &json!(1))))
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(seq, 1);
    assert!(store.wait(store.conversation_exists("conv_sync")).unwrap());
}

macro_rules! store_suite {
    ($($test:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $test() {
                    super::$test(crate::backing::Backing::sqlite()).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $test() {
                    super::$test(crate::backing::Backing::postgres()).await;
                }
            )*
        }
    };
}

store_suite!(
    an_execution_logs_its_events_in_order_and_ends_with_its_result,
    recovery_interrupts_what_was_running_with_a_final_event_from_its_log,
    sandboxes_are_recorded_touched_and_ended_once,
    computer_steps_approvals_and_deletion,
    purge_deletes_what_ended_before_the_cutoff_and_nothing_live,
    conversation_entries_append_in_order_even_when_concurrent,
    conversations_page_newest_first_without_gaps_or_repeats,
    sessions_are_saved_replaced_loaded_and_purged,
    meta_values_are_set_replaced_and_removed,
    migrations_apply_once_and_a_newer_database_is_refused,
    the_synchronous_bridge_reaches_the_store,
);
