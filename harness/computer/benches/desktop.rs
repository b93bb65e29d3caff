//! Step overhead of the desktop backend: click + settle + capture + scale + encode on a
//! 1280×800 Xvfb screen shown to the model as 1024×640, the same step done the reference
//! way (`xdotool` + an external screenshot + ImageMagick resize, as Anthropic's reference
//! computer-use tool does it, minus its 2 s sleep) on the same display in the same run, and
//! session start (Xvfb up + first screenshot). A plain binary (`harness = false`):
//!
//! ```sh
//! cargo bench -p cordon-computer --features desktop --bench desktop
//! ```
//!
//! `BENCH_N` sets the sample count of Cordon's step (200), `BENCH_N_REF` the reference's
//! (40). Needs `xvfb` and `xterm`; the reference part needs `xdotool` and ImageMagick
//! (`import`, `convert`) and is skipped with a note without them.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "bench binary")]

use cordon_computer::desktop::{DesktopOptions, DesktopSession};
use cordon_computer::display::{DisplaySpec, Size};
use cordon_computer::gate::Rules;
use cordon_computer::image::ImageFormat;
use cordon_computer::{Computer, EngineOptions, Status};
use cordon_protocol::computer::{ComputerCall, Vendor, decode};
use std::process::{Command, Stdio};
use std::time::Instant;

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn env_n(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn opts(launch: &[&str]) -> DesktopOptions {
    let mut o = DesktopOptions::default();
    o.screen = Size::new(1280, 800);
    o.display = DisplaySpec::Fixed {
        size: Size::new(1024, 640),
    };
    o.launch = launch.iter().map(|s| (*s).to_owned()).collect();
    o
}

/// Two terminals side by side: each click moves focus (the pointer) into the other, which
/// redraws both cursors, so every step has something to draw and settle on.
const LEFT: (i64, i64) = (300, 300);
const RIGHT: (i64, i64) = (900, 300);

fn click(screen: (i64, i64)) -> ComputerCall {
    // 0.8 maps screen multiples of 5 exactly into the model display and back.
    let (x, y) = (screen.0 * 4 / 5, screen.1 * 4 / 5);
    decode(
        Vendor::Anthropic,
        &serde_json::json!({"action": "left_click", "coordinate": [x, y]}),
    )
    .unwrap()
}

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n = env_n("BENCH_N", 200);
    let n_ref = env_n("BENCH_N_REF", 40);
    println!("load average at start: {}", load());
    let session = DesktopSession::start(opts(&[
        "xterm -geometry 80x40+0+0",
        "xterm -geometry 80x40+640+0",
    ]))
    .await
    .expect("Xvfb and xterm: sudo apt-get install -y xvfb xterm");
    println!(
        "display {}, capture via {}",
        session.display(),
        if session.uses_shm() {
            "MIT-SHM"
        } else {
            "GetImage"
        }
    );
    let x_env = session.x_env();
    let mut cordon_step = f64::NAN;
    let mut c = Computer::new(session, EngineOptions::default());
    for (format, name) in [(ImageFormat::Png, "png"), (ImageFormat::JPEG, "jpeg q80")] {
        let mut e = EngineOptions::default();
        e.rules = Rules::allow_all();
        e.format = format;
        let session = c.into_backend();
        c = Computer::new(session, e);
        for i in 0..10 {
            c.step(click(if i % 2 == 0 { LEFT } else { RIGHT }), None)
                .await
                .unwrap();
        }
        let mut total = Vec::with_capacity(n);
        let (mut act, mut settle, mut capture) = (Vec::new(), Vec::new(), Vec::new());
        let mut unsettled = 0;
        for i in 0..n {
            let call = click(if i % 2 == 0 { LEFT } else { RIGHT });
            let t = Instant::now();
            let r = c.step(call, None).await.unwrap();
            total.push(t.elapsed().as_secs_f64() * 1000.0);
            assert_eq!(r.status, Status::Ok, "{:?}", r.error);
            assert_eq!(r.screenshot.as_ref().unwrap().size, Size::new(1024, 640));
            act.push(r.timings_ms.act);
            settle.push(r.timings_ms.settle);
            capture.push(r.timings_ms.capture);
            unsettled += usize::from(!r.settled);
        }
        let p50 = pct(&mut total, 0.5);
        if format == ImageFormat::Png {
            cordon_step = p50;
        }
        println!(
            "cordon step (click+settle+capture+scale+encode) 1280x800 -> 1024x640, {name}: \
             p50 {p50:.1} ms, p99 {:.1} ms [act p50 {:.2}, settle p50 {:.1}, capture+scale+encode \
             p50 {:.1}; not settled {unsettled}/{n}]",
            pct(&mut total, 0.99),
            pct(&mut act, 0.5),
            pct(&mut settle, 0.5),
            pct(&mut capture, 0.5)
        );
    }

    reference(&x_env, n_ref, cordon_step);
    c.into_backend().close().await.unwrap();

    // Session start: Xvfb up (display number, connection, enigo) + first screenshot.
    let mut times = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let session = DesktopSession::start(opts(&[])).await.unwrap();
        let mut c = Computer::new(session, EngineOptions::default());
        let shot = decode(
            Vendor::Anthropic,
            &serde_json::json!({"action": "screenshot"}),
        )
        .unwrap();
        let r = c.step(shot, None).await.unwrap();
        assert!(r.screenshot.is_some());
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        c.into_backend().close().await.unwrap();
    }
    println!(
        "session start (Xvfb up + first screenshot, png): p50 {:.1} ms, p99 {:.1} ms (n 20)",
        pct(&mut times, 0.5),
        pct(&mut times, 0.99)
    );
    println!("load average at end: {}", load());
}

