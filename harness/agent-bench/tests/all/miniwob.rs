//! The MiniWoB++ suite end to end: its pages fetched from the published package into the
//! cache, served on 127.0.0.1, seeded as MiniWoB++'s own Python does, played by the
//! scripted policy in a real Chromium, the reward read from the pages' own globals.

use std::sync::Arc;

use cordon_agent_bench::env::WebEnv;
use cordon_agent_bench::miniwob::{self, Package, PackageError, Source};
use cordon_agent_bench::page_server::{PageRoot, PageServer};
use cordon_agent_bench::run::{Policy, RunOptions, run_suite};
use cordon_agent_bench::session_pool::{SessionPool, SessionStart};
use cordon_agent_bench::task::Task;
use cordon_computer::browser::{Browser, BrowserOptions};

/// The task types the end-to-end run plays.
const PLAYED: &[&str] = &[
    "click-button",
    "click-link",
    "enter-text",
    "click-checkboxes",
    "focus-text",
    "click-dialog",
];

pub(super) async fn package() -> Package {
    miniwob::ensure_default(&|line: &str| eprintln!("{line}"))
        .await
        .expect("the miniwob sdist is fetched from the package index (PyPI)")
}

pub(super) fn browser_options() -> BrowserOptions {
    let mut options = BrowserOptions::default();
    options.no_sandbox = true;
    options
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_registered_task_type_is_a_task_of_the_suite() {
    let package = package().await;
    let names = miniwob::task_names(&package).unwrap();
    // miniwob 1.1.0 registers 125 MiniWoB++ tasks and 3 FlightWoB ones.
    assert_eq!(names.len(), 128, "{names:?}");
    let suite = miniwob::suite(&package, "miniwob").unwrap();
    assert_eq!(suite.entries.len(), names.len());
    for entry in &suite.entries {
        let task = entry
            .task
            .as_ref()
            .unwrap_or_else(|e| panic!("{}: {e}", entry.id));
        assert!(miniwob::is_package_task(task), "{}", entry.id);
    }
    let some = miniwob::suite(&package, "miniwob:click-button,flight.AA").unwrap();
    let ids: Vec<&str> = some.entries.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, ["click-button", "flight.AA"]);
    // The page's own time limit: click-dialog keeps core.js's 10 s, book-flight sets 30 s.
    let limit = |name: &str| miniwob::task(&package, name).unwrap().max_seconds;
    assert_eq!((limit("click-dialog"), limit("book-flight")), (10.0, 30.0));
    let error = miniwob::suite(&package, "miniwob:click-nothing").unwrap_err();
    assert!(error.to_string().contains("click-nothing"), "{error}");
    assert!(miniwob::suite(&package, "miniwobble").is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offline_without_a_cached_copy_the_error_gives_the_commands() {
    let cache = tempfile::tempdir().unwrap();
    // Nothing listens on port 9 of loopback: the index cannot be reached.
    let source = Source {
        index: "http://127.0.0.1:9/simple".into(),
        local: None,
    };
    let error = miniwob::ensure(cache.path(), &source, &|_: &str| {})
        .await
        .unwrap_err();
    assert!(matches!(error, PackageError::Fetch(_)), "{error}");
    let text = error.to_string();
    assert!(
        text.contains("pip download --no-deps --no-binary :all: miniwob==1.1.0")
            && text.contains("CORDON_MINIWOB_SDIST=./miniwob-1.1.0.tar.gz"),
        "{text}"
    );
    // A local copy that is not the pinned sdist is refused.
    let bogus = cache.path().join("miniwob-1.1.0.tar.gz");
    std::fs::write(&bogus, b"not the sdist").unwrap();
    let source = Source {
        index: source.index,
        local: Some(bogus),
    };
    let error = miniwob::ensure(cache.path(), &source, &|_: &str| {})
        .await
        .unwrap_err();
    assert!(matches!(error, PackageError::Tampered { .. }), "{error}");
    assert!(!miniwob::install_dir(cache.path()).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scripted_policy_solves_its_task_types_with_rewards_read_from_the_pages() {
    let package = package().await;
    let spec = format!("miniwob:{}", PLAYED.join(","));
    let mut suite = miniwob::suite(&package, &spec).unwrap();
    for entry in &mut suite.entries {
        entry.task.as_mut().unwrap().seeds = vec![0, 1, 2];
    }
    let out = tempfile::tempdir().unwrap();
    let options = RunOptions::new(out.path().to_owned(), Policy::Script)
        .jobs(2)
        .progress_bar(false);
    let run = run_suite(&suite, browser_options(), options).await.unwrap();
    assert_eq!(run.episodes.len(), PLAYED.len() * 3);
    for episode in &run.episodes {
        assert!(
            episode.success && episode.reward == 1.0 && episode.error.is_none(),
            "{}: reward {} error {:?} steps {:?}",
            episode.id,
            episode.reward,
            episode.error,
            episode.trace.iter().map(|s| &s.info).collect::<Vec<_>>()
        );
        // The policy was given the page's utterance, which names what to do.
        assert_ne!(episode.prompt, "", "{}", episode.id);
        assert!(
            !episode.prompt.contains("MiniWoB++ task"),
            "{}",
            episode.prompt
        );
        // Every action went through the computer: clicks are marked where they landed.
        assert!(
            episode.trace.iter().any(|s| !s.info.marks.is_empty()),
            "{}: no click",
            episode.id
        );
    }
    assert_eq!(run.summary.succeeded, run.episodes.len());
    // Each worker runs consecutive seeds of a task: most start on the page the last one
    // left, the rest load it.
    let started = |how: &str| {
        run.episodes
            .iter()
            .filter(|e| e.session.as_deref() == Some(how))
            .count()
    };
    assert!(
        started("in_place") >= run.episodes.len() / 3,
        "{}",
        started("in_place")
    );
    assert_eq!(
        started("in_place") + started("restarted") + started("new"),
        run.episodes.len()
    );
    // The per-task success is in the machine-readable results and the report.
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("results.json")).unwrap())
            .unwrap();
    assert_eq!(results["suite"], spec);
    let report = std::fs::read_to_string(out.path().join("report.html")).unwrap();
    for task in PLAYED {
        assert!(
            report.contains(&format!("{task}-s2")),
            "{task} not in the report"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_answer_ends_the_episode_with_the_page_reward() {
    let package = package().await;
    let browser = Browser::launch(browser_options()).await.unwrap();
    let pages = Arc::new(
        PageServer::start(PageRoot::Dir(package.html()))
            .await
            .unwrap(),
    );
    let mut env = WebEnv::new(browser.clone(), Some(pages));
    let task = Arc::new(miniwob::task(&package, "click-test-2").unwrap());
    env.reset(task, 0).await.unwrap();
    // Button TWO is the wrong one: the page ends the episode with -1 (reward 0), done.
    let two = env
        .inspect("(() => { const r = document.getElementById('subbtn2').getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; })()")
        .await
        .unwrap();
    let at = env
        .scaler()
        .unwrap()
        .to_model(cordon_computer::display::CssPoint {
            x: two[0].as_f64().unwrap(),
            y: two[1].as_f64().unwrap(),
        });
    let t = env
        .step(
            cordon_agent_bench::EnvAction::from_value(
                serde_json::json!({"action": "left_click", "coordinate": [at.x, at.y]}),
            )
            .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        (t.reward, t.done, t.info.truncated),
        (0.0, true, false),
        "{:?}",
        t.info
    );
    assert_eq!(env.inspect("WOB_RAW_REWARD_GLOBAL").await.unwrap(), -1);
    env.close().await;
    browser.close().await.unwrap();
}

/// The instance a seed gives: the utterance and the task's DOM.
async fn instance(env: &mut WebEnv, task: &Arc<Task>, seed: u64) -> (String, String) {
    env.reset(task.clone(), seed).await.unwrap();
    let utterance = env.instruction().unwrap();
    let dom = env
        .inspect("document.getElementById('wrap').outerHTML")
        .await
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned();
    (utterance, dom)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_seed_gives_the_same_instance() {
    let package = package().await;
    let browser = Browser::launch(browser_options()).await.unwrap();
    let pages = Arc::new(
        PageServer::start(PageRoot::Dir(package.html()))
            .await
            .unwrap(),
    );
    let mut env = WebEnv::new(browser.clone(), Some(pages.clone()));
    // Sessions kept between episodes: the next episode of a task starts in place.
    let pool = Arc::new(SessionPool::new());
    let mut pooled = WebEnv::new(browser.clone(), Some(pages)).with_pool(pool.clone());
    for name in [
        "click-checkboxes",
        "click-button",
        "enter-text",
        "click-link",
    ] {
        let task = Arc::new(miniwob::task(&package, name).unwrap());
        let first = instance(&mut env, &task, 7).await;
        let again = instance(&mut env, &task, 7).await;
        assert_eq!(first, again, "{name}: seed 7 twice");
        instance(&mut pooled, &task, 8).await;
        let in_place = instance(&mut pooled, &task, 7).await;
        assert_eq!(pooled.session_start(), Some(SessionStart::InPlace));
        assert_eq!(in_place, first, "{name}: seed 7 in place and loaded");
        let mut differs = false;
        for other in [8, 9, 10] {
            differs |= instance(&mut env, &task, other).await != first;
        }
        assert!(differs, "{name}: other seeds give other instances");
    }
    env.close().await;
    pooled.close().await;
    pool.close_all().await;
    browser.close().await.unwrap();
}
