//! `cordon computer` (run a scripted action file in an isolated Chromium session) and
//! `cordon replay` (re-run a recorded trajectory and report where it diverges).

use anyhow::{Context as _, bail};
use cordon_computer::browser::{Browser, BrowserOptions, SessionOptions};
use cordon_computer::display::{DisplaySpec, Preset, Size};
use cordon_computer::gate::Rules;
use cordon_computer::image::ImageFormat;
use cordon_computer::origin::{OriginPattern, OriginPolicy};
use cordon_computer::trajectory::{self, TrajectoryWriter};
use cordon_computer::{Computer, EngineOptions, Status, StepReport};
use cordon_protocol::computer::{Vendor, decode};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::io::{BufRead as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Run a scripted computer-use session: one action per line of `--actions`, in the chosen
/// vendor's shape; prints one JSON line per step.
#[derive(Debug, clap::Args)]
pub struct ComputerArgs {
    /// The page the session starts on.
    #[arg(long)]
    pub url: String,
    /// Origins the session may reach (repeatable). None given: all but the blocked ones.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origin: Vec<String>,
    /// Origins the session may never reach (repeatable).
    #[arg(long = "block-origin", value_name = "ORIGIN")]
    pub block_origin: Vec<String>,
    /// Model display size, e.g. 1024x768.
    #[arg(long, value_name = "WxH", conflicts_with_all = ["display_preset", "display_budget"])]
    pub display: Option<String>,
    /// Model display preset: xga (1024x768), wxga (1280x800), fwxga (1366x768).
    #[arg(long, value_name = "NAME", conflicts_with = "display_budget")]
    pub display_preset: Option<String>,
    /// Model display = the viewport scaled to a long edge <= 1568 px and <= 1.15 MP (default).
    #[arg(long)]
    pub display_budget: bool,
    /// Viewport in CSS pixels.
    #[arg(long, default_value = "1280x800", value_name = "WxH")]
    pub viewport: String,
    /// Device pixel ratio (1 or 2).
    #[arg(long, default_value_t = 1.0)]
    pub dpr: f64,
    /// Shape of the lines in the actions file: anthropic | openai | gemini | native.
    #[arg(long, default_value = "anthropic")]
    pub format: String,
    /// Screenshot encoding: png | jpeg | jpeg:QUALITY.
    #[arg(long, default_value = "png")]
    pub image_format: String,
    /// Approval rules (JSON: {"rules": [...]}); default: ask before passwords, payment
    /// fields, submit/buy/pay/delete/send/transfer/confirm buttons and new origins.
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
    /// Approve every `ask`.
    #[arg(long, conflicts_with = "deny_asks")]
    pub approve_all: bool,
    /// Deny every `ask`.
    #[arg(long)]
    pub deny_asks: bool,
    /// Record the trajectory here (JSONL + screenshots); default: a fresh temp directory.
    #[arg(long, value_name = "DIR")]
    pub trajectory: Option<PathBuf>,
    /// Allow downloads into this directory (refused otherwise).
    #[arg(long, value_name = "DIR")]
    pub downloads: Option<PathBuf>,
    /// Action script, one JSON action per line. `{"approve": "*"}` / `{"deny": "*"}` lines
    /// resolve a pending approval.
    #[arg(long, value_name = "FILE.jsonl")]
    pub actions: PathBuf,
    /// Chromium binary.
    #[arg(long, value_name = "PATH", env = "CORDON_CHROMIUM")]
    pub chromium: Option<PathBuf>,
}

/// Re-run a recorded trajectory against a fresh session.
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// The trajectory directory (`session.json` + `steps.jsonl`).
    pub dir: PathBuf,
    /// Chromium binary.
    #[arg(long, value_name = "PATH", env = "CORDON_CHROMIUM")]
    pub chromium: Option<PathBuf>,
}

