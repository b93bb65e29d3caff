//! Trajectories record every step with the image the model saw; replay re-runs them on a
//! fresh session and says where they diverge.

#![allow(clippy::unwrap_used, reason = "tests")]

use crate::common::*;
use cordon_computer::display::{DisplaySpec, Size};
use cordon_computer::gate::Rules;
use cordon_computer::trajectory::{TrajectoryWriter, read_session, replay};
use cordon_protocol::computer::Vendor;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_then_replay_matches_and_a_changed_page_diverges() {
    let server = PageServer::start(None).await;
    let dir = tempfile::tempdir().unwrap();
    let traj = dir.path().join("t");
    with_browser(|browser| async move {
        let display = DisplaySpec::Fixed {
            size: Size::new(1024, 640),
        };
        let opts = || {
            session_opts(
                Size::new(1280, 800),
                1.0,
                display,
                Some(server.url("/form")),
            )
        };
        let mut c = computer(&browser, opts(), Rules::default()).await;
        c.record(
            TrajectoryWriter::create(&traj, &json!({"start_url": server.url("/form")})).unwrap(),
        );
        ok_step(
            &mut c,
            Vendor::Anthropic,
            json!({"action": "left_click", "coordinate": [200, 96]}),
        )
        .await;
        ok_step(
            &mut c,
            Vendor::Anthropic,
            json!({"action": "type", "text": "hi"}),
        )
        .await;
        let r = step(
            &mut c,
            Vendor::Anthropic,
            json!({"action": "left_click", "coordinate": [160, 288]}),
        )
        .await;
        c.approve(&r.pending.unwrap().id).await.unwrap();
        c.into_backend().close().await.unwrap();

        let lines: Vec<serde_json::Value> = std::fs::read_to_string(traj.join("steps.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(
            lines[0]["sent"],
            json!({"action": "left_click", "coordinate": [200, 96]})
        );
        assert_eq!(lines[0]["screen_ops"][0]["op"], "down");
        assert_eq!(
            lines[0]["screen_ops"][0]["at"],
            json!({"x": 250.625, "y": 120.625})
        );
        assert_eq!(lines[2]["status"], "approval_required");
        assert_eq!(lines[3]["resolves"], lines[2]["pending"]["id"]);
        assert!(lines[0]["timings_ms"]["total"].as_f64().unwrap() > 0.0);
        let shot = lines[1]["screenshot"]["path"].as_str().unwrap();
        assert!(traj.join(shot).exists());
        assert_eq!(
            read_session(&traj).unwrap()["start_url"],
            server.url("/form")
        );

        // Same start: no divergence.
        let mut c = computer(&browser, opts(), Rules::default()).await;
        let rep = replay(&mut c, &traj).await.unwrap();
        assert_eq!(rep.first_divergence, None, "{rep:?}");
        assert_eq!(eval(&c, "log").await, json!(["delete"]));
        c.into_backend().close().await.unwrap();

        // Another start page: diverges at once.
        let other = session_opts(
            Size::new(1280, 800),
            1.0,
            display,
            Some(server.url("/targets")),
        );
        let mut c = computer(&browser, other, Rules::default()).await;
        let rep = replay(&mut c, &traj).await.unwrap();
        assert_eq!(rep.first_divergence, Some(1), "{rep:?}");
        c.into_backend().close().await.unwrap();
    })
    .await;
}
