//! The run summary: a resume keeps earlier episodes in every count but the rate, which is
//! over the episodes this run ran in this run's wall time.

use cordon_agent_bench::run::{EpisodeResult, summarize};
use serde_json::json;

fn episode(id: &str, success: bool) -> EpisodeResult {
    serde_json::from_value(json!({
        "id": id, "task": "t", "seed": 0, "kind": "web", "prompt": "p",
        "reward": if success { 1.0 } else { 0.0 }, "success": success, "steps": 2,
        "duration_ms": 1000.0, "reset_ms": 10.0,
    }))
    .unwrap()
}

#[test]
fn a_resume_counts_kept_episodes_but_rates_only_the_ones_it_ran() {
    // Three kept from an earlier run, two run now in 30 s: 4 a minute, not 10.
    let results: Vec<EpisodeResult> = ["a", "b", "c", "d", "e"]
        .iter()
        .map(|id| episode(id, *id != "e"))
        .collect();
    let summary = summarize(&results, 2, 30.0);
    assert_eq!(summary.episodes, 5);
    assert_eq!(summary.succeeded, 4);
    assert_eq!(summary.episodes_run, 2);
    assert_eq!(summary.episodes_per_minute, Some(4.0));
    // A fresh run: every episode is this run's.
    assert_eq!(summarize(&results, 5, 30.0).episodes_per_minute, Some(10.0));
}

#[test]
fn a_resume_with_nothing_left_has_no_rate() {
    // Everything kept, a moment of set-up: not 5 episodes over 10 ms (30,000 a minute).
    let results: Vec<EpisodeResult> = ["a", "b", "c", "d", "e"]
        .iter()
        .map(|id| episode(id, true))
        .collect();
    let summary = summarize(&results, 0, 0.01);
    assert_eq!(summary.episodes, 5);
    assert_eq!(summary.episodes_run, 0);
    assert_eq!(summary.episodes_per_minute, None);
    let json = serde_json::to_value(&summary).unwrap();
    assert_eq!(json["episodes_per_minute"], serde_json::Value::Null);
    // Nor a division by zero when the clock did not move.
    assert_eq!(summarize(&results, 3, 0.0).episodes_per_minute, None);
}
