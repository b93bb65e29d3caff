//! The store suite's tables of things kept at rest between requests — paused sandboxes,
//! the gateway's records, benchmark environments' episodes — on SQLite and PostgreSQL
//! (run by `store_suite!`).

#![allow(clippy::unwrap_used, reason = "tests")]

use cordon_server::store::{
    ENV_CLOSED, ENV_INTERRUPTED, ENV_LIVE, ENV_RESTART_REASON, EnvEpisodeRow,
};
use pretty_assertions::assert_eq;

use crate::backing::Backing;
use crate::store_suite::sandbox;

async fn paused_sandboxes_change_state_once_and_expire_by_their_ttl(db: Backing) {
    let store = db.open().await;
    for id in ["sbx_p1", "sbx_p2", "sbx_p3"] {
        store.insert_sandbox(&sandbox(id)).await.unwrap();
    }
    // live → paused, once: the second caller loses.
    assert!(
        store
            .pause_sandbox("sbx_p1", 1234, "paused/sbx_p1", 70_000)
            .await
            .unwrap()
    );
    assert!(
        !store
            .pause_sandbox("sbx_p1", 99, "paused/other", 1)
            .await
            .unwrap()
    );
    let row = store.sandbox("sbx_p1").await.unwrap().unwrap();
    assert_eq!(
        (
            row.state.as_str(),
            row.paused_bytes,
            row.paused_key.as_deref(),
            row.expires_ms
        ),
        ("paused", Some(1234), Some("paused/sbx_p1"), 70_000)
    );
    // Ending a live sandbox leaves a paused one alone.
    store
        .end_sandbox("sbx_p1", "expired", "idle")
        .await
        .unwrap();
    assert_eq!(
        store.sandbox("sbx_p1").await.unwrap().unwrap().state,
        "paused"
    );
    // paused → live, once, and the stored state is forgotten.
    assert!(store.resume_sandbox("sbx_p1", 80_000).await.unwrap());
    assert!(!store.resume_sandbox("sbx_p1", 80_000).await.unwrap());
    let row = store.sandbox("sbx_p1").await.unwrap().unwrap();
    assert_eq!(
        (
            row.state.as_str(),
            row.paused_bytes,
            row.paused_key,
            row.expires_ms
        ),
        ("live", None, None, 80_000)
    );
    // Only paused sandboxes past their expiry are listed, soonest first.
    assert!(
        store
            .pause_sandbox("sbx_p2", 10, "paused/sbx_p2", 5_000)
            .await
            .unwrap()
    );
    assert!(
        store
            .pause_sandbox("sbx_p3", 10, "paused/sbx_p3", 4_000)
            .await
            .unwrap()
    );
    let due = store.paused_sandboxes_expired(5_000, 10).await.unwrap();
    let ids: Vec<&str> = due.iter().map(|row| row.id.as_str()).collect();
    assert_eq!(ids, ["sbx_p3", "sbx_p2"]);
    assert_eq!(
        store
            .paused_sandboxes_expired(4_999, 1)
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(
        store
            .paused_sandboxes_expired(3_999, 10)
            .await
            .unwrap()
            .is_empty()
    );
    // A paused sandbox ends once; the row keeps the key of the object to delete.
    assert!(
        store
            .end_paused_sandbox("sbx_p3", "expired", "unused")
            .await
            .unwrap()
    );
    assert!(
        !store
            .end_paused_sandbox("sbx_p3", "interrupted", "later")
            .await
            .unwrap()
    );
    assert!(
        !store
            .end_paused_sandbox("sbx_p1", "expired", "it is live")
            .await
            .unwrap()
    );
    let row = store.sandbox("sbx_p3").await.unwrap().unwrap();
    assert_eq!(
        (
            row.state.as_str(),
            row.reason.as_deref(),
            row.paused_key.as_deref()
        ),
        ("expired", Some("unused"), Some("paused/sbx_p3"))
    );
    // Purging never takes a paused sandbox (its object would be left behind).
    store.purge(u64::MAX / 2).await.unwrap();
    assert_eq!(
        store.sandbox("sbx_p2").await.unwrap().unwrap().state,
        "paused"
    );
    assert!(store.sandbox("sbx_p3").await.unwrap().is_none());
    assert_eq!(
        store.sandbox("sbx_p1").await.unwrap().unwrap().state,
        "live"
    );
}

async fn gateway_records_are_replaced_taken_once_kept_first_and_purged(db: Backing) {
    let store = db.open().await;
    assert_eq!(
        store.gateway_record("ask", "conv_1/toolu_1").await.unwrap(),
        None
    );
    store
        .put_gateway_record("ask", "conv_1/toolu_1", "1")
        .await
        .unwrap();
    store
        .put_gateway_record("ask", "conv_1/toolu_1", "2")
        .await
        .unwrap();
    let read = store.gateway_record("ask", "conv_1/toolu_1").await.unwrap();
    assert_eq!(read.as_deref(), Some("2"));
    // Two takers of one record: one gets it.
    let (first, second) = tokio::join!(
        store.take_gateway_record("ask", "conv_1/toolu_1"),
        store.take_gateway_record("ask", "conv_1/toolu_1")
    );
    let taken: Vec<String> = [first.unwrap(), second.unwrap()]
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(taken, ["2"]);
    let kept = store.put_new_gateway_record("key", "continuation", "a");
    assert_eq!(kept.await.unwrap(), "a");
    let kept = store.put_new_gateway_record("key", "continuation", "b");
    assert_eq!(kept.await.unwrap(), "a");
    store
        .put_gateway_record("container", "container_1", "{}")
        .await
        .unwrap();
    let purged = store.purge_gateway_records(u64::MAX / 2).await.unwrap();
    assert_eq!(purged, [("container".to_owned(), "container_1".to_owned())]);
    let key = store.gateway_record("key", "continuation").await.unwrap();
    assert_eq!(key.as_deref(), Some("a"), "the shared key is never purged");
}

fn env_episode(episode: u64, task: &str, steps: u64, reward: f64, done: bool) -> EnvEpisodeRow {
    EnvEpisodeRow {
        episode,
        task: task.into(),
        seed: 7,
        steps,
        reward,
        done,
    }
}

async fn env_episodes_are_rewritten_kept_across_a_restart_and_interrupted(db: Backing) {
    {
        let store = db.open().await;
        assert_eq!(store.env("env_1").await.unwrap(), None);
        store.insert_env("env_1", "builtin").await.unwrap();
        store.insert_env("env_2", "miniwob").await.unwrap();
        // Each step rewrites its episode's row; a reset starts the next one.
        store
            .record_env_episode("env_1", &env_episode(1, "form", 0, 0.0, false))
            .await
            .unwrap();
        store
            .record_env_episode("env_1", &env_episode(1, "form", 3, 1.0, true))
            .await
            .unwrap();
        store
            .record_env_episode("env_1", &env_episode(2, "form", 1, 0.0, false))
            .await
            .unwrap();
        assert!(
            store
                .end_env("env_2", ENV_CLOSED, "closed by its client")
                .await
                .unwrap()
        );
        assert!(!store.end_env("env_2", ENV_CLOSED, "twice").await.unwrap());
    }
    // A restart: what was live is interrupted, what was closed stays closed.
    let store = db.open().await;
    let restart = crate::replica_suite::restart();
    store
        .recover("the server restarted", &restart)
        .await
        .unwrap();
    let env = store.env("env_1").await.unwrap().unwrap();
    assert_eq!(
        (
            env.suite.as_str(),
            env.state.as_str(),
            env.reason.as_deref()
        ),
        ("builtin", ENV_INTERRUPTED, Some(ENV_RESTART_REASON))
    );
    assert_eq!(
        env.episodes,
        vec![
            env_episode(1, "form", 3, 1.0, true),
            env_episode(2, "form", 1, 0.0, false)
        ]
    );
    let closed = store.env("env_2").await.unwrap().unwrap();
    assert_eq!(
        (
            closed.state.as_str(),
            closed.reason.as_deref(),
            closed.episodes.len()
        ),
        (ENV_CLOSED, Some("closed by its client"), 0)
    );
    // A second recovery finds nothing more to end.
    store.recover("again", &restart).await.unwrap();
    assert_eq!(
        store.env("env_1").await.unwrap().unwrap().updated_ms,
        env.updated_ms
    );
    // Purging takes what is over and older than the cutoff, episodes with it.
    store.insert_env("env_3", "builtin").await.unwrap();
    let cutoff = env.updated_ms.max(closed.updated_ms) + 1;
    assert_eq!(store.purge_envs(cutoff).await.unwrap(), 2);
    assert_eq!(store.env("env_1").await.unwrap(), None);
    assert_eq!(
        store.env("env_3").await.unwrap().map(|e| e.state),
        Some(ENV_LIVE.to_owned())
    );
}

store_suite!(
    paused_sandboxes_change_state_once_and_expire_by_their_ttl,
    gateway_records_are_replaced_taken_once_kept_first_and_purged,
    env_episodes_are_rewritten_kept_across_a_restart_and_interrupted,
);
