//! The `miniwob` suite: one web task per task type the package registers, each episode
//! seeded and started the way MiniWoB++'s own Python instance does it (`Math.seedrandom`,
//! `core.setDataMode`, `core.startEpisodeReal`, then waiting for `WOB_TASK_READY`), the
//! reward and the end read from the page's own globals, the instruction from its `#query`.

use std::path::Path;

use serde_json::json;

use super::package::Package;
use crate::error::{BenchError, Result};
use crate::task::{Suite, SuiteSource, Task, TaskDir, TaskEntry};

/// The suite's name on the command line (`miniwob` or `miniwob:TASK,…`).
pub const SUITE: &str = "miniwob";

/// The wait both resets start with: the page loaded and MiniWoB++'s own `onload`
/// (`core.startEpisode()`, which builds `core.cover_div`) run.
macro_rules! wait_for_the_page {
    () => {
        "  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  for (let i = 0; i < 500 && !(document.readyState === 'complete' && window.core && core.cover_div); i++) await sleep(10);
  if (!(window.core && core.cover_div)) throw new Error('the MiniWoB++ page did not load');
"
    };
}

/// The seed and start both resets end with, then the wait on `WOB_TASK_READY` of up to
/// 20 × 50 ms, as MiniWoB++'s `begin_task`.
macro_rules! seed_and_start {
    () => {
        "  Math.seedrandom(seed);
  core.setDataMode('train');
  core.startEpisodeReal();
  for (let i = 0; i < 20 && !WOB_TASK_READY; i++) await sleep(50);
  if (!WOB_TASK_READY) throw new Error('the MiniWoB++ task did not become ready');
"
    };
}

/// The seed and start, as `miniwob/selenium_instance.py` `begin_task` does after the page
/// loaded (its `set_seed`, `set_mode`, `core.startEpisodeReal()`, the wait on
/// `WOB_TASK_READY` of up to 20 × 50 ms). The wait for `core.cover_div` makes sure the
/// page's own `onload` (`core.startEpisode()`) ran first and will not cover the episode.
const RESET: &str = concat!(
    "return (async () => {\n",
    wait_for_the_page!(),
    seed_and_start!(),
    "})();"
);

/// The next episode on the page an earlier one left, as MiniWoB++'s Python instance resets
/// (`reset`: `force_stop`'s `core.endEpisode(0)`, then `begin_task`), so the page is not
/// loaded again and nothing is cleared (MiniWoB++ clears nothing either). So that the
/// instance equals a fresh load's with the same seed, what MiniWoB++ keeps across its
/// episodes and a fresh load does not have is put back first: the reward display's
/// running figures (last reward, average, episodes done), the `data-tampered` and
/// DOM-reference marks on elements outside the rebuilt task area, and the focus.
/// `core.startEpisodeReal` itself rebuilds the task area (`genProblem`), clears the text
/// selection and the click canvas, and scrolls the page to the top.
const RESET_IN_PLACE: &str = concat!(
    "return (async () => {\n",
    wait_for_the_page!(),
    "  core.endEpisode(0);\n\
  core.wob_latest = '-';\n\
  core.wob_scores = [];\n\
  WOB_EPISODE_ID = 0;\n\
  document.getElementById('episode-id').textContent = '0';\n\
  for (const id of ['reward-last', 'reward-avg']) {\n\
    const shown = document.getElementById(id);\n\
    shown.removeAttribute('style');\n\
    shown.textContent = '-';\n\
  }\n\
  for (const e of document.querySelectorAll('[data-tampered], [data-wob_ref], [data-wob_eps]')) {\n\
    delete e.dataset.tampered;\n\
    delete e.dataset.wob_ref;\n\
    delete e.dataset.wob_eps;\n\
  }\n\
  if (document.activeElement) document.activeElement.blur();\n\
",
    seed_and_start!(),
    "})();"
);

/// Task types whose page keeps something of the last episode that `genProblem` does not
/// rebuild and a fresh load does not show: these load their page for every episode.
/// `drag-cube` keeps the cube's rotation. (Every other MiniWoB++ page, after a policy
/// clicked, typed, scrolled and held a button, gave the same utterance and page as a
/// fresh load with the same seed, up to class order and running animations.) FlightWoB
/// sites (`flight.*`) are not MiniWoB++'s `core.js` and always load.
const LOADS_EVERY_EPISODE: &[&str] = &["drag-cube"];

/// `get_original_reward`'s input: the raw reward once the page says the episode is done
/// (time-discounting is left out so that 1 means solved).
const REWARD: &str = "WOB_DONE_GLOBAL ? WOB_RAW_REWARD_GLOBAL : 0";
const DONE: &str = "WOB_DONE_GLOBAL";
/// `core.getUtterance()`, which some pages answer with `{utterance, fields}` (read as the
/// Python instance reads it).
const INSTRUCTION: &str =
    "(() => { const u = core.getUtterance(); return typeof u === 'string' ? u : u.utterance; })()";

