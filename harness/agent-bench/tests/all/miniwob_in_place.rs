//! MiniWoB++ episodes started in place: a worker's next episode of the same task starts on
//! the page the last one left (no load, as MiniWoB++'s own Python does it), seed-exact
//! against a fresh load, with nothing of the last episode showing; any other episode
//! loads its page again.

use std::sync::Arc;

use cordon_agent_bench::env::{Observation, WebEnv};
use cordon_agent_bench::miniwob;
use cordon_agent_bench::page_server::{PageRoot, PageServer};
use cordon_agent_bench::session_pool::{SessionPool, SessionStart};
use cordon_agent_bench::task::{Task, TaskKind};
use cordon_agent_bench::{EnvAction, Transition};
use cordon_computer::browser::Browser;
use cordon_computer::display::CssPoint;
use serde_json::{Value, json};

use super::miniwob::{browser_options, package};

/// Marks the document (its time origin names it: a load makes a new one) and records what
/// reaches it between episodes.
const MARK: &str = "(() => {
  window.marker = performance.timeOrigin;
  window.released = false;
  document.addEventListener('mouseup', () => { window.released = true; });
  return window.marker;
})()";

/// What the page shows of an episode besides its task: scroll, focus, selection, the
/// reward display's figures (not its clock), and whether the episode runs.
const STATE: &str = "[scrollX, scrollY, document.activeElement === document.body,
  String(getSelection()),
  ['reward-last', 'reward-avg', 'episode-id'].map((id) => document.getElementById(id).outerHTML),
  WOB_DONE_GLOBAL, WOB_TASK_READY]";

/// The centre of the button the utterance names (`click-button`).
const NAMED_BUTTON: &str = "(() => {
  const want = core.getUtterance().match(/\"(.*)\"/)[1];
  const b = [...document.querySelectorAll('#area button')].find((b) => b.textContent.trim() === want);
  const r = b.getBoundingClientRect();
  return [r.left + r.width / 2, r.top + r.height / 2];
})()";

struct Setup {
    browser: Browser,
    pool: Arc<SessionPool>,
    /// Keeps sessions between episodes (the run's way).
    pooled: WebEnv,
    /// A new session and a fresh load for every episode.
    fresh: WebEnv,
    package: miniwob::Package,
}

async fn setup() -> Setup {
    let package = package().await;
    let browser = Browser::launch(browser_options()).await.unwrap();
    let pages = Arc::new(
        PageServer::start(PageRoot::Dir(package.html()))
            .await
            .unwrap(),
    );
    let pool = Arc::new(SessionPool::new());
    let pooled = WebEnv::new(browser.clone(), Some(pages.clone())).with_pool(pool.clone());
    let fresh = WebEnv::new(browser.clone(), Some(pages));
    Setup {
        browser,
        pool,
        pooled,
        fresh,
        package,
    }
}

impl Setup {
    fn task(&self, name: &str) -> Arc<Task> {
        Arc::new(miniwob::task(&self.package, name).unwrap())
    }

    async fn close(mut self) {
        self.pooled.close().await;
        self.fresh.close().await;
        self.pool.close_all().await;
        self.browser.close().await.unwrap();
    }
}

/// The instance on the page now: the utterance and the task's DOM.
async fn instance(env: &WebEnv) -> (String, Value) {
    let dom = env
        .inspect("document.getElementById('wrap').outerHTML")
        .await
        .unwrap();
    (env.instruction().unwrap(), dom)
}

async fn act(env: &mut WebEnv, action: Value) -> Transition {
    env.step(EnvAction::from_value(action).unwrap())
        .await
        .unwrap()
}

/// The model's coordinates of a CSS point the page answered with `[x, y]`.
fn model_point(env: &WebEnv, at: &Value) -> [i64; 2] {
    let p = env.scaler().unwrap().to_model(CssPoint {
        x: at[0].as_f64().unwrap(),
        y: at[1].as_f64().unwrap(),
    });
    [p.x, p.y]
}

/// Plays `click-button`: a click on the named button, the reward read from the page.
async fn solve_click_button(env: &mut WebEnv) -> Transition {
    let at = env.inspect(NAMED_BUTTON).await.unwrap();
    let at = model_point(env, &at);
    act(env, json!({"action": "left_click", "coordinate": at})).await
}

