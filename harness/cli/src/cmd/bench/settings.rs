//! What `cordon bench` records of its command line in RUN_DIR/run.json (`settings`), so
//! that `--resume RUN_DIR` continues a run as it was started: the same episodes (tasks
//! and seeds), on the same servers, under the same model. Secrets (the token, the
//! upstream key) are never recorded; they come from the environment again.

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

use super::args::BenchArgs;

/// The recorded part of a run's command line. A field the resuming command line gives
/// wins; one it leaves out is the run's own.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(super) struct RunSettings {
    seeds: Vec<u64>,
    tasks: Vec<String>,
    remote: Vec<String>,
    upstream: Option<String>,
    model: Option<String>,
    computer_tool: Option<String>,
    enable_zoom: Option<bool>,
    safety_checks: Option<String>,
}

impl RunSettings {
    /// What `args` says.
    pub(super) fn of(args: &BenchArgs) -> RunSettings {
        RunSettings {
            seeds: args.seeds.clone(),
            tasks: args.tasks.clone(),
            remote: args.remote.clone(),
            upstream: args.upstream.clone(),
            model: args.model.clone(),
            computer_tool: args.computer_tool.map(value_name),
            enable_zoom: args.enable_zoom,
            safety_checks: args.safety_checks.map(value_name),
        }
    }

    /// The settings a run recorded in its `run.json` (none in a run from before they
    /// were recorded).
    pub(super) fn recorded(run_json: &serde_json::Value) -> anyhow::Result<RunSettings> {
        match run_json.get("settings") {
            None | Some(serde_json::Value::Null) => Ok(RunSettings::default()),
            Some(v) => serde_json::from_value(v.clone())
                .map_err(|e| anyhow::anyhow!("run.json: settings: {e}")),
        }
    }

    /// Fills what `args` leaves out from these settings.
    pub(super) fn fill(self, args: &mut BenchArgs) -> anyhow::Result<()> {
        if args.seeds.is_empty() {
            args.seeds = self.seeds;
        }
        if args.tasks.is_empty() {
            args.tasks = self.tasks;
        }
        if args.remote.is_empty() && !args.local {
            args.remote = self.remote;
        }
        args.upstream = args.upstream.take().or(self.upstream);
        args.model = args.model.take().or(self.model);
        args.enable_zoom = args.enable_zoom.or(self.enable_zoom);
        if args.computer_tool.is_none() {
            args.computer_tool = self.computer_tool.as_deref().map(parse).transpose()?;
        }
        if args.safety_checks.is_none() {
            args.safety_checks = self.safety_checks.as_deref().map(parse).transpose()?;
        }
        Ok(())
    }

    pub(super) fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// The name the command line gives `v` by.
fn value_name<V: ValueEnum>(v: V) -> String {
    v.to_possible_value()
        .map(|p| p.get_name().to_owned())
        .unwrap_or_default()
}

fn parse<V: ValueEnum>(name: &str) -> anyhow::Result<V> {
    V::from_str(name, false)
        .map_err(|_| anyhow::anyhow!("run.json: settings: unknown value {name:?}"))
}

#[cfg(test)]
mod tests {
    use super::super::policies::{ComputerTool, SafetyChecks};
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }

    fn args(line: &[&str]) -> BenchArgs {
        Cli::parse_from(std::iter::once("bench").chain(line.iter().copied())).bench
    }

    #[test]
    fn a_resume_continues_with_the_runs_settings_unless_told_otherwise() {
        let started = args(&[
            "--out",
            "r",
            "--seeds",
            "3,4",
            "--task",
            "a",
            "--remote",
            "http://127.0.0.1:1",
            "--upstream",
            "gemini=http://127.0.0.1:2",
            "--model",
            "m",
            "--computer-tool",
            "computer_toolset_20260801",
            "--enable-zoom",
            "--safety-checks",
            "approve",
        ]);
        let recorded = RunSettings::of(&started);
        // Through run.json and back.
        let json = serde_json::json!({"suite": "builtin", "settings": recorded.to_json()});
        let read = RunSettings::recorded(&json).unwrap();
        assert_eq!(read, recorded);

        let mut resumed = args(&["--resume", "r"]);
        read.clone().fill(&mut resumed).unwrap();
        assert_eq!(RunSettings::of(&resumed), recorded);

        // What the resuming line gives wins.
        let mut resumed = args(&["--resume", "r", "--model", "other", "--seeds", "9"]);
        read.fill(&mut resumed).unwrap();
        assert_eq!(resumed.model.as_deref(), Some("other"));
        assert_eq!(resumed.seeds, [9]);
        assert_eq!(resumed.remote, ["http://127.0.0.1:1"]);
        assert_eq!(resumed.safety_checks, Some(SafetyChecks::Approve));
        assert_eq!(resumed.computer_tool, Some(ComputerTool::Toolset20260801));
        assert_eq!(resumed.enable_zoom, Some(true));

        // Recorded servers and zoom can be turned off.
        let mut resumed = args(&["--resume", "r", "--local", "--enable-zoom=false"]);
        RunSettings::recorded(&json)
            .unwrap()
            .fill(&mut resumed)
            .unwrap();
        assert!(resumed.remote.is_empty());
        assert_eq!(resumed.enable_zoom, Some(false));
    }

    #[test]
    fn a_run_from_before_settings_were_recorded_resumes_on_defaults() {
        let read = RunSettings::recorded(&serde_json::json!({"suite": "builtin"})).unwrap();
        assert_eq!(read, RunSettings::default());
        let bad = serde_json::json!({"settings": {"safety_checks": "maybe"}});
        let mut resumed = args(&["--resume", "r"]);
        let err = RunSettings::recorded(&bad)
            .unwrap()
            .fill(&mut resumed)
            .unwrap_err();
        assert!(err.to_string().contains("maybe"), "{err}");
    }
}
