//! What `cordon bench --policy upstream` is told on the command line: which API and model,
//! which Anthropic computer tool, and how vendor safety checks are answered.

use anyhow::Context as _;
use clap::ValueEnum;
use cordon_agent_bench::task::Approvals;
use cordon_gateway::upstream::{Api, Credential};

/// Anthropic's computer tool versions bench can declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum ComputerTool {
    /// `computer_20251124` (with `enable_zoom` under `--enable-zoom`).
    #[value(name = "computer_20251124")]
    Computer20251124,
    /// `computer_toolset_20260801`: every action switched on by name in `configs` (`zoom`
    /// only under `--enable-zoom`).
    #[value(name = "computer_toolset_20260801")]
    Toolset20260801,
    /// `computer_20250124` (no `zoom`).
    #[value(name = "computer_20250124")]
    Computer20250124,
}

impl ComputerTool {
    /// The tool's `type`.
    pub fn kind(self) -> &'static str {
        match self {
            ComputerTool::Computer20251124 => "computer_20251124",
            ComputerTool::Toolset20260801 => "computer_toolset_20260801",
            ComputerTool::Computer20250124 => "computer_20250124",
        }
    }

    /// The `anthropic-beta` the API asks for with this tool (none is published for the
    /// toolset).
    pub(super) fn beta(self) -> Option<&'static str> {
        match self {
            ComputerTool::Computer20251124 => Some("computer-use-2025-11-24"),
            ComputerTool::Toolset20260801 => None,
            ComputerTool::Computer20250124 => Some("computer-use-2025-01-24"),
        }
    }
}

/// How an unattended run answers a vendor safety check (OpenAI `pending_safety_checks`,
/// Gemini `require_confirmation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SafetyChecks {
    /// The gate approves: the check is acknowledged to the model and the actions run.
    Approve,
    /// The gate denies: nothing of the call runs and the episode ends.
    Deny,
}

impl SafetyChecks {
    pub(super) fn approvals(self) -> Approvals {
        match self {
            SafetyChecks::Approve => Approvals::Approve,
            SafetyChecks::Deny => Approvals::Deny,
        }
    }
}

/// The dialect a run speaks, from `--upstream API=URL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DialectKind {
    Anthropic,
    OpenaiResponses,
    Gemini,
}

/// Everything an upstream episode needs besides the environment.
#[derive(Debug, Clone)]
pub(super) struct Settings {
    pub api: Api,
    pub dialect: DialectKind,
    pub url: String,
    pub key: Option<Credential>,
    pub model: String,
    pub computer_tool: ComputerTool,
    pub enable_zoom: bool,
    pub safety_checks: SafetyChecks,
}

impl Settings {
    /// Reads `--upstream API=URL` (its key from `CORDON_UPSTREAM_KEY`).
    pub(super) fn parse(
        spec: &str,
        model: &str,
        computer_tool: ComputerTool,
        enable_zoom: bool,
        safety_checks: SafetyChecks,
    ) -> anyhow::Result<Settings> {
        const USE: &str = "anthropic=URL, openai-responses=URL or gemini=URL";
        let (name, url) = spec
            .split_once('=')
            .with_context(|| format!("--upstream takes API=URL: {USE}"))?;
        let api = Api::parse(name)
            .with_context(|| format!("unknown upstream API {name:?}: give {USE}"))?;
        let dialect = match api {
            Api::Anthropic => DialectKind::Anthropic,
            Api::OpenaiResponses => DialectKind::OpenaiResponses,
            Api::Gemini => DialectKind::Gemini,
            _ => anyhow::bail!(
                "--upstream {name}: computer use needs the vendor's own computer tool, which \
                 {} has not; give {USE}",
                api.title()
            ),
        };
        if url.is_empty() {
            anyhow::bail!("--upstream {name}= needs the API's base URL");
        }
        if dialect != DialectKind::Anthropic && computer_tool != ComputerTool::Computer20251124 {
            anyhow::bail!("--computer-tool is Anthropic's; {name} has one computer tool");
        }
        Ok(Settings {
            api,
            dialect,
            url: url.to_owned(),
            key: std::env::var("CORDON_UPSTREAM_KEY").ok().map(Credential),
            model: model.to_owned(),
            computer_tool,
            enable_zoom,
            safety_checks,
        })
    }
}
