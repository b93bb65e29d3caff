//! Step overhead of the Chromium backend: click + settle + capture + scale + encode at a
//! 1280x800 viewport shown to the model as 1024x640, and new-session time (context, page,
//! first load, first screenshot). A plain binary (`harness = false`):
//! `cargo bench -p cordon-computer --bench step`; `BENCH_N` sets the sample count.
//!
//! In the same run, on the same page and the same Chromium, it drives the peers in
//! `benches/peers/browser.mjs` (raw Playwright, `@playwright/mcp --caps=vision`) and prints
//! the ratios. The peers need Node and `npm install` in `benches/peers` once; without them
//! that part is skipped with a note. `BENCH_PEERS=0` skips it too.
//!
//! Needs Chromium: `sudo apt-get install -y chromium chromium-headless-shell`. The first
//! configuration is Cordon's defaults: the headless shell where it is installed (frames
//! drawn on demand, at the display's scale), else plain `chromium`; plain `chromium` is
//! measured alongside.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "bench binary")]

use cordon_computer::browser::{Browser, BrowserOptions, CHROMIUM, SessionOptions};
use cordon_computer::display::{DisplaySpec, Size};
use cordon_computer::gate::Rules;
use cordon_computer::image::ImageFormat;
use cordon_computer::{Computer, EngineOptions, Status};
use cordon_protocol::computer::{Vendor, decode};
use std::path::PathBuf;
use std::time::Instant;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// The button toggles between yellow (odd clicks) and cyan (even clicks), so every
/// screenshot can be checked against the click count: a stale one shows the other colour.
const PAGE: &str = "<!doctype html><title>bench</title><script>window.n = 0</script><body style='margin:0'>\
<button id=b style='position:absolute;left:500px;top:300px;width:280px;height:200px;font:40px sans-serif' \
onclick='this.textContent = ++window.n; this.style.background = window.n % 2 ? \"#fc0\" : \"#0cf\"'>0</button>\
<p style='font:16px sans-serif;padding:20px'>Lorem ipsum dolor sit amet, consectetur adipiscing elit.</p></body>";

async fn serve() -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut b = [0u8; 4096];
                let _ = s.read(&mut b).await;
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    PAGE.len()
                );
                let _ = s.write_all(head.as_bytes()).await;
                let _ = s.write_all(PAGE.as_bytes()).await;
            });
        }
    });
    format!("http://{addr}/")
}

