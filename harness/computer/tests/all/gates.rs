//! Approval gates on a real page: the element under the pointer decides; `ask` stops the
//! step before anything happens; approve resumes, deny refuses; vendor checks round-trip.

#![allow(clippy::unwrap_used, reason = "tests")]

use crate::common::*;
use cordon_computer::Status;
use cordon_computer::gate::{Decision, ElementClass, Rule, Rules};
use cordon_protocol::computer::{Vendor, decode};
use serde_json::json;

fn m(x: f64, y: f64) -> [i64; 2] {
    [(x * 0.8).floor() as i64, (y * 0.8).floor() as i64]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_stops_before_acting_and_approve_resumes() {
    let other = PageServer::start(None).await;
    let server = PageServer::start(Some(other.addr)).await;
    with_browser(|browser| async move {
        let opts = page_opts(1.0, server.url("/form"));
        let mut c = computer(&browser, opts, Rules::default()).await;
        // Delete button → ask; nothing happened yet.
        let r = step(
            &mut c,
            Vendor::Anthropic,
            json!({"action": "left_click", "coordinate": m(200.0, 360.0)}),
        )
        .await;
        assert_eq!(r.status, Status::ApprovalRequired);
        let p = r.pending.unwrap();
        assert_eq!(p.rule, "high-impact-button");
        assert_eq!(
            p.element.as_deref(),
            Some("button name=del \"Delete account\"")
        );
        assert_eq!(eval(&c, "log").await, json!([]));
        // Another step while waiting is refused, model-visibly.
        let r2 = step(&mut c, Vendor::Anthropic, json!({"action": "screenshot"})).await;
        assert_eq!(r2.status, Status::Error);
        let r = c.approve(&p.id).await.unwrap();
        assert_eq!(r.status, Status::Ok);
        assert_eq!(r.resolves.as_deref(), Some(p.id.as_str()));
        assert_eq!(eval(&c, "log").await, json!(["delete"]));
        // A harmless button is allowed.
        ok_step(
            &mut c,
            Vendor::Anthropic,
            json!({"action": "left_click", "coordinate": m(420.0, 360.0)}),
        )
        .await;
        // Password field → ask → deny: refused, field not focused.
        let r = step(
            &mut c,
            Vendor::Anthropic,
            json!({"action": "left_click", "coordinate": m(250.0, 300.0)}),
        )
        .await;
        let p = r.pending.unwrap();
        assert_eq!(p.rule, "password-field");
        let r = c.deny(&p.id).await.unwrap();
        assert_eq!(r.status, Status::Denied);
        assert!(r.error.unwrap().contains("declined"));
        assert_ne!(eval(&c, "document.activeElement.id").await, "pw");
        // A link to another origin → ask (new-origin).
        let r = step(
            &mut c,
            Vendor::Anthropic,
            json!({"action": "left_click", "coordinate": m(200.0, 420.0)}),
        )
        .await;
        assert_eq!(r.pending.unwrap().rule, "new-origin");
        assert_eq!(other.hits(), Vec::<String>::new());
        c.into_backend().close().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_wins_and_vendor_safety_checks_round_trip() {
    let server = PageServer::start(None).await;
    with_browser(|browser| async move {
        let mut rules = Rules::default();
        rules.rules.push(Rule::new("no-risky", Decision::Deny).element(&[ElementClass::Risky]));
        rules.rules.push(Rule::new("clicks-fine", Decision::Allow).actions(&["click"]));
        let opts = page_opts(1.0, server.url("/form"));
        let mut c = computer(&browser, opts, rules).await;
        let r = step(&mut c, Vendor::Anthropic, json!({"action": "left_click", "coordinate": m(200.0, 360.0)})).await;
        assert_eq!(r.status, Status::Denied);
        assert_eq!(r.error.as_deref(), Some("denied by rule `no-risky`: risky element button name=del \"delete account\""));
        assert_eq!(eval(&c, "log").await, json!([]));

        // OpenAI pending_safety_checks ask first; approval acknowledges them.
        let [x, y] = m(420.0, 360.0);
        let item = json!({"type": "computer_call", "call_id": "c9",
            "action": {"type": "click", "button": "left", "x": x, "y": y},
            "pending_safety_checks": [{"id": "sc_1", "code": "malicious_instructions", "message": "Check the page."}]});
        let call = decode(Vendor::OpenAi, &item).unwrap();
        let r = c.step(call.clone(), Some(&item)).await.unwrap();
        assert_eq!(r.status, Status::ApprovalRequired);
        let p = r.pending.unwrap();
        assert_eq!((p.rule.as_str(), p.reason.as_str()), ("vendor-safety-check", "Check the page."));
        let r = c.approve(&p.id).await.unwrap();
        assert_eq!(r.status, Status::Ok);
        assert_eq!(eval(&c, "log").await, json!(["open"]));
        let out = r.to_output().to_openai(&call);
        assert_eq!(out["call_id"], "c9");
        assert_eq!(out["acknowledged_safety_checks"][0]["id"], "sc_1");
        assert!(out["output"]["image_url"].as_str().unwrap().starts_with("data:image/png;base64,"));
        c.into_backend().close().await.unwrap();
    })
    .await;
}