/// The same step the reference way: one `xdotool` process for the click, then
/// `import -window root` piped through ImageMagick's resize to the model size.
fn reference(x_env: &[(String, String)], n: usize, cordon_step: f64) {
    let missing: Vec<&str> = ["xdotool", "import", "convert"]
        .into_iter()
        .filter(|t| !have(t))
        .collect();
    if !missing.is_empty() {
        println!(
            "reference (xdotool + import + convert): skipped, missing {} \
             (sudo apt-get install -y xdotool imagemagick)",
            missing.join(", ")
        );
        return;
    }
    // Debian's ImageMagick, not a stand-in earlier on PATH.
    let convert = if std::path::Path::new("/usr/bin/convert").exists() {
        "/usr/bin/convert"
    } else {
        "convert"
    };
    let run = |argv: &[&str]| {
        let out = Command::new(argv[0])
            .args(&argv[1..])
            .envs(x_env.iter().map(|(k, v)| (k, v)))
            .stderr(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "{argv:?}: {}", out.status);
        out.stdout
    };
    let shot = format!("import -window root png:- | {convert} png:- -resize 1024x640! png:-");
    let mut total = Vec::new();
    let (mut clicks, mut shots) = (Vec::new(), Vec::new());
    for i in 0..n + 3 {
        let (x, y) = if i % 2 == 0 { LEFT } else { RIGHT };
        let t = Instant::now();
        run(&[
            "xdotool",
            "mousemove",
            &x.to_string(),
            &y.to_string(),
            "click",
            "1",
        ]);
        let t1 = Instant::now();
        let png = run(&["sh", "-c", &shot]);
        assert!(png.starts_with(b"\x89PNG"));
        if i >= 3 {
            clicks.push((t1 - t).as_secs_f64() * 1000.0);
            shots.push(t1.elapsed().as_secs_f64() * 1000.0);
            total.push(t.elapsed().as_secs_f64() * 1000.0);
        }
    }
    let p50 = pct(&mut total, 0.5);
    println!(
        "reference step (xdotool mousemove+click, import -window root | convert -resize 1024x640!): \
         p50 {p50:.1} ms, p99 {:.1} ms [xdotool p50 {:.1}, screenshot+resize p50 {:.1}] (n {n})",
        pct(&mut total, 0.99),
        pct(&mut clicks, 0.5),
        pct(&mut shots, 0.5)
    );
    println!(
        "ratio step reference / Cordon: {:.1}x ({p50:.1} / {cordon_step:.1} ms; the reference \
         tool also sleeps 2 s after each action, not counted here)",
        p50 / cordon_step
    );
}