/// Whether `shot` shows the button in the colour `clicks` clicks give it (sampled at CSS
/// (520, 310), inside the button and clear of its text; model (416, 248) at 1024x640).
fn shows_clicks(shot: &cordon_computer::image::EncodedImage, clicks: usize) -> bool {
    let Ok(img) = image::load_from_memory(&shot.data) else {
        return false;
    };
    let img = img.into_rgb8();
    let (x, y) = (520 * img.width() / 1280, 310 * img.height() / 800);
    let [r, _, b] = img.get_pixel(x, y).0;
    if clicks % 2 == 1 {
        r > 200 && b < 100
    } else {
        b > 200 && r < 100
    }
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn opts(url: &str, dpr: f64) -> SessionOptions {
    let mut o = SessionOptions::default();
    o.viewport = Size::new(1280, 800);
    o.dpr = dpr;
    o.display = DisplaySpec::Fixed {
        size: Size::new(1024, 640),
    };
    o.start_url = Some(url.to_owned());
    o
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::var("BENCH_N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let url = serve().await;
    // The page lives on loopback: lift the private-network rule, as an operator would. The
    // bench may run as root (CI), where Chromium's sandbox cannot run: opt out explicitly.
    let mut base = BrowserOptions::default();
    base.allow_private_network = true;
    base.no_sandbox = true;
    let browser = Browser::launch(base.clone()).await.expect("chromium");
    println!("default browser: {}", base.executable.display());
    // Plain `chromium` (Chromium's own frame clock), when the default is another binary.
    let mut plain_opts = base.clone();
    plain_opts.executable = CHROMIUM.into();
    let plain = match base.executable == std::path::Path::new(CHROMIUM) {
        true => None,
        false => Some(Browser::launch(plain_opts.clone()).await.expect("chromium")),
    };
    let clock = plain.as_ref().unwrap_or(&browser);
    let mut uncapped_opts = plain_opts;
    uncapped_opts.uncapped_frames = true;
    let uncapped = Browser::launch(uncapped_opts).await.expect("chromium");
    let mut cordon_step = f64::NAN;
    let mut cordon_p99 = f64::NAN;
    let mut plain_step = (f64::NAN, f64::NAN);
    // (DPR, format, name, browser, screencast, render at the display's scale)
    let mut configs = vec![
        (
            1.0,
            ImageFormat::JPEG,
            "jpeg q80, dpr 1, defaults",
            &browser,
            false,
            true,
        ),
        (1.0, ImageFormat::Png, "png, dpr 1", &browser, false, true),
        (
            2.0,
            ImageFormat::JPEG,
            "jpeg q80, dpr 2",
            &browser,
            false,
            true,
        ),
    ];
    if base.draws_on_demand() {
        configs.push((
            1.0,
            ImageFormat::JPEG,
            "jpeg q80, dpr 1, render_at_display_scale off",
            &browser,
            false,
            false,
        ));
    }
    if plain.is_some() {
        configs.push((
            1.0,
            ImageFormat::JPEG,
            "jpeg q80, dpr 1, plain chromium",
            clock,
            false,
            true,
        ));
    }
    configs.extend([
        (
            1.0,
            ImageFormat::JPEG,
            "jpeg q80, dpr 1, plain chromium, screencast (opt-in)",
            clock,
            true,
            true,
        ),
        (
            1.0,
            ImageFormat::JPEG,
            "jpeg q80, dpr 1, plain chromium, uncapped_frames",
            &uncapped,
            false,
            true,
        ),
    ]);
    // Each configuration counts the screenshots that do not show its click (`stale`).
    for (dpr, format, name, b, screencast, at_display_scale) in configs {
        let mut o = opts(&url, dpr);
        o.screencast = screencast;
        o.render_at_display_scale = at_display_scale;
        let session = b.new_session(o).await.unwrap();
        let mut e = EngineOptions::default();
        e.rules = Rules::allow_all();
        e.format = format;
        let mut c = Computer::new(session, e);
        // button centre (640, 400) css → model (512, 320)
        let call = decode(
            Vendor::Anthropic,
            &serde_json::json!({"action": "left_click", "coordinate": [512, 320]}),
        )
        .unwrap();
        // The first configuration runs on a Chromium just launched (its start-up work
        // lands in the tail), the peers later on a warm one: a longer warm-up first.
        let warm_up = if cordon_step.is_nan() { 100 } else { 10 };
        let mut clicks = 0;
        let mut stale = 0;
        for _ in 0..warm_up {
            let r = c.step(call.clone(), None).await.unwrap();
            clicks += 1;
            stale += usize::from(
                !r.screenshot
                    .as_ref()
                    .is_some_and(|s| shows_clicks(s, clicks)),
            );
        }
        let mut total = Vec::with_capacity(n);
        let (mut act, mut settle, mut capture) = (Vec::new(), Vec::new(), Vec::new());
        let mut resized = 0;
        for _ in 0..n {
            let t = Instant::now();
            let r = c.step(call.clone(), None).await.unwrap();
            total.push(t.elapsed().as_secs_f64() * 1000.0);
            assert_eq!(r.status, Status::Ok);
            clicks += 1;
            stale += usize::from(
                !r.screenshot
                    .as_ref()
                    .is_some_and(|s| shows_clicks(s, clicks)),
            );
            act.push(r.timings_ms.act);
            settle.push(r.timings_ms.settle);
            capture.push(r.timings_ms.capture);
            resized += usize::from(r.screenshot.as_ref().is_some_and(|s| s.resized));
        }
        let p50 = pct(&mut total, 0.5);
        if dpr == 1.0 && format == ImageFormat::JPEG && cordon_step.is_nan() {
            cordon_step = p50;
            cordon_p99 = pct(&mut total, 0.99);
        }
        if name.ends_with("plain chromium") {
            plain_step = (p50, pct(&mut total, 0.99));
        }
        println!(
            "step (click+settle+capture+scale+encode) 1280x800 -> 1024x640, {name}: p50 {:.1} ms, p99 {:.1} ms \
             [act p50 {:.1}, settle p50 {:.1}, capture p50 {:.1}; resized {resized}/{n}; stale {stale}/{clicks}]",
            p50,
            pct(&mut total, 0.99),
            pct(&mut act, 0.5),
            pct(&mut settle, 0.5),
            pct(&mut capture, 0.5)
        );
        c.into_backend().close().await.unwrap();
    }
    uncapped.close().await.unwrap();
    if let Some(plain) = plain {
        plain.close().await.unwrap();
    }
    // A navigation step: every one opens a new connection (the page server closes each),
    // which goes through the session's SOCKS proxy (name check, resolution, address
    // check, relay). This is the step that pays for the proxy; a click step opens none.
    {
        let session = browser.new_session(opts(&url, 1.0)).await.unwrap();
        let mut e = EngineOptions::default();
        e.rules = Rules::allow_all();
        e.format = ImageFormat::JPEG;
        let mut c = Computer::new(session, e);
        let mut times = Vec::new();
        for i in 0..n.min(100) + 5 {
            let call = decode(
                Vendor::Gemini,
                &serde_json::json!({"name": "navigate", "args": {"url": format!("{url}?{i}")}}),
            )
            .unwrap();
            let t = Instant::now();
            let r = c.step(call, None).await.unwrap();
            assert_eq!(r.status, Status::Ok, "{:?}", r.error);
            if i >= 5 {
                times.push(t.elapsed().as_secs_f64() * 1000.0);
            }
        }
        println!(
            "navigation step (new connection through the session proxy + load + capture), jpeg q80, dpr 1: \
             p50 {:.1} ms, p99 {:.1} ms",
            pct(&mut times, 0.5),
            pct(&mut times, 0.99)
        );
        c.into_backend().close().await.unwrap();
    }
    // New isolated session: context + page + viewport + first navigation + first screenshot.
    let mut times = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let session = browser.new_session(opts(&url, 1.0)).await.unwrap();
        let mut e = EngineOptions::default();
        e.rules = Rules::allow_all();
        e.format = ImageFormat::JPEG;
        let mut c = Computer::new(session, e);
        let shot = decode(
            Vendor::Anthropic,
            &serde_json::json!({"action": "screenshot"}),
        )
        .unwrap();
        c.step(shot, None).await.unwrap();
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        c.into_backend().close().await.unwrap();
    }
    let cordon_session = pct(&mut times, 0.5);
    println!(
        "new session (context + page + load + first screenshot): p50 {:.1} ms, p99 {:.1} ms",
        cordon_session,
        pct(&mut times, 0.99)
    );
    browser.close().await.unwrap();
    // Sessions stepping at once: all on one thread (how the server ran them before its
    // sessions were `Send`), then each a task of the multi-threaded runtime.
    let sessions = 8;
    let steps = (n / 4).max(10);
    let one = concurrent_steps(&base, &url, 1, steps * 2, true).await;
    let local = {
        let (base, url) = (base.clone(), url.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(concurrent_steps(&base, &url, sessions, steps, false))
        })
        .join()
        .unwrap()
    };
    let spread = concurrent_steps(&base, &url, sessions, steps, true).await;
    println!(
        "{sessions} sessions stepping at once (jpeg, dpr 1): one session alone {one:.1} steps/s; \
         {sessions} on one thread {local:.1} steps/s ({:.2}x); {sessions} as tasks of the \
         multi-threaded runtime {spread:.1} steps/s ({:.2}x; target >= 1.7 on 2 cores)",
        local / one,
        spread / one
    );
    if std::env::var("BENCH_PEERS").is_ok_and(|v| v == "0") {
        return;
    }
    peers(&url, n, cordon_step, cordon_p99, cordon_session, plain_step).await;
}

