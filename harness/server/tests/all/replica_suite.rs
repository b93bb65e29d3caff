//! Replicas in the store, on SQLite and PostgreSQL (run by `store_suite!`): heartbeats,
//! the live owner of a thing, the recovery that ends only what dead replicas owned (once,
//! even when two replicas recover at the same time), and one winner of two replicas
//! bringing back one paused sandbox.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use cordon_core::clock::now_ms;
use cordon_protocol::execution::{ExecutionEvent, Language, Stream};
use cordon_server::store::{ENV_INTERRUPTED, ENV_LIVE, LiveOwner, Owned, Recovery, Store};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::backing::Backing;

/// The recovery a server running alone makes at start: everything not its own.
pub fn restart() -> Recovery<'static> {
    Recovery {
        me: "rpl_restarted",
        dead_before_ms: now_ms(),
        orphans: true,
    }
}

/// A replica's store: its rows name `id`, its heartbeat is `seen_at_ms`.
async fn replica(db: &Backing, id: &str, seen_at_ms: u64) -> Store {
    let store = db.open().await;
    store.set_replica(id);
    store
        .beat_replica(id, &format!("http://{id}.internal:7420"), seen_at_ms)
        .await
        .unwrap();
    store
}

/// Live things of one replica: a stateful sandbox, a running execution waiting on an
/// approval, a computer session waiting on one, a benchmark environment.
async fn live_things(store: &Store, tag: &str) {
    store
        .insert_env(&format!("env_{tag}"), "builtin")
        .await
        .unwrap();
    let mut sandbox = crate::store_suite::sandbox(&format!("sbx_{tag}"));
    sandbox.state = "live".into();
    store.insert_sandbox(&sandbox).await.unwrap();
    let execution = format!("exec_{tag}");
    store
        .insert_execution(&execution, &format!("sbx_{tag}"), Language::Javascript, "1")
        .await
        .unwrap();
    let delta = ExecutionEvent::OutputDelta {
        stream: Stream::Stdout,
        text: format!("{tag}\n"),
    };
    store.append_event(&execution, 1, &delta).await.unwrap();
    let asks = ExecutionEvent::ApprovalRequired {
        approval_id: format!("appr_{tag}"),
        call_id: format!("call_{tag}"),
        tool: "pay".into(),
        input: json!({}),
        reason: "money".into(),
    };
    store.append_event(&execution, 2, &asks).await.unwrap();
    let computer = format!("cmp_{tag}");
    store
        .insert_computer(&crate::store_suite::computer(&computer))
        .await
        .unwrap();
    store
        .append_computer_step(
            &computer,
            &crate::store_suite::step(1, Some(&format!("apprc_{tag}")), None),
        )
        .await
        .unwrap();
}

/// What recovery changes, read back: (execution status, approval status, sandbox state,
/// computer state, computer approval status).
async fn states(store: &Store, tag: &str) -> (String, String, String, String, String) {
    (
        store
            .execution(&format!("exec_{tag}"))
            .await
            .unwrap()
            .unwrap()
            .status,
        store
            .approval(&format!("appr_{tag}"))
            .await
            .unwrap()
            .unwrap()
            .status,
        store
            .sandbox(&format!("sbx_{tag}"))
            .await
            .unwrap()
            .unwrap()
            .state,
        store
            .computer(&format!("cmp_{tag}"))
            .await
            .unwrap()
            .unwrap()
            .state,
        store
            .computer_approval(&format!("apprc_{tag}"))
            .await
            .unwrap()
            .unwrap()
            .1,
    )
}

fn strings(values: [&str; 5]) -> (String, String, String, String, String) {
    let [a, b, c, d, e] = values.map(str::to_owned);
    (a, b, c, d, e)
}

