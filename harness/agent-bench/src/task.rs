//! Task suites: a directory with one sub-directory per task, each holding a `task.json`
//! (the format is `docs/bench.md`), and the built-in suite compiled into the binary.
//!
//! A malformed task does not stop a suite from loading: it is kept as a [`TaskEntry`] with
//! the reason, so a run reports that episode as an error and goes on with the others.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cordon_computer::display::Size;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{BenchError, Result};

/// What a task's reward reads from the page, by the harness, after every step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Reward {
    /// A JavaScript expression evaluated in the page: `true`/`false` or a number in 0..=1.
    Js { js: String },
    /// An element matching `selector` exists (and, with `text`, its text contains it).
    Dom {
        selector: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    },
}

impl Reward {
    /// The expression the page evaluates to a number or a boolean.
    pub fn expression(&self) -> String {
        match self {
            Reward::Js { js } => format!("(() => {{ return ({js}); }})()"),
            Reward::Dom { selector, text } => {
                let selector = Value::String(selector.clone());
                let text = text.clone().map_or(Value::Null, Value::String);
                format!(
                    "(() => {{ const e = document.querySelector({selector}); const t = {text}; \
                     return !!e && (t === null || (e.textContent || '').includes(t)); }})()"
                )
            }
        }
    }
}

/// What a step's approval request is answered with in a benchmark (nobody is there to ask).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Approvals {
    /// Approve every `ask` (the decision is still recorded in the report).
    #[default]
    Approve,
    /// Deny every `ask`.
    Deny,
}

/// A web task: a page, a reward read from it, caps, and how the screen looks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebTask {
    /// The start page: a URL, or, with `pages`, a path inside that directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// A directory (relative to the task's own) that Cordon serves on loopback; the start
    /// page is `path` inside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pages: Option<String>,
    /// The start page inside `pages` (default `index.html`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// JavaScript run in the page after it loads on reset, with `seed` bound to the seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset: Option<String>,
    /// JavaScript that starts the next episode on the page an earlier episode of this task
    /// left, without loading it again or clearing anything (`seed` bound as in `reset`).
    /// With it, an episode whose pooled session last ran this task and still shows its
    /// start page runs this instead of loading the page and running `reset`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset_in_place: Option<String>,
    pub reward: Reward,
    /// When the page says the episode is over whatever the reward (a wrong answer, a time
    /// limit of its own): a predicate read with the reward after every step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done: Option<Reward>,
    /// A JavaScript expression read after reset whose text is the episode's instruction
    /// (a page that words its own task per seed); the policy gets it instead of `prompt`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instruction: Option<String>,
    /// Origins the session may reach besides the pages Cordon serves (`[]`: only those
    /// when `pages` is set, everything otherwise).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_origins: Vec<String>,
    /// Approval rules as in `cordon computer --rules` (default: Cordon's default rules).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<Value>,
    #[serde(default)]
    pub approvals: Approvals,
    /// CSS pixels, `"WxH"` (default 1280x800).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub viewport: Option<String>,
    /// What the model sees, `"WxH"` (default 1024x640).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display: Option<String>,
    /// Device pixel ratio, 1 or 2 (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dpr: Option<f64>,
}

/// A code task: a prompt, starting files, and a checker run in the sandbox afterwards.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CodeTask {
    /// `python` (default; CPython), `python-lite` (RustPython) or `javascript`.
    #[serde(default = "python")]
    pub language: String,
    /// A directory (relative to the task's) whose files start in `/workspace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// The checker program (a file relative to the task's directory, in `language`), run in
    /// the same workspace after the policy's code. It passes by ending `completed` and
    /// printing nothing on stderr; its last expression may also be a number in 0..=1.
    pub checker: String,
}

fn python() -> String {
    "python".to_owned()
}

/// A desktop task: a program on an isolated X display, and a checker command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DesktopTask {
    pub launch: String,
    pub checker: String,
}

