//! Steps over the MiniWoB-style page set in `benches/pages` (a script-animated dialog, an
//! autocomplete with a delayed sliding menu, CSS transitions, endless motion, and — when
//! `benches/peers` has its npm packages — a real jQuery UI dialog and autocomplete): per page,
//! the step time (p50, p99, max), how each step's settling ended, and how many steps took
//! longer than the session's settle timeout + 100 ms (target: none). A plain binary
//! (`harness = false`): `cargo bench -p cordon-computer --bench pageset`; `BENCH_ROUNDS`
//! sets how often each page's script runs (default 20).
//!
//! Needs Chromium: `sudo apt-get install -y chromium`.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "bench binary")]

use cordon_computer::browser::{Browser, BrowserOptions, DEFAULT_SETTLE_TIMEOUT, SessionOptions};
use cordon_computer::display::{DisplaySpec, Size};
use cordon_computer::gate::Rules;
use cordon_computer::image::ImageFormat;
use cordon_computer::{Computer, EngineOptions, SettleEnd, Status};
use cordon_protocol::computer::{Vendor, decode};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::Instant;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// Where the jQuery UI pages' libraries are installed (`npm install` in `benches/peers`).
fn vendor_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../benches/peers/node_modules")
}

/// The file a request path names: `NAME.html` from `dir`, or `/vendor/jquery…/…` (`.js`,
/// `.css`, `.png`) from [`vendor_dir`]; with its content type.
fn resolve(dir: &std::path::Path, path: &str) -> Option<(PathBuf, &'static str)> {
    let name = path.trim_start_matches('/');
    if name.contains("..") {
        return None;
    }
    if let Some(rest) = name.strip_prefix("vendor/") {
        if !(rest.starts_with("jquery/") || rest.starts_with("jquery-ui/")) {
            return None;
        }
        let kind = match rest.rsplit('.').next() {
            Some("js") => "text/javascript",
            Some("css") => "text/css",
            Some("png") => "image/png",
            _ => return None,
        };
        return Some((vendor_dir().join(rest), kind));
    }
    name.ends_with(".html")
        .then(|| (dir.join(name), "text/html"))
}

/// Serves `benches/pages/NAME` (and the jQuery UI pages' libraries) on 127.0.0.1.
async fn serve(dir: PathBuf) -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let dir = dir.clone();
            tokio::spawn(async move {
                let mut b = [0u8; 4096];
                let n = s.read(&mut b).await.unwrap_or(0);
                let req = String::from_utf8_lossy(&b[..n]);
                let path = req.split_whitespace().nth(1).unwrap_or("/").to_owned();
                let found = resolve(&dir, &path)
                    .and_then(|(file, kind)| Some((std::fs::read(file).ok()?, kind)));
                let (status, body, kind) = match found {
                    Some((body, kind)) => ("200 OK", body, kind),
                    None => ("404 Not Found", Vec::new(), "text/plain"),
                };
                let head = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = s.write_all(head.as_bytes()).await;
                let _ = s.write_all(&body).await;
            });
        }
    });
    format!("http://{addr}/")
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn click(x: i64, y: i64) -> Value {
    json!({"action": "left_click", "coordinate": [x, y]})
}

/// An autocomplete round: click the field at `field`, replace its text with "A", look, and
/// pick the suggestion at `pick`.
fn autocomplete((x, y): (i64, i64), pick: (i64, i64)) -> Vec<Value> {
    vec![
        click(x, y),
        json!({"action": "key", "text": "ctrl+a"}),
        json!({"action": "type", "text": "A"}),
        json!({"action": "screenshot"}),
        click(pick.0, pick.1),
    ]
}

