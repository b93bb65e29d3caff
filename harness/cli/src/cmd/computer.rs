//! `cordon computer`: run a scripted action file in an isolated Chromium session, or with
//! `--desktop` on an isolated X display.

use anyhow::{Context as _, bail};
use cordon_computer::display::{DisplaySpec, Preset, Size};
use cordon_computer::gate::Rules;
use cordon_computer::image::ImageFormat;
use cordon_computer::origin::OriginPolicy;
use cordon_computer::trajectory::TrajectoryWriter;
use cordon_computer::{Backend, Computer, Status, StepReport};
use cordon_protocol::computer::{Vendor, decode};
use serde_json::{Value, json};
use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[cfg(feature = "desktop")]
use crate::computer_session::desktop_options;
#[cfg(not(feature = "desktop"))]
use crate::computer_session::no_desktop;
use crate::computer_session::{DesktopMeta, SessionMeta, engine_options, launch, session_options};
use crate::flags::origin_patterns;
use crate::terminal::{HOW_TO_SETTLE, ask_step, left_waiting, print_json_line};

/// Run a scripted computer-use session: one action per line of `--actions`, in the chosen
/// vendor's shape; prints one JSON line per step. Exits 1 when a step ended in `error` or
/// `denied` or was left waiting for an approval, 2 on a usage error.
#[derive(Debug, clap::Args)]
pub struct ComputerArgs {
    /// The page the session starts on.
    #[arg(long, required_unless_present = "desktop")]
    pub url: Option<String>,
    /// Drive an isolated X display (Xvfb) instead of a browser.
    #[arg(long, conflicts_with_all = ["url", "allow_origin", "block_origin", "downloads"])]
    pub desktop: bool,
    /// The X screen in pixels (desktop; default 1280x800).
    #[arg(long, value_name = "WxH")]
    pub screen: Option<String>,
    /// Bits per pixel of the X screen: 16 or 24 (desktop; default 24).
    #[arg(long)]
    pub depth: Option<u8>,
    /// A program to start in the display, e.g. `xterm -e 'cat > notes.txt'` (repeatable;
    /// desktop). Split like a shell would, run without one, with a clean environment.
    #[arg(long = "launch", value_name = "CMD")]
    pub launch: Vec<String>,
    /// The Xvfb binary (desktop).
    #[arg(long, value_name = "PATH", env = "CORDON_XVFB")]
    pub xvfb: Option<PathBuf>,
    /// Origins the session may reach (repeatable). None given: all but the blocked ones
    /// and private-network addresses (loopback, link-local, RFC 1918 …), which are
    /// reachable only when named here or with --allow-private-network.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origin: Vec<String>,
    /// Let the session reach private-network addresses (loopback, link-local, RFC 1918,
    /// CGNAT, unique-local …) without naming each origin.
    #[arg(long, conflicts_with = "desktop")]
    pub allow_private_network: bool,
    /// Start Chromium without its own sandbox. Required when running as root, where the
    /// sandbox cannot run (Cordon refuses to start Chromium as root otherwise).
    #[arg(long, conflicts_with = "desktop")]
    pub no_browser_sandbox: bool,
    /// Origins the session may never reach (repeatable).
    #[arg(long = "block-origin", value_name = "ORIGIN")]
    pub block_origin: Vec<String>,
    /// Model display size, e.g. 1024x768.
    #[arg(long, value_name = "WxH", conflicts_with_all = ["display_preset", "display_budget"])]
    pub display: Option<String>,
    /// Model display preset: xga (1024x768), wxga (1280x800), fwxga (1366x768).
    #[arg(long, value_name = "NAME", conflicts_with = "display_budget")]
    pub display_preset: Option<String>,
    /// Model display = the viewport (screen) scaled to a long edge <= 1568 px and <= 1.15 MP
    /// (default).
    #[arg(long)]
    pub display_budget: bool,
    /// Viewport in CSS pixels.
    #[arg(long, default_value = "1280x800", value_name = "WxH")]
    pub viewport: String,
    /// Device pixel ratio (1 or 2).
    #[arg(long, default_value_t = 1.0)]
    pub dpr: f64,
    /// Keep the page's devicePixelRatio exactly --dpr. By default a DPR-1 page shown scaled
    /// down (1280x800 as 1024x640) is drawn at the display's scale where frames are drawn
    /// on demand (quicker: one drawn frame is the screenshot) and reads that scale (0.8)
    /// as its devicePixelRatio.
    #[arg(long)]
    pub exact_dpr: bool,
    /// Shape of the lines in the actions file: anthropic | openai | gemini | native.
    #[arg(long, default_value = "anthropic")]
    pub format: String,
    /// Screenshot encoding: png | jpeg | jpeg:QUALITY.
    #[arg(long, default_value = "png")]
    pub image_format: String,
    /// Approval rules (JSON: {"rules": [...]}); default: ask before passwords, payment
    /// fields, submit/buy/pay/delete/send/transfer/confirm buttons and new origins; on a
    /// desktop, ask before Ctrl+Alt chords.
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
    /// Approve every `ask`. Without it or --deny-asks, an `ask` the script does not settle
    /// on its next line (`{"approve": "*"}`, `{"deny": "*"}`) is asked on the terminal, or,
    /// with none, left waiting (exit code 1).
    #[arg(long, conflicts_with = "deny_asks")]
    pub approve_all: bool,
    /// Deny every `ask`.
    #[arg(long)]
    pub deny_asks: bool,
    /// Record the trajectory here (JSONL + screenshots); default: a fresh temp directory,
    /// removed at exit (the printed screenshot paths last as long as the command runs).
    #[arg(long, value_name = "DIR")]
    pub trajectory: Option<PathBuf>,
    /// Allow downloads into this directory (refused otherwise).
    #[arg(long, value_name = "DIR")]
    pub downloads: Option<PathBuf>,
    /// A file the page's file choosers are answered with (repeatable; a single-file input
    /// gets the first). None given: every file chooser is refused.
    #[arg(long = "upload", value_name = "FILE", conflicts_with = "desktop")]
    pub uploads: Vec<PathBuf>,
    /// Let Chromium draw frames as soon as they are ready instead of at 60 Hz: each
    /// screenshot ~15 ms faster, but a page with a running animation burns a whole core.
    #[arg(long, conflicts_with = "desktop")]
    pub uncapped_frames: bool,
    /// Action script, one JSON action per line. `{"approve": "*"}` / `{"deny": "*"}` lines
    /// resolve a pending approval.
    #[arg(long, value_name = "FILE.jsonl")]
    pub actions: PathBuf,
    /// Chromium binary.
    #[arg(long, value_name = "PATH", env = "CORDON_CHROMIUM")]
    pub chromium: Option<PathBuf>,
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

/// Where the trajectory goes: the operator's `--trajectory`, kept, or a temporary directory
/// removed when this is dropped — at exit, on error paths too — so runs without
/// `--trajectory` leave nothing behind in the temp directory.
enum TrajectoryDir {
    Kept(PathBuf),
    Temporary(PathBuf),
}

impl TrajectoryDir {
    fn path(&self) -> &Path {
        match self {
            TrajectoryDir::Kept(dir) | TrajectoryDir::Temporary(dir) => dir,
        }
    }
}

impl Drop for TrajectoryDir {
    fn drop(&mut self) {
        if let TrajectoryDir::Temporary(dir) = self {
            // Best effort: a directory someone removed already is no error.
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// A new 0700 directory in the temp directory for a trajectory. Created here, never reused:
/// a name someone else made first in a shared /tmp is skipped, not written into.
fn fresh_temp_dir() -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt as _;
    let base = std::env::temp_dir();
    for n in 0..1000 {
        let dir = base.join(format!("cordon-computer-{}-{n}", std::process::id()));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(error) => return Err(error).with_context(|| format!("creating {}", dir.display())),
        }
    }
    bail!(
        "no free trajectory directory name in {}; pass --trajectory DIR",
        base.display()
    )
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
    let desktop = if args.desktop {
        let screen = args.screen.as_deref().unwrap_or("1280x800");
        Some(DesktopMeta {
            screen: Size::parse(screen)
                .with_context(|| format!("--screen {screen}: expected WxH"))?,
            depth: args.depth.unwrap_or(24),
            launch: args.launch.clone(),
        })
    } else {
        if !args.launch.is_empty() || args.screen.is_some() || args.depth.is_some() {
            bail!("--launch, --screen and --depth need --desktop");
        }
        None
    };
    let rules = match &args.rules {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            Rules::from_json(&text).with_context(|| format!("parsing {}", path.display()))?
        }
        #[cfg(feature = "desktop")]
        None if args.desktop => cordon_computer::desktop::default_rules(),
        None => Rules::default(),
    };
    let meta = SessionMeta {
        url: args.url.clone().unwrap_or_default(),
        viewport: desktop.as_ref().map_or(viewport, |d| d.screen),
        desktop,
        dpr: args.dpr,
        exact_dpr: args.exact_dpr,
        display: parse_display(&args)?,
        policy: OriginPolicy::new(
            origin_patterns(&args.allow_origin)?,
            origin_patterns(&args.block_origin)?,
        )
        .with_operator(&[], args.allow_private_network),
        image_format,
        rules: rules.clone(),
        vendor,
    };
    let dir = match &args.trajectory {
        Some(d) => TrajectoryDir::Kept(d.clone()),
        None => TrajectoryDir::Temporary(fresh_temp_dir()?),
    };
    let script = std::fs::File::open(&args.actions)
        .with_context(|| format!("opening {}", args.actions.display()))?;