/// What kind of episode a task is.
#[allow(
    clippy::large_enum_variant,
    reason = "a task is parsed once per suite and shared behind an Arc per episode"
)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TaskKind {
    Web(WebTask),
    Code(CodeTask),
    Desktop(DesktopTask),
}

/// One task, as written in its `task.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// Unique in its suite; default: the task's directory name.
    #[serde(default)]
    pub id: String,
    /// The instruction a model is given.
    pub prompt: String,
    /// A note for people reading the suite (not shown to the model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// One episode per seed (default `[0]`).
    #[serde(default = "default_seeds")]
    pub seeds: Vec<u64>,
    /// Most steps in an episode (default 20).
    #[serde(default = "default_max_steps")]
    pub max_steps: u32,
    /// Longest an episode may run, in seconds (default 60).
    #[serde(default = "default_max_seconds")]
    pub max_seconds: f64,
    #[serde(flatten)]
    pub kind: TaskKind,
    /// The task's directory (where `pages`, `workspace`, `checker` and scripts are found).
    #[serde(skip)]
    pub dir: TaskDir,
}

fn default_seeds() -> Vec<u64> {
    vec![0]
}

fn default_max_steps() -> u32 {
    20
}

fn default_max_seconds() -> f64 {
    60.0
}

/// Where a task's files live.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum TaskDir {
    /// A directory on disk.
    Disk(PathBuf),
    /// The built-in suite: files compiled into the binary, under this prefix.
    Builtin(String),
    /// A task given inline (over HTTP): it has no files.
    #[default]
    None,
}

impl Task {
    /// Parses a `task.json`; `id` defaults to `default_id`. Checks what can be checked
    /// without running anything.
    pub fn parse(text: &str, default_id: &str, dir: TaskDir) -> Result<Task, String> {
        let mut task: Task = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if task.id.is_empty() {
            task.id = default_id.to_owned();
        }
        task.dir = dir;
        task.validate()?;
        Ok(task)
    }

    fn validate(&self) -> Result<(), String> {
        if self.id.is_empty()
            || !self
                .id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(format!(
                "`id` {:?} must be letters, digits, `-`, `_` or `.`",
                self.id
            ));
        }
        if self.seeds.is_empty() {
            return Err("`seeds` is empty: give at least one seed".into());
        }
        if self.max_steps == 0 {
            return Err("`max_steps` must be at least 1".into());
        }
        if self.max_seconds.is_nan() || self.max_seconds <= 0.0 {
            return Err("`max_seconds` must be more than 0".into());
        }
        if let TaskKind::Web(web) = &self.kind {
            match (&web.url, &web.pages) {
                (Some(_), Some(_)) => {
                    return Err("give either `url` or `pages`, not both".into());
                }
                (None, None) => return Err("a web task needs `url` or `pages`".into()),
                _ => {}
            }
            if web.pages.is_some() && matches!(self.dir, TaskDir::None) {
                return Err("`pages` needs a task directory; give `url` instead".into());
            }
            for (name, value) in [("viewport", &web.viewport), ("display", &web.display)] {
                if let Some(value) = value
                    && Size::parse(value).is_none()
                {
                    return Err(format!("`{name}` must be \"WxH\", not {value:?}"));
                }
            }
            if let Some(dpr) = web.dpr
                && dpr != 1.0
                && dpr != 2.0
            {
                return Err(format!("`dpr` must be 1 or 2, not {dpr}"));
            }
        }
        Ok(())
    }

    /// A file of the task (a script, a checker), if it has it.
    pub fn file(&self, name: &str) -> Option<Vec<u8>> {
        match &self.dir {
            TaskDir::Disk(dir) => std::fs::read(dir.join(name)).ok(),
            TaskDir::Builtin(prefix) => {
                crate::builtin::file(&format!("{prefix}/{name}")).map(|bytes| bytes.to_vec())
            }
            TaskDir::None => None,
        }
    }

    /// The files under a sub-directory of the task (relative paths), for a workspace.
    pub fn files_under(&self, sub: &str) -> Vec<(String, Vec<u8>)> {
        match &self.dir {
            TaskDir::Disk(dir) => {
                let mut out = Vec::new();
                collect(&dir.join(sub), "", &mut out);
                out
            }
            TaskDir::Builtin(prefix) => {
                let root = format!("{prefix}/{sub}/");
                crate::builtin::FILES
                    .iter()
                    .filter_map(|(path, bytes)| {
                        path.strip_prefix(&root)
                            .map(|rest| (rest.to_owned(), bytes.to_vec()))
                    })
                    .collect()
            }
            TaskDir::None => Vec::new(),
        }
    }
}

