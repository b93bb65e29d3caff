//! Sessions started over (`BrowserSession::restart_at`) on a page like a benchmark task's:
//! scripts, styles and images from the HTTP cache the session keeps, timers started on
//! load, a dialog built from a script after the load. Run under each installed Chromium
//! binary; the headless shell (frames on demand) is where reuse runs in the benchmarks.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use crate::common::*;
use cordon_computer::browser::{BrowserOptions, CHROMIUM, HEADLESS_SHELL};
use cordon_computer::display::{DisplaySpec, Size};
use cordon_computer::gate::Rules;
use cordon_computer::{Backend as _, SettleEnd};
use cordon_protocol::computer::Vendor;
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// How many times each session is started over.
const RESTARTS: u64 = 8;
/// Cacheable scripts, stylesheets and images each episode page loads.
const SCRIPTS: usize = 6;
const IMAGES: usize = 4;

/// The installed binaries to run under, the headless shell first. Says so when the shell
/// is not installed.
fn binaries() -> Vec<(&'static str, BrowserOptions)> {
    let mut out = Vec::new();
    if std::path::Path::new(HEADLESS_SHELL).exists() {
        out.push((
            "headless shell",
            browser_options().executable(HEADLESS_SHELL),
        ));
    } else {
        eprintln!("skipped under the headless shell: {HEADLESS_SHELL} is not installed");
    }
    if std::path::Path::new(CHROMIUM).exists() {
        out.push(("chromium", browser_options().executable(CHROMIUM)));
    }
    out
}

/// An episode's page: cacheable scripts and a stylesheet in the head; a timer that ticks
/// without touching the DOM; after the load, from a timer, a dialog whose icons are
/// cacheable images; the background red on even seeds and blue on odd ones.
fn episode_page(seed: u64) -> String {
    let scripts: String = (0..SCRIPTS)
        .map(|i| format!("<script src='/static/s{i}.js'></script>"))
        .collect();
    let colour = if seed.is_multiple_of(2) {
        "rgb(255,0,0)"
    } else {
        "rgb(0,0,255)"
    };
    format!(
        "<!doctype html><html><head><title>episode {seed}</title>\
         <link rel=stylesheet href='/static/dialog.css'>{scripts}</head>\
         <body style='margin:0;height:100vh;background:{colour}'><script>\
         window.seed = {seed}; window.ticks = 0; setInterval(() => window.ticks++, 40);\
         addEventListener('load', () => setTimeout(() => {{\
           const d = document.createElement('div'); d.id = 'dialog';\
           d.innerHTML = [0, 1].map(i => `<span class=icon{{i}}></span>`).join('');\
           document.body.append(d); }}, 0));\
         </script></body></html>"
    )
}

/// The stylesheet: the dialog and its icons, each a cacheable image.
fn dialog_css() -> String {
    let icons: String = (0..IMAGES)
        .map(|i| {
            format!(
                ".icon{i}{{display:inline-block;width:16px;height:16px;background:url(/static/i{i}.svg)}}"
            )
        })
        .collect();
    format!("#dialog{{position:absolute;left:10px;top:10px;background:#fff}}{icons}")
}

/// Serves episode pages, their cacheable resources (a day's `max-age`) and a blank error
/// page (404, no script) for everything else.
async fn serve() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let Ok(n) = sock.read(&mut buf).await else {
                    return;
                };
                let request = String::from_utf8_lossy(&buf[..n]).to_string();
                let path = request.split_whitespace().nth(1).unwrap_or("/").to_owned();
                let cached = "Cache-Control: max-age=86400\r\n";
                let (status, ctype, cache, body) =
                    if let Some(seed) = path.strip_prefix("/episode?seed=") {
                        let seed = seed.parse().unwrap_or(0);
                        ("200 OK", "text/html", "", episode_page(seed))
                    } else if path == "/static/dialog.css" {
                        ("200 OK", "text/css", cached, dialog_css())
                    } else if path.starts_with("/static/s") && path.ends_with(".js") {
                        let body = format!("window.loaded = (window.loaded || 0) + 1; // {path}");
                        ("200 OK", "text/javascript", cached, body)
                    } else if path.starts_with("/static/i") && path.ends_with(".svg") {
                        let body = "<svg xmlns='http://www.w3.org/2000/svg' width='16' height='16'>\
                                <rect width='16' height='16' fill='#888'/></svg>";
                        ("200 OK", "image/svg+xml", cached, body.to_owned())
                    } else {
                        let body = "<!doctype html><title>blank</title><body>nothing here</body>";
                        ("404 Not Found", "text/html", "", body.to_owned())
                    };
                let head = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n{cache}Connection: close\r\n\r\n",
                    body.len()
                );
                let _ = sock.write_all(head.as_bytes()).await;
                let _ = sock.write_all(body.as_bytes()).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    format!("http://{addr}")
}