    if let Some(d) = &meta.desktop {
        #[cfg(feature = "desktop")]
        {
            let opts = desktop_options(&meta, d, args.xvfb.as_deref());
            let session = cordon_computer::desktop::DesktopSession::start(opts).await?;
            let mut computer = Computer::new(session, engine_options(&meta));
            let result = drive(
                &mut computer,
                &meta,
                &args,
                dir.path(),
                script,
                program_events,
            )
            .await;
            computer.into_backend().close().await?;
            return result;
        }
        #[cfg(not(feature = "desktop"))]
        {
            let _ = d;
            return Err(no_desktop());
        }
    }
    for file in &args.uploads {
        anyhow::ensure!(
            file.is_file(),
            "--upload {}: not a readable file",
            file.display()
        );
    }
    let browser = launch(
        args.chromium.as_deref(),
        args.uncapped_frames,
        args.no_browser_sandbox,
    )
    .await?;
    let result = async {
        let mut opts = session_options(&meta, args.downloads.clone());
        opts.uploads = args
            .uploads
            .iter()
            .map(std::path::absolute)
            .collect::<Result<_, _>>()?;
        let session = browser.new_session(opts).await?;
        let mut computer = Computer::new(session, engine_options(&meta));
        let result = drive(&mut computer, &meta, &args, dir.path(), script, |_| {
            Vec::new()
        })
        .await;
        computer.into_backend().close().await?;
        result
    }
    .await;
    browser.close().await?;
    result
}

/// One line per launched program that exited since the last step. The program's log lives
/// in the session's directory, removed when the session closes: the line carries the
/// log's last lines (`output`) instead of its path.
#[cfg(feature = "desktop")]
fn program_events(session: &mut cordon_computer::desktop::DesktopSession) -> Vec<Value> {
    session
        .take_exits()
        .into_iter()
        .map(|p| {
            let mut program = json!(p);
            if let Some(fields) = program.as_object_mut() {
                fields.remove("log");
                fields.insert("output".into(), json!(log_tail(&p.log)));
            }
            json!({"event": "program_exited", "program": program})
        })
        .collect()
}

/// The last lines of a program's log (stdout and stderr), at most 20 lines or 4 KiB.
#[cfg(feature = "desktop")]
fn log_tail(path: &Path) -> String {
    const MAX_BYTES: usize = 4096;
    const MAX_LINES: usize = 20;
    let bytes = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes[bytes.len().saturating_sub(MAX_BYTES)..]);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(MAX_LINES)..].join("\n")
}