fn collect(dir: &Path, prefix: &str, out: &mut Vec<(String, Vec<u8>)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let rel = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        let path = entry.path();
        if path.is_dir() {
            collect(&path, &rel, out);
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.push((rel, bytes));
        }
    }
}

/// One entry of a suite: a task, or why its `task.json` could not be used.
#[derive(Debug, Clone)]
pub struct TaskEntry {
    pub id: String,
    pub task: std::result::Result<Task, String>,
}

/// A suite: tasks by id, and where its files come from.
#[derive(Debug, Clone)]
pub struct Suite {
    /// `builtin`, or the directory it was read from.
    pub name: String,
    pub entries: Vec<TaskEntry>,
    pub source: SuiteSource,
}

/// Where a suite's pages are served from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SuiteSource {
    Dir(PathBuf),
    Builtin,
}

impl Suite {
    /// The built-in suite (compiled into the binary).
    pub fn builtin() -> Suite {
        let mut ids: Vec<&str> = crate::builtin::FILES
            .iter()
            .filter_map(|(path, _)| path.strip_suffix("/task.json"))
            .collect();
        ids.sort_unstable();
        let entries = ids
            .into_iter()
            .map(|id| {
                let text = crate::builtin::file(&format!("{id}/task.json"))
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .unwrap_or_default();
                TaskEntry {
                    id: id.to_owned(),
                    task: Task::parse(&text, id, TaskDir::Builtin(id.to_owned())),
                }
            })
            .collect();
        Suite {
            name: "builtin".into(),
            entries,
            source: SuiteSource::Builtin,
        }
    }

    /// Reads a suite directory: every sub-directory with a `task.json` is a task.
    pub fn load(dir: &Path) -> Result<Suite> {
        let read = std::fs::read_dir(dir).map_err(|e| BenchError::Suite {
            path: dir.to_owned(),
            reason: e.to_string(),
        })?;
        let mut found = BTreeMap::new();
        for entry in read.flatten() {
            let path = entry.path();
            let file = path.join("task.json");
            if !file.is_file() {
                continue;
            }
            let id = entry.file_name().to_string_lossy().into_owned();
            let task = std::fs::read_to_string(&file)
                .map_err(|e| e.to_string())
                .and_then(|text| Task::parse(&text, &id, TaskDir::Disk(path.clone())))
                .map_err(|reason| format!("{}: {reason}", file.display()));
            found.insert(id, task);
        }
        if found.is_empty() {
            return Err(BenchError::Suite {
                path: dir.to_owned(),
                reason: "no task found (each task is a sub-directory with a task.json)".into(),
            });
        }
        let mut entries: Vec<TaskEntry> = Vec::new();
        for (dir_name, task) in found {
            let id = task.as_ref().map_or(dir_name, |t| t.id.clone());
            if entries.iter().any(|e| e.id == id) {
                entries.push(TaskEntry {
                    id: format!("{id}#dup"),
                    task: Err(format!("two tasks have the id {id:?}")),
                });
                continue;
            }
            entries.push(TaskEntry { id, task });
        }
        Ok(Suite {
            name: dir.display().to_string(),
            entries,
            source: SuiteSource::Dir(dir.to_owned()),
        })
    }
}