/// What MiniWoB++'s episode start does after the load: more of the dialog, with icons
/// the page has not shown yet (cached from the previous episodes), laid out at once as
/// jQuery UI's dialog does (which starts their requests). It returns a while
/// after its change, so that the capture's motion check cannot take the change for one
/// made during the capture (which would end the capture `stable`, not `quiet`).
const START_EPISODE: &str = "(async () => { const d = document.getElementById('dialog');\
  d.insertAdjacentHTML('beforeend', [2, 3].map(i => `<span class=icon${i}></span>`).join(''));\
  d.offsetWidth; await new Promise(r => setTimeout(r, 100));\
  return document.querySelectorAll('#dialog span').length; })()";

/// A session started over settles quiet, in the restart and on its first capture, and
/// that capture shows the new episode's page (not the blank page, not the previous
/// episode's), every time. Its scripts, styles and images come from the HTTP cache the
/// session keeps, so a request's end often reaches Cordon before its start: a request
/// counted in flight for good made settling wait its whole cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_session_settles_quiet_and_shows_its_new_page() {
    let origin = serve().await;
    for (name, options) in binaries() {
        let origin = origin.clone();
        with_browser_options(options, |browser| async move {
            let mut opts = session_opts(
                Size::new(500, 320),
                1.0,
                DisplaySpec::Fixed {
                    size: Size::new(500, 320),
                },
                Some(format!("{origin}/episode?seed=0")),
            );
            opts.policy = allow(&[&origin]);
            let mut c = computer(&browser, opts, Rules::allow_all()).await;
            ok_step(&mut c, Vendor::Anthropic, json!({"action": "screenshot"})).await;
            for seed in 1..=RESTARTS {
                let url = format!("{origin}/episode?seed={seed}");
                c.backend_mut()
                    .restart_at(&url, &format!("{origin}/blank"))
                    .await
                    .unwrap();
                assert_eq!(
                    c.backend().settle_end(),
                    Some(SettleEnd::Quiet),
                    "{name}, restart {seed}: the new page loads and goes quiet"
                );
                assert_eq!(eval(&c, START_EPISODE).await, json!(4), "{name}, {seed}");
                let r = ok_step(&mut c, Vendor::Anthropic, json!({"action": "screenshot"})).await;
                assert_eq!(
                    r.settle,
                    SettleEnd::Quiet,
                    "{name}, restart {seed}: the first capture"
                );
                let expected = if seed.is_multiple_of(2) {
                    [255, 0, 0]
                } else {
                    [0, 0, 255]
                };
                assert_eq!(
                    Shot::of(&r).pixel(250, 300),
                    expected,
                    "{name}, restart {seed}: the new page's background"
                );
                assert_eq!(
                    r.current_url.as_deref(),
                    Some(url.as_str()),
                    "{name}, {seed}"
                );
                let page = eval(&c, "[window.seed, window.loaded, document.title]").await;
                assert_eq!(
                    page,
                    json!([seed, SCRIPTS, format!("episode {seed}")]),
                    "{name}, {seed}"
                );
            }
            c.into_backend().close().await.unwrap();
        })
        .await;
    }
}

/// How many sessions the first-frame test opens at once (as the benchmarks run episodes).
const AT_ONCE: u64 = 4;