/// One round of each page's script, in model pixels (1024×640 over 1280×800 CSS px).
fn script(page: &str) -> Vec<Value> {
    match page {
        "dialog.html" => vec![click(160, 104), click(616, 360)],
        "autocomplete.html" => autocomplete((200, 94), (200, 125)),
        "transitions.html" => vec![
            click(276, 50),
            click(140, 50),
            click(760, 96),
            click(760, 136),
        ],
        "jqui-dialog.html" => vec![click(160, 104), click(616, 368)],
        "jqui-autocomplete.html" => autocomplete((200, 92), (160, 118)),
        _ => vec![
            click(160, 184),
            click(200, 254),
            json!({"action": "type", "text": "x"}),
        ],
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../benches/pages");
    let base = serve(dir).await;
    let mut options = BrowserOptions::default();
    options.allow_private_network = true;
    options.no_sandbox = true;
    let browser = Browser::launch(options).await.expect("chromium");
    let limit = DEFAULT_SETTLE_TIMEOUT.as_secs_f64() * 1000.0 + 100.0;
    let mut worst = 0.0f64;
    let mut over_all = 0;
    let mut pages = vec![
        "dialog.html",
        "autocomplete.html",
        "transitions.html",
        "endless.html",
    ];
    if vendor_dir()
        .join("jquery-ui/dist/jquery-ui.min.js")
        .is_file()
    {
        pages.extend(["jqui-dialog.html", "jqui-autocomplete.html"]);
    } else {
        println!(
            "jQuery UI pages skipped: jQuery and jQuery UI are not installed \
             (cd benches/peers && npm install)"
        );
    }
    for page in pages {
        let mut o = SessionOptions::default();
        o.viewport = Size::new(1280, 800);
        o.display = DisplaySpec::Fixed {
            size: Size::new(1024, 640),
        };
        o.start_url = Some(format!("{base}{page}"));
        let opened = Instant::now();
        let session = browser.new_session(o).await.unwrap();
        let mut e = EngineOptions::default();
        e.rules = Rules::allow_all();
        e.format = ImageFormat::JPEG;
        let mut c = Computer::new(session, e);
        let first = c
            .step(
                decode(Vendor::Anthropic, &json!({"action": "screenshot"})).unwrap(),
                None,
            )
            .await
            .unwrap();
        let open_ms = opened.elapsed().as_secs_f64() * 1000.0;
        let mut times = Vec::new();
        let (mut quiet, mut stable, mut timeout, mut moving) = (0, 0, 0, 0);
        for _ in 0..rounds {
            for action in script(page) {
                let call = decode(Vendor::Anthropic, &action).unwrap();
                let t = Instant::now();
                let r = c.step(call, None).await.unwrap();
                times.push(t.elapsed().as_secs_f64() * 1000.0);
                assert_eq!(r.status, Status::Ok, "{page} {action}: {:?}", r.error);
                match r.settle {
                    SettleEnd::Quiet => quiet += 1,
                    SettleEnd::Stable => stable += 1,
                    SettleEnd::Moving => moving += 1,
                    _ => {
                        timeout += 1;
                        // Which step waited to the bound, to look into.
                        let ms = times.last().copied().unwrap_or_default();
                        println!("  {page}: {action} settled by timeout ({ms:.1} ms)");
                    }
                }
            }
        }
        let over = times.iter().filter(|&&t| t > limit).count();
        over_all += over;
        let max = times.iter().copied().fold(0.0, f64::max);
        worst = worst.max(max);
        println!(
            "{page}: {} steps, p50 {:.1} ms, p99 {:.1} ms, max {max:.1} ms; settle quiet {quiet}, \
             stable {stable}, timeout {timeout}, moving {moving}; over {limit:.0} ms: {over}; new session + first \
             screenshot {open_ms:.1} ms ({:?})",
            times.len(),
            pct(&mut times, 0.5),
            pct(&mut times, 0.99),
            first.settle,
        );
        c.into_backend().close().await.unwrap();
    }
    println!(
        "page set: slowest step {worst:.1} ms; steps over settle timeout + 100 ms ({limit:.0} ms): {over_all} (target 0)"
    );
    browser.close().await.unwrap();
}