/// Resets `env` and checks that its first screenshot is the fresh load's.
async fn reset_like_fresh(s: &mut Setup, task: &Arc<Task>, seed: u64) -> Observation {
    let first = s.pooled.reset(task.clone(), seed).await.unwrap();
    let loaded = s.fresh.reset(task.clone(), seed).await.unwrap();
    assert_eq!(
        instance(&s.pooled).await,
        instance(&s.fresh).await,
        "{} seed {seed}: the same instance as a fresh load",
        task.id
    );
    assert_eq!(
        s.pooled.inspect(STATE).await.unwrap(),
        s.fresh.inspect(STATE).await.unwrap(),
        "{} seed {seed}: the page around the task as a fresh load shows it",
        task.id
    );
    assert!(
        first.screenshot.as_ref().unwrap().data == loaded.screenshot.as_ref().unwrap().data,
        "{} seed {seed}: the first screenshot is the fresh load's",
        task.id
    );
    assert!(
        first.url.ends_with(&format!("?seed={seed}")),
        "{}",
        first.url
    );
    first
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consecutive_episodes_of_a_task_start_in_place_seed_exact() {
    let mut s = setup().await;
    let task = s.task("click-button");

    // The first episode loads the page; it is solved, the reward read from the page.
    reset_like_fresh(&mut s, &task, 3).await;
    assert_eq!(s.pooled.session_start(), Some(SessionStart::New));
    let document = s.pooled.inspect(MARK).await.unwrap();
    let t = solve_click_button(&mut s.pooled).await;
    assert_eq!((t.reward, t.done), (1.0, true), "{:?}", t.info);
    s.pooled.close().await;

    // The next one starts on the same document: no load.
    reset_like_fresh(&mut s, &task, 5).await;
    assert_eq!(s.pooled.session_start(), Some(SessionStart::InPlace));
    assert_eq!(s.pooled.inspect("window.marker").await.unwrap(), document);
    // A policy leaves a mess: the page scrolled, a button focused, text selected, the
    // left button held down; the episode ends unsolved.
    s.pooled
        .inspect(
            "(() => {
              document.getElementById('area').insertAdjacentHTML('beforeend', '<div style=\"height: 2000px\"></div>');
              scrollTo(0, 300);
              document.querySelector('#area button').focus();
              getSelection().selectAllChildren(document.getElementById('query'));
              return scrollY;
            })()",
        )
        .await
        .unwrap();
    act(
        &mut s.pooled,
        json!({"action": "mouse_move", "coordinate": [20, 20]}),
    )
    .await;
    let t = act(&mut s.pooled, json!({"action": "left_mouse_down"})).await;
    assert_eq!(t.info.status, "ok", "{:?}", t.info);
    assert_eq!(s.pooled.evaluate().await.unwrap(), 0.0);
    s.pooled.close().await;

    // In place again: the button was released on the old episode's document, and
    // nothing of the mess shows; the episode plays as a fresh one.
    reset_like_fresh(&mut s, &task, 7).await;
    assert_eq!(s.pooled.session_start(), Some(SessionStart::InPlace));
    assert_eq!(s.pooled.inspect("window.marker").await.unwrap(), document);
    assert_eq!(s.pooled.inspect("window.released").await.unwrap(), true);
    let t = solve_click_button(&mut s.pooled).await;
    assert_eq!((t.reward, t.done), (1.0, true), "{:?}", t.info);
    assert_eq!(s.pooled.inspect("WOB_RAW_REWARD_GLOBAL").await.unwrap(), 1);
    s.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_task_or_a_page_left_loads_the_page_again() {
    let mut s = setup().await;
    let button = s.task("click-button");
    s.pooled.reset(button.clone(), 1).await.unwrap();
    let document = s.pooled.inspect(MARK).await.unwrap();
    s.pooled.close().await;

    // Another task on the same screen: the session is started over on its page.
    let text = s.task("enter-text");
    reset_like_fresh(&mut s, &text, 1).await;
    assert_eq!(s.pooled.session_start(), Some(SessionStart::Restarted));
    assert_eq!(
        s.pooled.inspect("window.marker").await.unwrap(),
        Value::Null
    );
    s.pooled.close().await;

    // Back to click-button: the idle session last ran enter-text, so it loads again.
    s.pooled.reset(button.clone(), 2).await.unwrap();
    assert_eq!(s.pooled.session_start(), Some(SessionStart::Restarted));
    assert_ne!(s.pooled.inspect(MARK).await.unwrap(), document);
    // The episode's page went elsewhere on the same origin: the next one loads its own.
    s.pooled
        .inspect("location.href = '/miniwob/click-link.html'")
        .await
        .unwrap();
    let mut left = false;
    for _ in 0..100 {
        left = s
            .pooled
            .inspect("location.pathname")
            .await
            .is_ok_and(|p| p == "/miniwob/click-link.html");
        if left {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(left, "the page went to click-link");
    s.pooled.close().await;
    reset_like_fresh(&mut s, &button, 4).await;
    assert_eq!(s.pooled.session_start(), Some(SessionStart::Restarted));
    assert_eq!(
        s.pooled.inspect("window.marker").await.unwrap(),
        Value::Null
    );

    // A page that keeps the last episode's state (drag-cube's rotation) always loads.
    let cube = s.task("drag-cube");
    let TaskKind::Web(web) = &cube.kind else {
        panic!("a web task")
    };
    assert!(web.reset_in_place.is_none());
    s.pooled.reset(cube.clone(), 1).await.unwrap();
    s.pooled.close().await;
    s.pooled.reset(cube, 2).await.unwrap();
    assert_eq!(s.pooled.session_start(), Some(SessionStart::Restarted));
    s.close().await;
}