/// Every task type the package registers, in its order (`miniwob/NAME-v1` ids).
pub fn task_names(package: &Package) -> Result<Vec<String>> {
    let path = package.registration();
    let text = std::fs::read_to_string(&path)
        .map_err(|e| BenchError::io(path.display().to_string(), e))?;
    let names: Vec<String> = text
        .split("id=\"miniwob/")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .filter_map(|id| id.strip_suffix("-v1"))
        .map(str::to_owned)
        .collect();
    if names.is_empty() {
        return Err(BenchError::Suite {
            path,
            reason: "it registers no task".into(),
        });
    }
    Ok(names)
}

/// `core.EPISODE_MAX_TIME` as the page sets it (core.js's 10 s otherwise), in ms.
fn episode_max_ms(page: &Path) -> u64 {
    std::fs::read_to_string(page)
        .ok()
        .and_then(|text| {
            let rest = text.split("core.EPISODE_MAX_TIME").nth(1)?;
            let rest = rest.trim_start().strip_prefix('=')?.trim_start();
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .unwrap_or(10_000)
}

/// The task of one task type: its page, MiniWoB++'s window size, its time limit.
pub fn task(package: &Package, name: &str) -> std::result::Result<Task, String> {
    let html = package.html();
    let in_place = !name.starts_with("flight.") && !LOADS_EVERY_EPISODE.contains(&name);
    let (dir, path, viewport) = match name.strip_prefix("flight.") {
        Some(site) => (
            html.join("flight"),
            format!("{site}/wrapper.html"),
            "600x800",
        ),
        None => (html.join("miniwob"), format!("{name}.html"), "500x320"),
    };
    let page = dir.join(&path);
    if !page.is_file() {
        return Err(format!("the package has no page {}", page.display()));
    }
    let max_ms = episode_max_ms(&page);
    let value = json!({
        "kind": "web",
        "id": name,
        "prompt": format!("The MiniWoB++ task {name}: the instruction is the page's utterance."),
        "description": format!("MiniWoB++ {name} (PyPI miniwob {})", super::package::VERSION),
        "pages": ".",
        "path": path,
        "reset": RESET,
        "reset_in_place": in_place.then_some(RESET_IN_PLACE),
        "reward": {"js": REWARD},
        "done": {"js": DONE},
        "instruction": INSTRUCTION,
        "rules": [],
        "viewport": viewport,
        "display": viewport,
        "max_steps": 50,
        // The page ends the episode itself at its limit (reward -1); this is the backstop.
        "max_seconds": max_ms as f64 / 1000.0,
    });
    Task::parse(&value.to_string(), name, TaskDir::Disk(dir))
}

/// The suite for `spec`: `miniwob` (every task type) or `miniwob:NAME,NAME`.
pub fn suite(package: &Package, spec: &str) -> Result<Suite> {
    let all = task_names(package)?;
    let chosen: Vec<String> = match spec.strip_prefix(SUITE).map(|r| r.strip_prefix(':')) {
        Some(Some(list)) => {
            let wanted: Vec<String> = list
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
            let unknown: Vec<&String> = wanted.iter().filter(|w| !all.contains(w)).collect();
            if wanted.is_empty() || !unknown.is_empty() {
                return Err(BenchError::Suite {
                    path: spec.into(),
                    reason: format!(
                        "unknown MiniWoB++ task {unknown:?}; `cordon bench --list miniwob` lists them"
                    ),
                });
            }
            wanted
        }
        Some(None) if spec == SUITE => all,
        _ => {
            return Err(BenchError::Suite {
                path: spec.into(),
                reason: "write `miniwob` or `miniwob:TASK,TASK`".into(),
            });
        }
    };
    let entries = chosen
        .into_iter()
        .map(|name| TaskEntry {
            task: task(package, &name),
            id: name,
        })
        .collect();
    Ok(Suite {
        name: spec.to_owned(),
        entries,
        source: SuiteSource::Dir(package.html()),
    })
}

/// Whether `task` is a page of the MiniWoB++ package (its folder is the installed
/// package's `html/miniwob` or `html/flight`).
pub fn is_package_task(task: &Task) -> bool {
    let TaskDir::Disk(dir) = &task.dir else {
        return false;
    };
    let installed = format!("{}-{}", super::package::PACKAGE, super::package::VERSION);
    let mut parts = dir.iter().rev();
    let (leaf, html, version) = (parts.next(), parts.next(), parts.next());
    matches!(leaf.and_then(|l| l.to_str()), Some("miniwob" | "flight"))
        && html.is_some_and(|h| h == "html")
        && version.is_some_and(|v| v.to_str() == Some(installed.as_str()))
}
