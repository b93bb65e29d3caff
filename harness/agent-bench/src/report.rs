//! `report.html`: one self-contained page per run (images inline, no script, no network).
//! A summary table (success rate, steps, latency percentiles), a table of episodes, then
//! per episode every step: the screenshot the action was taken on with each click marked,
//! the action in model and screen coordinates, the gates' decisions, timings and reward.

use std::fmt::Write as _;
use std::path::Path;

use base64::Engine as _;
use serde_json::Value;

use crate::env::MarkKind;
use crate::results::{EpisodeResult, Percentiles, RunResults, Summary};

/// The marker colour (magenta: no page of the built-in suite uses it, so a test can find
/// the marker in a screenshot of the report).
pub const MARK_COLOR: &str = "#ff00ff";

fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn data_uri(dir: &Path, file: &str) -> Option<String> {
    let bytes = std::fs::read(dir.join(file)).ok()?;
    let media = if file.ends_with(".png") {
        "image/png"
    } else {
        "image/jpeg"
    };
    Some(format!(
        "data:{media};base64,{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    ))
}

fn pct(p: &Percentiles) -> String {
    format!("{} / {} / {} / {}", p.p50, p.p90, p.p99, p.max)
}

/// The rate cell: over the episodes this run ran, which a resume says, since the other
/// counts of the table cover every episode.
fn pace(s: &Summary) -> String {
    match s.episodes_per_minute {
        None => "— (none run this time)".to_owned(),
        Some(rate) if s.episodes_run < s.episodes => {
            format!(
                "{rate} ({} of {} run this time)",
                s.episodes_run, s.episodes
            )
        }
        Some(rate) => rate.to_string(),
    }
}

const STYLE: &str = r#"
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; background: #fafafa; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; }
table { border-collapse: collapse; margin: 8px 0; background: #fff; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; }
.ok { color: #060; font-weight: 600; } .fail { color: #a00; font-weight: 600; }
.episode { border-top: 2px solid #999; margin-top: 24px; }
.step { display: flex; gap: 16px; margin: 12px 0; padding: 8px; background: #fff; border: 1px solid #ddd; }
.shot { position: relative; flex: none; width: 640px; line-height: 0; }
.shot img { width: 100%; border: 1px solid #888; }
.mark { position: absolute; width: 22px; height: 22px; margin: -14px 0 0 -14px; border-radius: 50%;
        border: 3px solid #ff00ff; background: rgba(255, 0, 255, 0.35); }
.mark.release { border-style: dashed; }
.mark.scroll { border-radius: 0; }
.mark span { position: absolute; left: 24px; top: 2px; font: bold 12px/1 sans-serif; color: #ff00ff; white-space: nowrap; }
.meta { flex: 1; min-width: 0; }
pre { white-space: pre-wrap; word-break: break-all; background: #f4f4f4; padding: 6px; margin: 4px 0; }
.meta code, .meta td { overflow-wrap: anywhere; }
table.timings { font-size: 12px; } table.timings td { text-align: right; }
.gate-ask { color: #a60; } .gate-deny { color: #a00; } .gate-allow { color: #060; }
"#;

/// Renders the report of `run`; screenshots are read from `out/episodes/<id>/`.
pub fn render(run: &RunResults, out: &Path) -> String {
    let s = &run.summary;
    let mut h = String::new();
    let _ = write!(
        h,
        "<!doctype html><html><head><meta charset=utf-8><title>cordon bench: {}</title><style>{STYLE}</style></head><body>",
        esc(&run.suite)
    );
    let _ = write!(
        h,
        "<h1>cordon bench — suite <code>{}</code>, policy <code>{}</code>{}</h1>",
        esc(&run.suite),
        esc(&run.policy),
        run.dpr.map(|d| format!(", DPR {d}")).unwrap_or_default()
    );
    let _ = write!(
        h,
        "<table id=summary><tr><th>episodes</th><th>succeeded</th><th>success rate</th><th>errors</th>\
         <th>mean reward</th><th>mean steps</th><th>step ms p50 / p90 / p99 / max</th>\
         <th>reward read ms p50 / p90 / p99 / max</th><th>episode ms p50 / p90 / p99 / max</th>\
         <th>run s</th><th>episodes / min</th><th>jobs</th></tr>\
         <tr><td>{}</td><td>{}</td><td>{:.0}%</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr></table>",
        s.episodes,
        s.succeeded,
        s.success_rate * 100.0,
        s.errors,
        s.mean_reward,
        s.mean_steps,
        pct(&s.step_ms),
        pct(&s.reward_ms),
        pct(&s.episode_ms),
        s.run_seconds,
        pace(s),
        run.jobs
    );
    h.push_str(
        "<table id=episodes><tr><th>episode</th><th>kind</th><th>result</th><th>reward</th>\
         <th>steps</th><th>ms</th><th>note</th></tr>",
    );
    for e in &run.episodes {
        let _ = write!(
            h,
            "<tr><td><a href=\"#ep-{id}\">{id}</a></td><td>{}</td><td class={}>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&e.kind),
            if e.success { "ok" } else { "fail" },
            if e.success {
                "success"
            } else if e.error.is_some() {
                "error"
            } else {
                "failed"
            },
            e.reward,
            e.steps,
            e.duration_ms,
            esc(e.error.as_deref().unwrap_or(if e.truncated {
                "hit its step or time cap"
            } else {
                ""
            })),
            id = esc(&e.id),
        );
    }
    h.push_str("</table>");
    for e in &run.episodes {
        episode(&mut h, e, &out.join("episodes").join(&e.id));
    }
    h.push_str("</body></html>\n");
    h
}

/// A step's engine timings as a small table: one column per phase, one row per engine run
/// (a step that asked has more than one: the ask, then the approved run). Anything else is
/// shown as wrapped text, never as one line wider than its card.
fn timings(h: &mut String, timings: &Value) {
    let rows: Vec<&serde_json::Map<String, Value>> = match timings {
        Value::Null => return,
        Value::Object(row) => vec![row],
        Value::Array(rows) => rows.iter().filter_map(Value::as_object).collect(),
        _ => Vec::new(),
    };
    let Some(first) = rows.first() else {
        let _ = write!(
            h,
            "<div>timings (ms): <code>{}</code></div>",
            esc(&timings.to_string())
        );
        return;
    };
    // The engine's phases in the order they run, then anything else it reports.
    let mut phases: Vec<&str> = ["gate", "act", "settle", "capture", "total"]
        .into_iter()
        .filter(|phase| first.contains_key(*phase))
        .collect();
    for phase in first.keys() {
        if !phases.contains(&phase.as_str()) {
            phases.push(phase);
        }
    }
    h.push_str("<div>timings (ms):</div><table class=timings><tr>");
    if rows.len() > 1 {
        h.push_str("<th>run</th>");
    }
    for phase in &phases {
        let _ = write!(h, "<th>{}</th>", esc(phase));
    }
    h.push_str("</tr>");
    for (n, row) in rows.iter().enumerate() {
        h.push_str("<tr>");
        if rows.len() > 1 {
            let _ = write!(h, "<th>{}</th>", n + 1);
        }
        for phase in &phases {
            let value = match row.get(*phase) {
                Some(Value::Number(ms)) => ms.to_string(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            let _ = write!(h, "<td>{}</td>", esc(&value));
        }
        h.push_str("</tr>");
    }
    h.push_str("</table>");
}

fn episode(h: &mut String, e: &EpisodeResult, dir: &Path) {
    let _ = write!(
        h,
        "<section class=episode id=\"ep-{}\"><h2>{} <span class={}>{}</span></h2><p>{}</p>",
        esc(&e.id),
        esc(&e.id),
        if e.success { "ok" } else { "fail" },
        if e.success { "success" } else { "no success" },
        esc(&e.prompt)
    );
    let _ = write!(
        h,
        "<p>reward {} · {} steps · {} ms (reset {} ms){}{}{}</p>",
        e.reward,
        e.steps,
        e.duration_ms,
        e.reset_ms,
        e.server
            .as_deref()
            .map(|s| format!(" · server <code>{}</code>", esc(s)))
            .unwrap_or_default(),
        e.start_url
            .as_deref()
            .map(|u| format!(" · start <code>{}</code>", esc(u)))
            .unwrap_or_default(),
        e.screen
            .as_ref()
            .map(|s| format!(" · screen <code>{}</code>", esc(&s.to_string())))
            .unwrap_or_default(),
    );
    if let Some(error) = &e.error {
        let _ = write!(h, "<p class=fail>error: {}</p>", esc(error));
    }
    let display = e
        .screen
        .as_ref()
        .and_then(|s| s.get("display"))
        .and_then(|d| Some((d.get("width")?.as_f64()?, d.get("height")?.as_f64()?)))
        .unwrap_or((1024.0, 640.0));
    for step in &e.trace {
        let info = &step.info;
        h.push_str("<div class=step><div class=shot>");
        if let Some(uri) = step.before.as_deref().and_then(|f| data_uri(dir, f)) {
            let _ = write!(h, "<img alt=\"before step {}\" src=\"{uri}\">", info.step);
        }
        for (i, m) in info.marks.iter().enumerate() {
            let class = match m.kind {
                MarkKind::Click => "click",
                MarkKind::Release => "release",
                MarkKind::Scroll => "scroll",
            };
            let _ = write!(
                h,
                "<div class=\"mark {class}\" data-model-x={} data-model-y={} style=\"left:{:.3}%;top:{:.3}%\"><span>{}</span></div>",
                m.model.0,
                m.model.1,
                (m.model.0 as f64 + 0.5) / display.0 * 100.0,
                (m.model.1 as f64 + 0.5) / display.1 * 100.0,
                i + 1
            );
        }
        h.push_str("</div><div class=meta>");
        let _ = write!(
            h,
            "<b>step {}</b> · <span class={}>{}</span> · reward {} · {:.1} ms (reward read {:.1} ms) · settle {}",
            info.step,
            if info.status == "ok" { "ok" } else { "fail" },
            esc(&info.status),
            step.reward,
            info.wall_ms,
            info.reward_ms,
            esc(&info.settle)
        );
        if let Some(error) = &info.error {
            let _ = write!(h, "<p class=fail>{}</p>", esc(error));
        }
        let action = serde_json::to_string(&info.action.actions).unwrap_or_default();
        let _ = write!(
            h,
            "<div>action ({}):</div><pre>{}</pre>",
            esc(&info.action.format),
            esc(&action)
        );
        if !info.marks.is_empty() {
            h.push_str("<table><tr><th>#</th><th>what</th><th>model px</th><th>screen CSS px</th><th>device px</th></tr>");
            for (i, m) in info.marks.iter().enumerate() {
                let _ = write!(
                    h,
                    "<tr><td>{}</td><td>{:?}</td><td>({}, {})</td><td>({:.2}, {:.2})</td><td>({:.2}, {:.2})</td></tr>",
                    i + 1,
                    m.kind,
                    m.model.0,
                    m.model.1,
                    m.screen.0,
                    m.screen.1,
                    m.device.0,
                    m.device.1
                );
            }
            h.push_str("</table>");
        }
        if !info.gates.is_empty() {
            h.push_str("<div>gates:</div><ul>");
            for g in &info.gates {
                let _ = write!(
                    h,
                    "<li class=gate-{}>{}{}: {}{}{}</li>",
                    esc(&g.decision),
                    esc(&g.decision),
                    g.rule
                        .as_deref()
                        .map(|r| format!(" ({})", esc(r)))
                        .unwrap_or_default(),
                    esc(&g.reason),
                    g.element
                        .as_deref()
                        .map(|el| format!(" — {}", esc(el)))
                        .unwrap_or_default(),
                    g.answer
                        .as_deref()
                        .map(|a| format!(" → <b>{}</b>", esc(a)))
                        .unwrap_or_default()
                );
            }
            h.push_str("</ul>");
        }
        timings(h, &info.timings_ms);
        let _ = write!(h, "<div>url: <code>{}</code></div>", esc(&info.url));
        h.push_str("</div></div>");
    }
    for (i, c) in e.code.iter().enumerate() {
        let _ = write!(
            h,
            "<div class=step><div class=meta><b>run {}</b> · {} · reward {} · {:.1} ms<pre>{}</pre><pre>{}</pre><div>checker:</div><pre>{}</pre></div></div>",
            i + 1,
            esc(&c.status),
            c.reward,
            c.wall_ms,
            esc(&c.observation.stdout),
            esc(&c.observation.stderr),
            esc(&c.checker)
        );
    }
    if let Some(uri) = e
        .trace
        .last()
        .and_then(|s| s.after.as_deref())
        .and_then(|f| data_uri(dir, f))
    {
        let _ = write!(
            h,
            "<div class=step><div class=shot><img alt=\"final screen\" src=\"{uri}\"></div><div class=meta><b>final screen</b></div></div>"
        );
    }
    h.push_str("</section>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A run of one episode whose one step asked and was approved: two engine runs.
    fn run(timings_ms: Value) -> RunResults {
        let percentiles = json!({"p50": 1.0, "p90": 1.0, "p99": 1.0, "max": 1.0});
        serde_json::from_value(json!({
            "suite": "s", "policy": "script", "jobs": 1,
            "summary": {"episodes": 1, "succeeded": 1, "errors": 0, "success_rate": 1.0,
                "mean_reward": 1.0, "mean_steps": 1.0, "step_ms": percentiles,
                "reward_ms": percentiles, "episode_ms": percentiles, "run_seconds": 1.0,
                "episodes_run": 1, "episodes_per_minute": 60.0},
            "episodes": [{"id": "t-s0", "task": "t", "seed": 0, "kind": "web", "prompt": "p",
                "reward": 1.0, "success": true, "steps": 1, "duration_ms": 1.0, "reset_ms": 1.0,
                "trace": [{"step": 1, "status": "ok", "action": {"actions": []}, "marks": [],
                    "gates": [], "screen_ops": [], "timings_ms": timings_ms, "wall_ms": 1.0,
                    "reward_ms": 0.0, "settle": "quiet", "url": "about:blank",
                    "truncated": false, "reward": 1.0}]}],
        }))
        .unwrap()
    }

    #[test]
    fn step_timings_are_a_table_not_a_line_of_json() {
        let asked = json!({"gate": 2.1, "act": 0.0, "settle": 0.0, "capture": 0.0, "total": 2.5});
        let resumed =
            json!({"gate": 0.4, "act": 3.0, "settle": 4.6, "capture": 43.2, "total": 51.2});
        let html = render(&run(json!([asked, resumed])), Path::new("/nonexistent"));
        assert!(!html.contains("&quot;gate&quot;"), "raw JSON in the report");
        let table = html
            .split("<table class=timings>")
            .nth(1)
            .and_then(|rest| rest.split("</table>").next())
            .expect("a timings table");
        assert!(
            table.starts_with(
                "<tr><th>run</th><th>gate</th><th>act</th><th>settle</th><th>capture</th>\
                 <th>total</th></tr>"
            ),
            "{table}"
        );
        assert!(
            table.contains("<tr><th>2</th><td>0.4</td><td>3.0</td><td>4.6</td>"),
            "{table}"
        );
        // One run: no run column. Long values anywhere in a card wrap instead of overflowing.
        let html = render(&run(resumed), Path::new("/nonexistent"));
        assert!(html.contains("<table class=timings><tr><th>gate</th>"));
        assert!(html.contains(".meta code, .meta td { overflow-wrap: anywhere; }"));
    }

    #[test]
    fn the_rate_cell_says_when_a_resume_ran_part_or_none_of_the_episodes() {
        let cell = |run: &RunResults| {
            let html = render(run, Path::new("/nonexistent"));
            let summary = html.split("<table id=summary>").nth(1).unwrap().to_owned();
            summary.split("</table>").next().unwrap().to_owned()
        };
        let mut all = run(json!([]));
        assert!(cell(&all).contains("<td>60</td>"), "{}", cell(&all));
        all.summary.episodes = 3;
        all.summary.episodes_per_minute = Some(30.0);
        assert!(cell(&all).contains("<td>30 (1 of 3 run this time)</td>"));
        all.summary.episodes_run = 0;
        all.summary.episodes_per_minute = None;
        assert!(cell(&all).contains("<td>— (none run this time)</td>"));
    }
}
