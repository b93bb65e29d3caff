//! `cordon replay`: re-run a recorded computer-use trajectory against a fresh session and
//! report where it diverges.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use cordon_computer::Computer;
use cordon_computer::trajectory;
use serde_json::json;

#[cfg(feature = "desktop")]
use crate::computer_session::desktop_options;
#[cfg(not(feature = "desktop"))]
use crate::computer_session::no_desktop;
use crate::computer_session::{SessionMeta, engine_options, launch, session_options};
use crate::terminal::print_json_line;

/// Re-run a recorded trajectory against a fresh session.
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// The trajectory directory (`session.json` + `steps.jsonl`).
    pub dir: PathBuf,
    /// The Xvfb binary (desktop trajectories).
    #[arg(long, value_name = "PATH", env = "CORDON_XVFB")]
    pub xvfb: Option<PathBuf>,
    /// Chromium binary.
    #[arg(long, value_name = "PATH", env = "CORDON_CHROMIUM")]
    pub chromium: Option<PathBuf>,
    /// Start Chromium without its own sandbox (required as root).
    #[arg(long)]
    pub no_browser_sandbox: bool,
}

/// `cordon replay DIR`.
pub async fn run(args: ReplayArgs) -> anyhow::Result<ExitCode> {
    let meta: SessionMeta = serde_json::from_value(trajectory::read_session(&args.dir)?)
        .with_context(|| format!("{}/session.json", args.dir.display()))?;
    let report = if let Some(d) = &meta.desktop {
        #[cfg(feature = "desktop")]
        {
            let opts = desktop_options(&meta, d, args.xvfb.as_deref());
            let session = cordon_computer::desktop::DesktopSession::start(opts).await?;
            let mut computer = Computer::new(session, engine_options(&meta));
            let report = trajectory::replay(&mut computer, &args.dir).await;
            computer.into_backend().close().await?;
            report?
        }
        #[cfg(not(feature = "desktop"))]
        {
            let _ = d;
            return Err(no_desktop());
        }
    } else {
        let browser = launch(args.chromium.as_deref(), false, args.no_browser_sandbox).await?;
        let result = async {
            let session = browser.new_session(session_options(&meta, None)).await?;
            let mut computer = Computer::new(session, engine_options(&meta));
            let report = trajectory::replay(&mut computer, &args.dir).await;
            computer.into_backend().close().await?;
            anyhow::Ok(report?)
        }
        .await;
        browser.close().await?;
        result?
    };
    for s in &report.steps {
        print_json_line(&json!(s))?;
    }
    print_json_line(
        &json!({"first_divergence": report.first_divergence, "steps": report.steps.len()}),
    )?;
    Ok(if report.first_divergence.is_some() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
