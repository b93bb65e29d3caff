//! Flag groups and value parsers that several subcommands share: the limits of the
//! commands that run code, Chromium's settings of `serve` and `mcp`, `--connect-policy`
//! and origin patterns.

use anyhow::Context as _;
use cordon_computer::browser::BrowserOptions;
use cordon_computer::origin::OriginPattern;
use cordon_protocol::execution::Limits;
use cordon_protocol::tool::Policy;

/// Limit options shared by the commands that run code.
#[derive(Debug, Clone, clap::Args)]
pub struct LimitArgs {
    /// Guest memory limit, MiB [default: 256].
    #[arg(long, value_name = "N")]
    pub memory_mb: Option<u64>,
    /// CPU time limit, ms [default: 10000].
    #[arg(long, value_name = "N")]
    pub cpu_ms: Option<u64>,
    /// Wall time limit, ms, not counting waits for client tools [default: 30000].
    #[arg(long, value_name = "N")]
    pub timeout_ms: Option<u64>,
    /// stdout + stderr + result size limit, bytes [default: 1048576].
    #[arg(long, value_name = "N")]
    pub max_output_bytes: Option<u64>,
    /// Tool calls per execution [default: 1000].
    #[arg(long, value_name = "N")]
    pub max_tool_calls: Option<u64>,
    /// Size of one tool input or result, bytes [default: 1048576].
    #[arg(long, value_name = "N")]
    pub max_payload_bytes: Option<u64>,
    /// Bytes the workspace (`/workspace`) may hold [default: 67108864].
    #[arg(long, value_name = "N")]
    pub workspace_bytes: Option<u64>,
    /// Files and directories the workspace may hold [default: 1000].
    #[arg(long, value_name = "N")]
    pub workspace_files: Option<u64>,
}

impl LimitArgs {
    /// The limits, defaults filled in.
    pub fn limits(&self) -> Limits {
        let mut limits = Limits::default();
        if let Some(mb) = self.memory_mb {
            limits.memory_bytes = mb.saturating_mul(1 << 20);
        }
        if let Some(ms) = self.cpu_ms {
            limits.cpu_ms = ms;
        }
        if let Some(ms) = self.timeout_ms {
            limits.wall_ms = ms;
        }
        if let Some(bytes) = self.max_output_bytes {
            limits.max_output_bytes = bytes;
        }
        if let Some(count) = self.max_tool_calls {
            limits.max_tool_calls = count;
        }
        if let Some(bytes) = self.max_payload_bytes {
            limits.max_payload_bytes = bytes;
        }
        if let Some(bytes) = self.workspace_bytes {
            limits.workspace_bytes = bytes;
        }
        if let Some(count) = self.workspace_files {
            limits.workspace_files = count;
        }
        limits
    }
}

/// Chromium's settings shared by `cordon serve` and `cordon mcp`: what computer sessions
/// may reach beyond their own policy, and Chromium's sandbox.
#[derive(Debug, clap::Args)]
pub struct BrowserFlags {
    /// Let computer sessions reach ORIGIN although it is on a private network (loopback,
    /// link-local, RFC 1918, CGNAT, unique-local …), which they may not by default; judged
    /// on the address a name resolves to (repeatable).
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origin: Vec<String>,
    /// Let computer sessions reach every private-network address.
    #[arg(long)]
    pub allow_private_network: bool,
    /// Start Chromium without its own sandbox. Required when running as root, where the
    /// sandbox cannot run (Cordon refuses to start Chromium as root otherwise).
    #[arg(long)]
    pub no_browser_sandbox: bool,
}

impl BrowserFlags {
    /// `options` with these flags applied.
    pub fn apply(&self, mut options: BrowserOptions) -> anyhow::Result<BrowserOptions> {
        options.allow_origins = origin_patterns(&self.allow_origin).context("--allow-origin")?;
        options.allow_private_network = self.allow_private_network;
        options.no_sandbox = self.no_browser_sandbox;
        Ok(options)
    }
}

/// Parses origin patterns (`--allow-origin`, `--block-origin`).
pub fn origin_patterns(list: &[String]) -> anyhow::Result<Vec<OriginPattern>> {
    list.iter()
        .map(|o| OriginPattern::parse(o).map_err(anyhow::Error::msg))
        .collect()
}

/// Parses `--connect-policy NAME=allow|ask|deny`.
pub fn parse_connect_policy(text: &str) -> Result<(String, Policy), String> {
    let Some((name, policy)) = text.split_once('=') else {
        return Err(format!(
            "{text:?}: expected NAME=POLICY, e.g. --connect-policy files=ask"
        ));
    };
    let policy = match policy.trim() {
        "allow" => Policy::Allow,
        "ask" => Policy::Ask,
        "deny" => Policy::Deny,
        other => {
            return Err(format!("{other:?}: the policy must be allow, ask or deny"));
        }
    };
    Ok((name.trim().to_owned(), policy))
}
