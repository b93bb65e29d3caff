//! Sessions kept between episodes: an episode that starts over a session the previous one
//! ended sees none of that episode's document, cookies, storage, window name or history.

use std::sync::Arc;

use cordon_agent_bench::env::WebEnv;
use cordon_agent_bench::page_server::{PageRoot, PageServer};
use cordon_agent_bench::session_pool::{SessionPool, SessionStart};
use cordon_agent_bench::task::Suite;
use cordon_computer::browser::{Browser, BrowserOptions};
use serde_json::json;

/// Records what it finds of an earlier episode when it loads.
const PAGE: &str = r#"<!doctype html><html><body><p>state</p><script>
window.seen = {
  local: localStorage.getItem('k'),
  late: localStorage.getItem('late'),
  session: sessionStorage.getItem('k'),
  cookie: document.cookie,
  name: window.name,
  history: history.length,
  left: document.getElementById('left') !== null,
  global: typeof window.leftover,
};
</script></body></html>"#;

/// Leaves every kind of state behind, and more from the page's `pagehide`.
const LEAVE_STATE: &str = r#"(async () => {
  localStorage.setItem('k', '1');
  sessionStorage.setItem('k', '1');
  document.cookie = 'k=1; max-age=3600; path=/';
  window.name = 'leak';
  window.leftover = 1;
  document.body.insertAdjacentHTML('beforeend', '<div id="left"></div>');
  history.pushState({}, '', location.href + '&pushed=1');
  addEventListener('pagehide', () => localStorage.setItem('late', '1'));
  const db = await new Promise((ok, err) => {
    const open = indexedDB.open('episode', 1);
    open.onupgradeneeded = () => open.result.createObjectStore('s');
    open.onsuccess = () => ok(open.result);
    open.onerror = () => err(open.error);
  });
  db.close();
  return (await indexedDB.databases()).map((d) => d.name);
})()"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reused_session_shows_nothing_of_the_previous_episode() {
    let dir = tempfile::tempdir().unwrap();
    let task_dir = dir.path().join("state");
    std::fs::create_dir(&task_dir).unwrap();
    std::fs::write(
        task_dir.join("task.json"),
        r#"{"kind": "web", "prompt": "p", "pages": ".", "reward": {"js": "true"}}"#,
    )
    .unwrap();
    std::fs::write(task_dir.join("index.html"), PAGE).unwrap();
    let suite = Suite::load(dir.path()).unwrap();
    let task = Arc::new(suite.entries[0].task.clone().unwrap());

    let mut options = BrowserOptions::default();
    options.no_sandbox = true;
    let browser = Browser::launch(options).await.unwrap();
    let pages = Arc::new(
        PageServer::start(PageRoot::Dir(dir.path().to_path_buf()))
            .await
            .unwrap(),
    );
    let pool = Arc::new(SessionPool::new());
    let mut env = WebEnv::new(browser.clone(), Some(pages)).with_pool(pool.clone());

    // A new session's tab holds `about:blank` and the start page: two history entries.
    let clean = json!({
        "local": null, "late": null, "session": null, "cookie": "", "name": "",
        "history": 2, "left": false, "global": "undefined",
    });
    env.reset(task.clone(), 0).await.unwrap();
    assert_eq!(env.reused(), Some(false));
    assert_eq!(env.inspect("window.seen").await.unwrap(), clean);
    let databases = env.inspect(LEAVE_STATE).await.unwrap();
    assert_eq!(databases, json!(["episode"]));
    env.close().await;
    assert_eq!(pool.len(), 1, "the session goes back to the pool");

    let first = env.reset(task.clone(), 1).await.unwrap();
    assert_eq!(
        env.reused(),
        Some(true),
        "the second episode reuses the session"
    );
    // The task has no `reset_in_place`: the page is loaded again, storage cleared.
    assert_eq!(env.session_start(), Some(SessionStart::Restarted));
    assert!(
        first.url.ends_with("/state/index.html?seed=1"),
        "{}",
        first.url
    );
    assert_eq!(env.inspect("window.seen").await.unwrap(), clean);
    let databases = env
        .inspect("indexedDB.databases().then((l) => l.map((d) => d.name))")
        .await
        .unwrap();
    assert_eq!(databases, json!([]));
    env.close().await;
    pool.close_all().await;
    browser.close().await.unwrap();
}