/// Steps per second of `sessions` sessions (their own Chromium) clicking at once, each
/// `steps` times; `spawn`: each session is a task of its own, else all are polled by the
/// calling task.
async fn concurrent_steps(
    base: &BrowserOptions,
    url: &str,
    sessions: usize,
    steps: usize,
    spawn: bool,
) -> f64 {
    let browser = Browser::launch(base.clone()).await.expect("chromium");
    let call = decode(
        Vendor::Anthropic,
        &serde_json::json!({"action": "left_click", "coordinate": [512, 320]}),
    )
    .unwrap();
    let mut computers = Vec::new();
    for _ in 0..sessions {
        let session = browser.new_session(opts(url, 1.0)).await.unwrap();
        let mut e = EngineOptions::default();
        e.rules = Rules::allow_all();
        e.format = ImageFormat::JPEG;
        let mut c = Computer::new(session, e);
        for _ in 0..5 {
            c.step(call.clone(), None).await.unwrap();
        }
        computers.push(c);
    }
    let run = |mut c: Computer<cordon_computer::browser::BrowserSession>| {
        let call = call.clone();
        async move {
            for _ in 0..steps {
                let r = c.step(call.clone(), None).await.unwrap();
                assert_eq!(r.status, Status::Ok);
            }
            c
        }
    };
    let started = Instant::now();
    let done: Vec<_> = if spawn {
        let tasks: Vec<_> = computers
            .into_iter()
            .map(|c| tokio::spawn(run(c)))
            .collect();
        let mut done = Vec::new();
        for t in tasks {
            done.push(t.await.unwrap());
        }
        done
    } else {
        futures::future::join_all(computers.into_iter().map(run)).await
    };
    let rate = (sessions * steps) as f64 / started.elapsed().as_secs_f64();
    for c in done {
        c.into_backend().close().await.unwrap();
    }
    browser.close().await.unwrap();
    rate
}