/// Everything needed to set the session up again (`session.json`).
#[derive(Debug, Serialize, Deserialize)]
struct SessionMeta {
    url: String,
    viewport: Size,
    dpr: f64,
    display: DisplaySpec,
    policy: OriginPolicy,
    image_format: ImageFormat,
    rules: Rules,
    vendor: Vendor,
}

fn parse_display(args: &ComputerArgs) -> anyhow::Result<DisplaySpec> {
    if let Some(d) = &args.display {
        let size = Size::parse(d).with_context(|| format!("--display {d}: expected WxH"))?;
        return Ok(DisplaySpec::Fixed { size });
    }
    if let Some(p) = &args.display_preset {
        let preset =
            Preset::parse(p).with_context(|| format!("--display-preset {p}: xga|wxga|fwxga"))?;
        return Ok(DisplaySpec::Preset { preset });
    }
    Ok(DisplaySpec::DEFAULT_BUDGET)
}

fn patterns(list: &[String]) -> anyhow::Result<Vec<OriginPattern>> {
    list.iter()
        .map(|o| OriginPattern::parse(o).map_err(anyhow::Error::msg))
        .collect()
}

async fn launch(chromium: Option<&Path>) -> anyhow::Result<Browser> {
    let mut opts = BrowserOptions::default();
    if let Some(p) = chromium {
        opts = opts.executable(p);
    }
    Ok(Browser::launch(opts).await?)
}

fn session_options(meta: &SessionMeta, downloads: Option<PathBuf>) -> SessionOptions {
    let mut o = SessionOptions::default();
    o.viewport = meta.viewport;
    o.dpr = meta.dpr;
    o.display = meta.display;
    o.policy = meta.policy.clone();
    o.start_url = Some(meta.url.clone());
    o.downloads = downloads;
    o
}

fn line(report: &StepReport, dir: &Path) -> Value {
    let mut v = json!({
        "step": report.step,
        "status": report.status,
        "error": report.error,
        "current_url": report.current_url,
        "timings_ms": report.timings_ms,
    });
    if let Some(img) = &report.screenshot {
        let name = format!("step-{:04}.{}", report.step, img.format.extension());
        v["screenshot"] = json!({
            "path": dir.join(name), "width": img.size.width, "height": img.size.height,
        });
    }
    if let Some(p) = &report.pending {
        v["pending"] = json!(p);
    }
    if let Some(t) = &report.text {
        v["text"] = json!(t);
    }
    v
}

fn print(v: &Value) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{v}")?;
    out.flush()?;
    Ok(())
}

/// `cordon computer`.
pub async fn run(args: ComputerArgs) -> anyhow::Result<ExitCode> {
    let vendor = Vendor::parse(&args.format)
        .with_context(|| format!("--format {}: anthropic|openai|gemini|native", args.format))?;
    let viewport = Size::parse(&args.viewport)
        .with_context(|| format!("--viewport {}: expected WxH", args.viewport))?;
    if args.dpr != 1.0 && args.dpr != 2.0 {
        bail!("--dpr must be 1 or 2");
    }
    let image_format = ImageFormat::parse(&args.image_format)
        .with_context(|| format!("--image-format {}: png|jpeg[:Q]", args.image_format))?;
    let rules = match &args.rules {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            Rules::from_json(&text).with_context(|| format!("parsing {}", path.display()))?
        }
        None => Rules::default(),
    };
    let meta = SessionMeta {
        url: args.url.clone(),
        viewport,
        dpr: args.dpr,
        display: parse_display(&args)?,
        policy: OriginPolicy::new(patterns(&args.allow_origin)?, patterns(&args.block_origin)?),
        image_format,
        rules: rules.clone(),
        vendor,
    };
    let dir = match &args.trajectory {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("cordon-computer-{}", std::process::id())),
    };
    let script = std::fs::File::open(&args.actions)
        .with_context(|| format!("opening {}", args.actions.display()))?;

    let browser = launch(args.chromium.as_deref()).await?;
    let result = drive(&browser, &meta, &args, &dir, script).await;
    browser.close().await?;
    result
}

