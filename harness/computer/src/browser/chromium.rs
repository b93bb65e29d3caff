//! Starting one Chromium process: its command-line flags, a fresh profile directory, and
//! the refusal to run it without its sandbox as root; plus the `/proc` checks on it.

use super::cdp::cdp;
use super::options::BrowserOptions;
use crate::error::{Error, Result};
use chromiumoxide::BrowserConfig;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub(super) static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Whether this process runs as root (Chromium's sandbox cannot).
pub fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
            .unwrap_or(false)
    })
}

/// Whether process `pid` still runs (not gone, not a zombie waiting to be reaped).
pub(super) fn process_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        // `pid (comm) state ...`; comm may contain spaces and parentheses.
        s.rsplit_once(") ")
            .and_then(|(_, rest)| rest.chars().next())
            .is_some_and(|state| !matches!(state, 'Z' | 'X'))
    })
}

/// Starts one Chromium process with a fresh profile directory.
pub(super) async fn spawn_chromium(
    opts: &BrowserOptions,
) -> Result<(
    chromiumoxide::Browser,
    chromiumoxide::Handler,
    PathBuf,
    Option<u32>,
)> {
    let user_data_dir = std::env::temp_dir().join(format!(
        "cordon-chromium-{}-{}",
        std::process::id(),
        NEXT_ID.fetch_add(1, Ordering::Relaxed)
    ));
    let mut builder = BrowserConfig::builder()
        .chrome_executable(&opts.executable)
        .user_data_dir(&user_data_dir)
        .viewport(None)
        .request_timeout(opts.request_timeout)
        .launch_timeout(Duration::from_secs(20))
        // chromiumoxide adds the leading `--` itself.
        .args([
            "disable-gpu",
            "disable-smooth-scrolling",
            "no-default-browser-check",
            "disable-extensions",
            "deny-permission-prompts",
            // WebRTC would otherwise send UDP (STUN, host candidates) around the session's
            // proxy, which carries TCP only.
            // (Debian's Chromium reads this switch; `force-webrtc-…` is not in it. The
            // headless shell reads only the `force-` one.)
            "webrtc-ip-handling-policy=disable_non_proxied_udp",
            "force-webrtc-ip-handling-policy=disable_non_proxied_udp",
            // Chromium's own traffic (component updates, QUIC probes, autofill field
            // lookups on form pages) would go through the session's proxy, be refused, and
            // show up in the step's text as refusals the page never asked for.
            // (chromiumoxide already passes disable-background-networking, disable-sync and
            // no-first-run; Chromium keeps the last `disable-features`, so TranslateUI,
            // chromiumoxide's own, is repeated.)
            "disable-component-update",
            "disable-quic",
            "disable-features=TranslateUI,AutofillServerCommunication,OptimizationHints,MediaRouter",
        ])
        .args(opts.extra_args.iter().map(String::as_str));
    if opts.uncapped_frames {
        builder = builder.args(["disable-gpu-vsync", "disable-frame-rate-limit"]);
    }
    if opts.draws_on_demand() {
        // Pages created with begin-frame control draw only on `beginFrame`; running every
        // compositor stage before the draw makes that frame hold the main frame's latest
        // state (the action's effects), not the previous commit.
        builder = builder.args([
            "enable-begin-frame-control",
            "run-all-compositor-stages-before-draw",
        ]);
    }
    if opts.no_sandbox {
        builder = builder.no_sandbox();
    } else if running_as_root() {
        return Err(Error::SandboxAsRoot);
    }
    let config = builder.build().map_err(Error::Config)?;
    let (mut browser, handler) = chromiumoxide::Browser::launch(config).await.map_err(cdp)?;
    let pid = browser.get_mut_child().and_then(|c| c.as_mut_inner().id());
    Ok((browser, handler, user_data_dir, pid))
}