/// Runs `benches/peers/browser.mjs` against the same page and prints the comparison.
async fn peers(
    url: &str,
    n: usize,
    cordon_step: f64,
    cordon_p99: f64,
    cordon_session: f64,
    (plain_step, plain_p99): (f64, f64),
) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../benches/peers");
    if !dir.join("node_modules/playwright-core").exists() {
        println!(
            "peers: skipped (run `npm install` in {} first; Node and Debian's chromium are used)",
            dir.display()
        );
        return;
    }
    let out = tokio::process::Command::new("node")
        .arg("browser.mjs")
        .arg(url)
        .arg(n.to_string())
        .current_dir(&dir)
        .kill_on_drop(true)
        .output()
        .await;
    let out = match out {
        Ok(o) if o.status.success() => o,
        Ok(o) => {
            println!(
                "peers: failed ({}): {}",
                o.status,
                String::from_utf8_lossy(&o.stderr)
            );
            return;
        }
        Err(e) => {
            println!("peers: could not run node: {e}");
            return;
        }
    };
    let mut playwright = f64::NAN;
    let mut playwright_session = f64::NAN;
    let mut mcp = f64::NAN;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let (peer, what) = (
            v["peer"].as_str().unwrap_or(""),
            v["what"].as_str().unwrap_or(""),
        );
        let (p50, p99) = (
            v["p50"].as_f64().unwrap_or(f64::NAN),
            v["p99"].as_f64().unwrap_or(f64::NAN),
        );
        println!(
            "peer {peer}, {what}: p50 {p50:.1} ms, p99 {p99:.1} ms (n {})",
            v["n"]
        );
        match (
            peer.starts_with("@playwright/mcp"),
            what.starts_with("new session"),
        ) {
            (true, _) => mcp = p50,
            (false, true) => playwright_session = p50,
            (false, false) => playwright = p50,
        }
    }
    println!(
        "ratio step Cordon / Playwright: {:.2} (target <= 0.6; {cordon_step:.1} / {playwright:.1} ms)",
        cordon_step / playwright
    );
    println!(
        "ratio step Cordon p99 / Playwright p50: {:.2} (target <= 1.0; {cordon_p99:.1} / {playwright:.1} ms)",
        cordon_p99 / playwright
    );
    if !plain_step.is_nan() {
        println!(
            "ratio step Cordon on plain chromium / Playwright: p50 {:.2}, p99 / Playwright p50 {:.2} \
             ({plain_step:.1} / {plain_p99:.1} / {playwright:.1} ms)",
            plain_step / playwright,
            plain_p99 / playwright
        );
    }
    println!(
        "ratio step @playwright/mcp / Cordon: {:.1}x (target >= 8; {mcp:.1} / {cordon_step:.1} ms)",
        mcp / cordon_step
    );
    println!(
        "ratio new session Cordon / Playwright: {:.2} ({cordon_session:.1} / {playwright_session:.1} ms)",
        cordon_session / playwright_session
    );
}