async fn drive(
    browser: &Browser,
    meta: &SessionMeta,
    args: &ComputerArgs,
    dir: &Path,
    script: std::fs::File,
) -> anyhow::Result<ExitCode> {
    let session = browser
        .new_session(session_options(meta, args.downloads.clone()))
        .await?;
    let mut engine = EngineOptions::default();
    engine.rules = meta.rules.clone();
    engine.format = meta.image_format;
    let mut computer = Computer::new(session, engine);
    computer.record(TrajectoryWriter::create(dir, &serde_json::to_value(meta)?)?);
    let mut failed = false;
    let outcome = async {
        for (n, text) in std::io::BufReader::new(script).lines().enumerate() {
            let text = text?;
            if text.trim().is_empty() {
                continue;
            }
            let value: Value = match serde_json::from_str(&text) {
                Ok(v) => v,
                Err(e) => {
                    failed = true;
                    print(&json!({"line": n + 1, "status": "error", "error": format!("not JSON: {e}")}))?;
                    continue;
                }
            };
            let mut report = if let Some(r) = resolution(&value) {
                let Some(id) = computer.pending_id().map(str::to_owned) else {
                    failed = true;
                    print(&json!({"line": n + 1, "status": "error", "error": "no approval is pending"}))?;
                    continue;
                };
                if r { computer.approve(&id).await? } else { computer.deny(&id).await? }
            } else {
                match decode(meta.vendor, &value) {
                    Ok(call) => computer.step(call, Some(&value)).await?,
                    Err(e) => {
                        failed = true;
                        print(&json!({"line": n + 1, "status": "error", "error": e.to_string()}))?;
                        continue;
                    }
                }
            };
            print(&line(&report, dir))?;
            // --approve-all / --deny-asks settle asks here; otherwise the script may.
            while report.status == Status::ApprovalRequired && (args.approve_all || args.deny_asks) {
                let id = report.pending.as_ref().map(|p| p.id.clone()).unwrap_or_default();
                report = if args.approve_all {
                    computer.approve(&id).await?
                } else {
                    computer.deny(&id).await?
                };
                print(&line(&report, dir))?;
            }
            failed |= matches!(report.status, Status::Error | Status::Denied);
        }
        anyhow::Ok(())
    }
    .await;
    computer.into_backend().close().await?;
    outcome?;
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// `{"approve": ...}` → Some(true), `{"deny": ...}` → Some(false).
fn resolution(v: &Value) -> Option<bool> {
    let o = v.as_object()?;
    if o.len() != 1 {
        return None;
    }
    if o.contains_key("approve") {
        Some(true)
    } else if o.contains_key("deny") {
        Some(false)
    } else {
        None
    }
}

/// `cordon replay DIR`.
pub async fn replay(args: ReplayArgs) -> anyhow::Result<ExitCode> {
    let meta: SessionMeta = serde_json::from_value(trajectory::read_session(&args.dir)?)
        .with_context(|| format!("{}/session.json", args.dir.display()))?;
    let browser = launch(args.chromium.as_deref()).await?;
    let result = async {
        let session = browser.new_session(session_options(&meta, None)).await?;
        let mut engine = EngineOptions::default();
        engine.rules = meta.rules.clone();
        engine.format = meta.image_format;
        let mut computer = Computer::new(session, engine);
        let report = trajectory::replay(&mut computer, &args.dir).await;
        computer.into_backend().close().await?;
        anyhow::Ok(report?)
    }
    .await;
    browser.close().await?;
    let report = result?;
    for s in &report.steps {
        print(&json!(s))?;
    }
    print(&json!({"first_divergence": report.first_divergence, "steps": report.steps.len()}))?;
    Ok(if report.first_divergence.is_some() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