/// On the headless shell a page that has never drawn has no surface to copy: the frame
/// drawn for its first capture comes without a screenshot. Sessions opened at once with no
/// start page are captured all the same (white), then show a change and, started over,
/// their new page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_that_have_not_drawn_yet_are_captured() {
    if !std::path::Path::new(HEADLESS_SHELL).exists() {
        eprintln!("skipped: {HEADLESS_SHELL} is not installed");
        return;
    }
    let origin = serve().await;
    let options = browser_options().executable(HEADLESS_SHELL);
    with_browser_options(options, |browser| async move {
        let mut runs = Vec::new();
        for n in 0..AT_ONCE {
            let browser = browser.clone();
            let origin = origin.clone();
            runs.push(tokio::spawn(async move {
                let display = DisplaySpec::Fixed {
                    size: Size::new(500, 320),
                };
                let opts = session_opts(Size::new(500, 320), 1.0, display, None);
                let mut c = computer(&browser, opts, Rules::allow_all()).await;
                let r = ok_step(&mut c, Vendor::Anthropic, json!({"action": "screenshot"})).await;
                let shot = Shot::of(&r);
                assert_eq!(shot.size, Size::new(500, 320), "session {n}");
                assert_eq!(shot.pixel(250, 160), [255, 255, 255], "session {n}: blank");
                eval(&c, "document.body.style.background = 'rgb(0,160,0)'").await;
                let r = ok_step(&mut c, Vendor::Anthropic, json!({"action": "screenshot"})).await;
                assert_eq!(Shot::of(&r).pixel(250, 160), [0, 160, 0], "session {n}");
                let url = format!("{origin}/episode?seed={n}");
                c.backend_mut()
                    .restart_at(&url, &format!("{origin}/blank"))
                    .await
                    .unwrap();
                let r = ok_step(&mut c, Vendor::Anthropic, json!({"action": "screenshot"})).await;
                let expected = if n.is_multiple_of(2) {
                    [255, 0, 0]
                } else {
                    [0, 0, 255]
                };
                assert_eq!(Shot::of(&r).pixel(250, 300), expected, "session {n}");
                c.into_backend().close().await.unwrap();
            }));
        }
        for run in runs {
            run.await.unwrap();
        }
    })
    .await;
}

/// How many sessions the load-turn test opens one after another, and how many
/// same-document URL changes it makes in each. (In which order a batch of events of
/// different types is read differs from page to page: several pages make reading a stop
/// first all but certain.)
const PAGES: u32 = 8;
const URL_CHANGES: u32 = 12;

/// A same-document URL change (`history.replaceState`, as a page starting its next
/// episode in place does) is a brief load of the main frame: its start and stop come
/// together and can be read stop first. Every capture after one settles quiet and reports
/// the new URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_brief_load_read_stop_first_ends() {
    let origin = serve().await;
    for (name, options) in binaries() {
        let origin = origin.clone();
        with_browser_options(options, |browser| async move {
            for page in 0..PAGES {
                let url = format!("{origin}/episode?seed={page}");
                let opts = session_opts(Size::new(500, 320), 1.0, fixed_500(), Some(url.clone()));
                let mut c = computer(&browser, opts, Rules::allow_all()).await;
                for n in 1..=URL_CHANGES {
                    let moved = format!("{url}&step={n}");
                    eval(&c, &format!("history.replaceState(null, '', '{moved}')")).await;
                    let r =
                        ok_step(&mut c, Vendor::Anthropic, json!({"action": "screenshot"})).await;
                    assert_eq!(
                        r.settle,
                        SettleEnd::Quiet,
                        "{name}, page {page}, change {n}"
                    );
                    assert_eq!(r.current_url.as_deref(), Some(moved.as_str()), "{name}");
                }
                c.into_backend().close().await.unwrap();
            }
        })
        .await;
    }
}

/// MiniWoB++'s window: a 500×320 viewport shown at its own size.
fn fixed_500() -> DisplaySpec {
    DisplaySpec::Fixed {
        size: Size::new(500, 320),
    }
}

/// How many sessions the first-click test opens one after another.
const FIRST_CLICKS: u32 = 6;

/// A click right after a session's page loaded shows in that step's screenshot: on the
/// headless shell, the frame after a change shows it only once the new document has drawn
/// a few frames, which settling draws after a load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_click_right_after_the_load_shows_in_its_screenshot() {
    let server = PageServer::start(None).await;
    for (name, options) in binaries() {
        let url = server.url("/targets");
        with_browser_options(options, |browser| async move {
            for n in 0..FIRST_CLICKS {
                let mut c =
                    computer(&browser, page_opts(1.0, url.clone()), Rules::allow_all()).await;
                eval(
                    &c,
                    "document.body.style.background = 'rgb(0,204,255)'; \
                     document.body.addEventListener('click', () => \
                       document.body.style.background = 'rgb(255,204,0)')",
                )
                .await;
                let r = left_click(&mut c, [160, 480]).await;
                assert_eq!(
                    Shot::of(&r).pixel(640, 240),
                    [255, 204, 0],
                    "{name}, session {n}: the screenshot shows the click"
                );
                c.into_backend().close().await.unwrap();
            }
        })
        .await;
    }
}