/// Runs the script against `computer`, printing a line per step (and whatever `events`
/// reports about the backend after each step).
async fn drive<B: Backend>(
    computer: &mut Computer<B>,
    meta: &SessionMeta,
    args: &ComputerArgs,
    dir: &Path,
    script: std::fs::File,
    mut events: impl FnMut(&mut B) -> Vec<Value>,
) -> anyhow::Result<ExitCode> {
    computer.record(TrajectoryWriter::create(dir, &serde_json::to_value(meta)?)?);
    let mut failed = false;
    let interactive = std::io::IsTerminal::is_terminal(&std::io::stderr());
    // The last step that asked, for the message when the script leaves it waiting.
    let mut waiting = None;
    let outcome = async {
        let mut lines = std::io::BufReader::new(script).lines().enumerate().peekable();
        while let Some((n, text)) = lines.next() {
            let text = text?;
            if text.trim().is_empty() {
                continue;
            }
            let value: Value = match serde_json::from_str(&text) {
                Ok(v) => v,
                Err(e) => {
                    failed = true;
                    print_json_line(&json!({"line": n + 1, "status": "error", "error": format!("not JSON: {e}")}))?;
                    continue;
                }
            };
            let mut report = if let Some(r) = resolution(&value) {
                let Some(id) = computer.pending_id().map(str::to_owned) else {
                    failed = true;
                    print_json_line(&json!({"line": n + 1, "status": "error", "error": "no approval is pending"}))?;
                    continue;
                };
                if r { computer.approve(&id).await? } else { computer.deny(&id).await? }
            } else {
                let was_waiting = computer.pending_id().is_some();
                match decode(meta.vendor, &value) {
                    Ok(call) => {
                        let mut report = computer.step(call, Some(&value)).await?;
                        if was_waiting && report.status == Status::Error {
                            // The engine says "approve or deny it first": say how.
                            if let Some(error) = &mut report.error {
                                error.push_str("; ");
                                error.push_str(HOW_TO_SETTLE);
                            }
                        }
                        report
                    }
                    Err(e) => {
                        failed = true;
                        print_json_line(&json!({"line": n + 1, "status": "error", "error": e.to_string()}))?;
                        continue;
                    }
                }
            };
            print_json_line(&line(&report, dir))?;
            for event in events(computer.backend_mut()) {
                print_json_line(&event)?;
            }
            // --approve-all / --deny-asks settle asks here; otherwise the script may.
            while report.status == Status::ApprovalRequired && (args.approve_all || args.deny_asks) {
                let id = report.pending.as_ref().map(|p| p.id.clone()).unwrap_or_default();
                report = if args.approve_all {
                    computer.approve(&id).await?
                } else {
                    computer.deny(&id).await?
                };
                print_json_line(&line(&report, dir))?;
            }
            // Otherwise a person on the terminal settles what the script does not.
            while report.status == Status::ApprovalRequired && !settled_next(&mut lines) {
                let Some(pending) = report.pending.clone() else { break };
                let Some(approve) =
                    ask_step(report.step, &pending, interactive).await
                else {
                    break;
                };
                report = if approve {
                    computer.approve(&pending.id).await?
                } else {
                    computer.deny(&pending.id).await?
                };
                print_json_line(&line(&report, dir))?;
            }
            failed |= matches!(report.status, Status::Error | Status::Denied);
            if let Some(pending) = &report.pending {
                waiting = Some((report.step, pending.clone()));
            }
        }
        // A step left waiting did not run: not a success, and the operator is told how
        // to settle it next time.
        if computer.pending_id().is_some()
            && let Some((step, pending)) = &waiting
        {
            failed = true;
            eprintln!("{}", left_waiting(*step, pending));
        }
        anyhow::Ok(())
    }
    .await;
    outcome?;
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Whether the script's next non-empty line settles an approval (`{"approve": ...}` or
/// `{"deny": ...}`); blank lines before it are consumed.
fn settled_next<I>(lines: &mut std::iter::Peekable<I>) -> bool
where
    I: Iterator<Item = (usize, std::io::Result<String>)>,
{
    while let Some((_, Ok(text))) = lines.peek() {
        if !text.trim().is_empty() {
            return serde_json::from_str::<Value>(text)
                .ok()
                .and_then(|value| resolution(&value))
                .is_some();
        }
        lines.next();
    }
    false
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
