//! The gym-style interface over a real Chromium: reset, step, evaluate, and the errors a
//! policy can make (they are steps with status `error`; the episode goes on).

use std::sync::Arc;

use cordon_agent_bench::env::{EnvAction, WebEnv};
use cordon_agent_bench::page_server::{PageRoot, PageServer};
use cordon_agent_bench::task::Suite;
use cordon_computer::browser::{Browser, BrowserOptions};
use serde_json::json;

fn action(value: serde_json::Value) -> EnvAction {
    EnvAction::from_value(value).unwrap()
}

async fn env(dpr: f64) -> (Browser, WebEnv) {
    let mut options = BrowserOptions::default();
    options.no_sandbox = true;
    let browser = Browser::launch(options).await.unwrap();
    let pages = Arc::new(PageServer::start(PageRoot::Builtin).await.unwrap());
    let env = WebEnv::new(browser.clone(), Some(pages)).with_dpr(Some(dpr));
    (browser, env)
}

fn task(id: &str) -> Arc<cordon_agent_bench::task::Task> {
    let suite = Suite::builtin();
    let entry = suite.entries.into_iter().find(|e| e.id == id).unwrap();
    Arc::new(entry.task.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_step_evaluate_with_the_reward_read_from_the_page() {
    let (browser, mut env) = env(2.0).await;
    let first = env.reset(task("drag"), 0).await.unwrap();
    let shot = first.screenshot.unwrap();
    assert_eq!((shot.size.width, shot.size.height), (1024, 640));
    assert!(
        first.url.contains("/drag/index.html?seed=0"),
        "{}",
        first.url
    );
    assert_eq!(env.evaluate().await.unwrap(), 0.0);
    // A drag that misses the zone: no reward, not done.
    let t = env
        .step(action(json!({"action": "left_click_drag", "start_coordinate": [200, 280], "coordinate": [100, 100]})))
        .await
        .unwrap();
    assert_eq!(
        (t.reward, t.done, t.info.status.as_str()),
        (0.0, false, "ok")
    );
    assert_eq!(
        t.info.marks.len(),
        2,
        "press and release: {:?}",
        t.info.marks
    );
    assert_eq!(t.info.marks[0].model, (200, 280));
    assert_eq!(
        t.info.marks[0].device,
        (
            t.info.marks[0].screen.0 * 2.0,
            t.info.marks[0].screen.1 * 2.0
        )
    );
    // The card is where the drag left it (its centre at css ~ (125, 125)): drag it on.
    let t = env
        .step(action(json!({"action": "left_click_drag", "start_coordinate": [100, 100], "coordinate": [640, 320]})))
        .await
        .unwrap();
    assert_eq!((t.reward, t.done), (1.0, true), "{:?}", t.info);
    let error = env
        .step(action(
            json!({"action": "left_click", "coordinate": [1, 1]}),
        ))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("call reset"), "{error}");
    env.close().await;
    browser.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_actions_are_model_visible_errors_and_the_episode_goes_on() {
    let (browser, mut env) = env(1.0).await;
    env.reset(task("scroll"), 0).await.unwrap();
    let t = env.step(action(json!({"action": "fly"}))).await.unwrap();
    assert_eq!(t.info.status, "error");
    assert!(
        t.info.error.as_deref().unwrap().contains("fly"),
        "{:?}",
        t.info.error
    );
    let t = env
        .step(action(
            json!({"action": "left_click", "coordinate": [5000, 10]}),
        ))
        .await
        .unwrap();
    assert_eq!(t.info.status, "error");
    assert!(
        t.info.error.as_deref().unwrap().contains("0..=1023"),
        "{:?}",
        t.info.error
    );
    let t = env
        .step(EnvAction {
            format: "klingon".into(),
            actions: vec![json!({})],
        })
        .await
        .unwrap();
    assert!(
        t.info.error.as_deref().unwrap().contains("unknown format"),
        "{:?}",
        t.info.error
    );
    assert!(!t.done);
    // The policy can still solve it.
    env.step(action(json!({"action": "scroll", "coordinate": [512, 320], "scroll_direction": "down", "scroll_amount": 30}))).await.unwrap();
    let t = env
        .step(action(
            json!({"action": "left_click", "coordinate": [512, 320]}),
        ))
        .await
        .unwrap();
    assert_eq!((t.reward, t.done), (1.0, true));
    let trace = env.trace().unwrap();
    assert_eq!(trace.steps.len(), 5);
    assert!(
        trace.steps[0].screenshot.is_none(),
        "a refused step takes no screenshot"
    );
    env.close().await;
    browser.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_step_cap_ends_the_episode_truncated() {
    let (browser, mut env) = env(1.0).await;
    env.reset(task("drag"), 0).await.unwrap();
    // drag allows 5 steps.
    let mut last = None;
    for _ in 0..5 {
        last = Some(
            env.step(action(
                json!({"action": "left_click", "coordinate": [10, 10]}),
            ))
            .await
            .unwrap(),
        );
    }
    let last = last.unwrap();
    assert!(last.done && last.info.truncated && last.reward == 0.0);
    env.close().await;
    browser.close().await.unwrap();
}
