//! The scripted policy of the MiniWoB++ task types it knows: after every step it reads the
//! page as a scripted replay would (a DOM query through the computer: the utterance, the
//! elements, their boxes), picks the next action, and sends it through Cordon's action path
//! as a model would — a click at the element's centre in the screenshot's coordinates (the
//! episode's own model ↔ CSS scaling), typing as key events. The reward stays the page's.

use cordon_computer::display::CssPoint;
use serde_json::{Value, json};

use crate::env::{EnvAction, WebEnv};
use crate::error::{BenchError, Result};

/// What every planner shares: `box(el)` is the next action clicking `el`'s centre (its
/// first line box, for a link that wraps), `q` the utterance; `null` when the episode is
/// over.
const PRELUDE: &str = "
  if (WOB_DONE_GLOBAL) return null;
  const box = (el) => {
    if (!el) return {stuck: 'no element to click'};
    const rects = el.getClientRects();
    const r = rects.length ? rects[0] : el.getBoundingClientRect();
    return {click: [r.left + r.width / 2, r.top + r.height / 2]};
  };
  const q = core.getUtterance();
  const quoted = (re) => { const m = q.match(re); return m ? m[1] : null; };
  const fill = (el, text) => {
    if (!el) return {stuck: 'no field'};
    if (el.value === text) return null;
    if (document.activeElement !== el) return box(el);
    if (el.value !== '') return {key: 'ctrl+a'};
    return {type: text};
  };
";

/// The planners: the body of a function returning the next action.
const PLANNERS: &[(&str, &str)] = &[
    (
        "click-button",
        "const t = quoted(/\"(.*)\" button/);
         return box([...document.querySelectorAll('#area button')].find((b) => b.textContent === t));",
    ),
    (
        "click-link",
        "const t = quoted(/link \"(.*)\"/);
         return box([...document.querySelectorAll('#area .alink')].find((a) => a.textContent === t));",
    ),
    (
        "click-dialog",
        "return box(document.querySelector('.ui-dialog .ui-dialog-titlebar-close'));",
    ),
    ("focus-text", "return box(document.getElementById('tt'));"),
    (
        "focus-text-2",
        "const n = ['1st', '2nd', '3rd'].indexOf(quoted(/into the (\\w+) input/));
         return box(document.getElementById('tt' + (n + 1)));",
    ),
    ("click-test", "return box(document.getElementById('subbtn'));"),
    (
        "click-test-2",
        "const t = quoted(/button (\\w+)\\./);
         return box([...document.querySelectorAll('#area button')].find((b) => b.textContent === t));",
    ),
    (
        "enter-text",
        "const t = quoted(/Enter \"(.*)\" into/);
         return fill(document.getElementById('tt'), t) || box(document.getElementById('subbtn'));",
    ),
    (
        "enter-password",
        "const t = quoted(/password \"(.*)\" into/);
         return fill(document.getElementById('password'), t)
           || fill(document.getElementById('verify'), t)
           || box(document.getElementById('subbtn'));",
    ),
    (
        "click-checkboxes",
        "const list = quoted(/^Select (.*) and click Submit\\.?$/);
         const names = list === 'nothing' ? [] : list.split(', ');
         for (const label of document.querySelectorAll('#boxes label')) {
           const input = label.querySelector('input');
           if (input.checked !== names.includes(label.textContent.trim())) return box(input);
         }
         return box(document.getElementById('subbtn'));",
    ),
];

/// The task types the scripted policy solves.
pub fn solvable() -> Vec<&'static str> {
    PLANNERS.iter().map(|(name, _)| *name).collect()
}

/// Whether the scripted policy knows `task`.
pub fn knows(task: &str) -> bool {
    PLANNERS.iter().any(|(name, _)| *name == task)
}

/// The planner of `task`: a JavaScript expression whose value is the next action
/// (`{"click": [x, y]}` in CSS pixels, `{"type": text}`, `{"key": "ctrl+a"}`), `null` once
/// the episode is over, or `{"stuck": why}`. Public so that a peer (a plain Playwright
/// loop) can play the same policy.
pub fn planner(task: &str) -> Option<String> {
    PLANNERS
        .iter()
        .find(|(name, _)| *name == task)
        .map(|(_, body)| format!("(() => {{ {PRELUDE} {body} }})()"))
}

/// One planned action as the model-side call Cordon runs.
fn to_action(env: &WebEnv, plan: &Value) -> Result<Option<EnvAction>> {
    let action = if let Some([x, y]) = plan
        .get("click")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
    {
        let scaler = env
            .scaler()
            .ok_or_else(|| BenchError::State("the episode was not reset".into()))?;
        let at = scaler.to_model(CssPoint {
            x: x.as_f64().unwrap_or(0.0),
            y: y.as_f64().unwrap_or(0.0),
        });
        json!({"action": "left_click", "coordinate": [at.x, at.y]})
    } else if let Some(text) = plan.get("type").and_then(Value::as_str) {
        json!({"action": "type", "text": text})
    } else if let Some(keys) = plan.get("key").and_then(Value::as_str) {
        json!({"action": "key", "text": keys})
    } else {
        return Ok(None);
    };
    Ok(Some(EnvAction {
        format: "anthropic".into(),
        actions: vec![action],
    }))
}

/// Plays one episode of `task` on `env` (already reset): plan, act, until the page says
/// the episode is over, the planner is stuck, or the episode hits its caps.
pub(crate) async fn play(env: &mut WebEnv, task: &str) -> Result<()> {
    let expression = planner(task).ok_or_else(|| {
        BenchError::task(
            task,
            format!(
                "the scripted policy has no MiniWoB++ solver for it (it solves {})",
                solvable().join(", ")
            ),
        )
    })?;
    loop {
        let plan = env.inspect(expression.clone()).await?;
        if let Some(stuck) = plan.get("stuck").and_then(Value::as_str) {
            return Err(BenchError::task(
                task,
                format!("the scripted policy is stuck: {stuck}"),
            ));
        }
        let Some(action) = to_action(env, &plan)? else {
            return Ok(());
        };
        if env.step(action).await?.done {
            return Ok(());
        }
    }
}