async fn heartbeats_say_where_a_live_thing_is_served(db: Backing) {
    let now = now_ms();
    let a = replica(&db, "rpl_a", now).await;
    let b = replica(&db, "rpl_b", now).await;
    // A second beat finds the row the first made.
    assert!(
        a.beat_replica("rpl_a", "http://rpl_a.internal:7420", now)
            .await
            .unwrap()
    );
    live_things(&a, "a").await;
    let owner = Some(LiveOwner {
        replica: "rpl_a".into(),
        address: "http://rpl_a.internal:7420".into(),
    });
    let lease = 10_000;
    for (owned, id) in [
        (Owned::Sandbox, "sbx_a"),
        (Owned::Execution, "exec_a"),
        (Owned::Computer, "cmp_a"),
        (Owned::Approval, "appr_a"),
        (Owned::Approval, "apprc_a"),
        (Owned::Env, "env_a"),
    ] {
        assert_eq!(
            b.live_owner(owned, id, now - lease).await.unwrap(),
            owner,
            "{id}"
        );
    }
    assert_eq!(
        b.live_owner(Owned::Sandbox, "sbx_none", now - lease)
            .await
            .unwrap(),
        None
    );
    // A heartbeat older than the lease is no owner to forward to.
    assert_eq!(
        b.live_owner(Owned::Sandbox, "sbx_a", now + 1)
            .await
            .unwrap(),
        None
    );
    // Once it ended, nobody owns it.
    a.end_sandbox("sbx_a", "deleted", "asked").await.unwrap();
    assert_eq!(
        b.live_owner(Owned::Sandbox, "sbx_a", now - lease)
            .await
            .unwrap(),
        None
    );
}

async fn recovery_ends_only_what_dead_replicas_owned(db: Backing) {
    let now = now_ms();
    let alive = replica(&db, "rpl_alive", now).await;
    let dead = replica(&db, "rpl_dead", now - 60_000).await;
    live_things(&alive, "alive").await;
    live_things(&dead, "dead").await;
    // Rows from a server that ran alone (no owner) stay while nobody asks for orphans.
    let alone = db.open().await;
    live_things(&alone, "alone").await;
    let recovery = Recovery {
        me: "rpl_alive",
        dead_before_ms: now - 10_000,
        orphans: false,
    };
    assert_eq!(
        alive.recover("replica stopped", &recovery).await.unwrap(),
        2
    );
    let untouched = strings(["running", "pending", "live", "live", "pending"]);
    let ended = strings([
        "interrupted",
        "expired",
        "interrupted",
        "interrupted",
        "expired",
    ]);
    assert_eq!(states(&alive, "alive").await, untouched);
    assert_eq!(states(&alive, "dead").await, ended);
    // The unowned ones went with the dead replica (they have no heartbeat either).
    assert_eq!(states(&alive, "alone").await, ended);
    for (tag, state) in [
        ("alive", ENV_LIVE),
        ("dead", ENV_INTERRUPTED),
        ("alone", ENV_INTERRUPTED),
    ] {
        let env = alive.env(&format!("env_{tag}")).await.unwrap().unwrap();
        assert_eq!(env.state, state, "{tag}");
    }
    let result = alive
        .execution("exec_dead")
        .await
        .unwrap()
        .unwrap()
        .result
        .unwrap();
    assert_eq!(result.stdout, "dead\n");
    assert_eq!(result.error.unwrap().message, "replica stopped");
    let events = alive.events_after("exec_dead", 0, 10).await.unwrap();
    assert_eq!(
        events
            .iter()
            .map(|e| e.event_type.as_str())
            .collect::<Vec<_>>(),
        ["output.delta", "approval.required", "execution.completed"]
    );
    // Again: nothing left to end, and the live replica's rows are still untouched, even
    // when asking for orphans.
    let again = Recovery {
        orphans: true,
        ..recovery
    };
    assert_eq!(alive.recover("again", &again).await.unwrap(), 0);
    assert_eq!(states(&alive, "alive").await, untouched);
    assert_eq!(
        alive.events_after("exec_dead", 0, 10).await.unwrap().len(),
        3
    );
    // The dead replica's row is gone: its next beat says so.
    assert!(
        !dead
            .beat_replica("rpl_dead", "http://x", now)
            .await
            .unwrap()
    );
}

async fn two_replicas_recovering_at_once_end_a_dead_one_once(db: Backing) {
    let now = now_ms();
    let first = replica(&db, "rpl_first", now).await;
    let second = replica(&db, "rpl_second", now).await;
    let dead = replica(&db, "rpl_gone", now - 60_000).await;
    live_things(&dead, "gone").await;
    let recovery = |me| Recovery {
        me,
        dead_before_ms: now - 10_000,
        orphans: false,
    };
    let (by_first, by_second) = (recovery("rpl_first"), recovery("rpl_second"));
    let (one, two) = tokio::join!(
        first.recover("stopped", &by_first),
        second.recover("stopped", &by_second),
    );
    assert_eq!(one.unwrap() + two.unwrap(), 1);
    let events = first.events_after("exec_gone", 0, 10).await.unwrap();
    assert_eq!(events.len(), 3, "one final event");
    assert_eq!(
        states(&first, "gone").await,
        strings([
            "interrupted",
            "expired",
            "interrupted",
            "interrupted",
            "expired"
        ])
    );
}

async fn of_two_replicas_bringing_back_a_paused_sandbox_one_wins(db: Backing) {
    let now = now_ms();
    let a = replica(&db, "rpl_one", now).await;
    let b = replica(&db, "rpl_two", now).await;
    let mut sandbox = crate::store_suite::sandbox("sbx_p");
    sandbox.state = "live".into();
    a.insert_sandbox(&sandbox).await.unwrap();
    assert!(
        a.pause_sandbox("sbx_p", 10, "paused/sbx_p", now + 60_000)
            .await
            .unwrap()
    );
    // Paused: nobody serves it, any replica may bring it back.
    assert_eq!(
        b.live_owner(Owned::Sandbox, "sbx_p", now - 10_000)
            .await
            .unwrap(),
        None
    );
    let (won_a, won_b) = tokio::join!(
        a.resume_sandbox("sbx_p", now + 60_000),
        b.resume_sandbox("sbx_p", now + 60_000),
    );
    let (won_a, won_b) = (won_a.unwrap(), won_b.unwrap());
    assert!(won_a != won_b, "exactly one wins: {won_a} {won_b}");
    let winner = if won_a { "rpl_one" } else { "rpl_two" };
    let owner = a
        .live_owner(Owned::Sandbox, "sbx_p", now - 10_000)
        .await
        .unwrap();
    assert_eq!(owner.map(|owner| owner.replica).as_deref(), Some(winner));
}

async fn a_stored_event_is_announced_to_other_processes(db: Backing) {
    let writer = db.open().await;
    let reader = db.open().await;
    writer
        .insert_execution("exec_n", "sbx_n", Language::Javascript, "1")
        .await
        .unwrap();
    let Some(mut announced) = reader.announcements("exec_n").await else {
        // SQLite: one process serves the file; its streams poll.
        assert!(matches!(db, Backing::Sqlite(_)));
        return;
    };
    // Listening now; whatever woke the receiver before this point is not the event.
    announced.borrow_and_update();
    let delta = ExecutionEvent::OutputDelta {
        stream: Stream::Stdout,
        text: "n\n".into(),
    };
    writer.append_event("exec_n", 1, &delta).await.unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(30), announced.changed())
        .await
        .expect("the event is announced")
        .unwrap();
}

store_suite!(
    a_stored_event_is_announced_to_other_processes,
    heartbeats_say_where_a_live_thing_is_served,
    recovery_ends_only_what_dead_replicas_owned,
    two_replicas_recovering_at_once_end_a_dead_one_once,
    of_two_replicas_bringing_back_a_paused_sandbox_one_wins,
);
