//! Frames on demand: the headless shell's begin-frame path (a frame drawn for each
//! capture) against Chromium's own frame clock, run under every Chromium binary installed
//! (`chromium`, and `chromium-headless-shell` with and without a forced frame scale).

use crate::common::*;
use cordon_computer::browser::{BrowserOptions, DEFAULT_CHROMIUM, HEADLESS_SHELL};
use cordon_computer::display::{DisplaySpec, Size};
use cordon_computer::gate::Rules;
use cordon_computer::{SettleEnd, Status};
use cordon_protocol::computer::Vendor;
use serde_json::json;

/// Every way of starting Chromium installed here: the plain binary (frame clock), the
/// headless shell drawing on demand at the viewport's scale, and at the default display's
/// scale (each frame at the model's size). Fails when none is installed.
fn variants() -> Vec<(String, BrowserOptions)> {
    let mut out = Vec::new();
    if std::path::Path::new(DEFAULT_CHROMIUM).exists() {
        out.push((
            "chromium".to_owned(),
            browser_options().executable(DEFAULT_CHROMIUM),
        ));
    }
    if std::path::Path::new(HEADLESS_SHELL).exists() {
        let shell = browser_options().executable(HEADLESS_SHELL);
        assert!(
            shell.draws_on_demand(),
            "the headless shell draws on demand"
        );
        out.push(("headless shell".to_owned(), shell.clone()));
        let mut scaled = shell;
        scaled.frame_scale = Some(0.8);
        out.push(("headless shell, frame scale 0.8".to_owned(), scaled));
    }
    assert!(!out.is_empty(), "no Chromium installed");
    out
}

/// Paints the whole page in `colour` (CSS) from the click's handler in the way `how`
/// says: at once, in the next animation frame, or by a 250 ms CSS transition.
fn install(how: &str) -> String {
    format!(
        "window.clicks = 0; document.body.innerHTML = ''; \
         document.body.style.cssText = 'margin:0;height:100vh;background:rgb(255,0,0)'; \
         document.body.addEventListener('click', () => {{ window.clicks++; \
           const paint = () => {{ document.body.style.background = \
             window.clicks % 2 ? 'rgb(255,204,0)' : 'rgb(0,204,255)'; }}; \
           {how} }}); 'ok'"
    )
}

fn shows_click(shot: &Shot, click: u32) -> bool {
    let [r, _, b] = shot.pixel(500, 300);
    if click % 2 == 1 {
        r > 200 && b < 100
    } else {
        b > 200 && r < 100
    }
}

/// A click whose effect appears only in the next animation frame, or at the end of a CSS
/// transition, is in that step's screenshot, every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_click_painted_in_a_later_frame_is_in_the_screenshot() {
    let server = PageServer::start(None).await;
    for (name, options) in variants() {
        let url = server.url("/targets");
        with_browser_options(options, |browser| async move {
            for (how, js) in [
                ("animation frame", "requestAnimationFrame(paint);"),
                (
                    "animation frame after a timer",
                    "setTimeout(() => requestAnimationFrame(paint), 0);",
                ),
                (
                    "CSS transition",
                    "document.body.style.transition = 'background-color 250ms linear'; paint();",
                ),
            ] {
                let mut c =
                    computer(&browser, page_opts(1.0, url.clone()), Rules::allow_all()).await;
                assert_eq!(eval(&c, &install(js)).await, "ok");
                for click in 1..=6 {
                    let r = ok_step(
                        &mut c,
                        Vendor::Anthropic,
                        json!({"action": "left_click", "coordinate": [400, 300]}),
                    )
                    .await;
                    let shot = Shot::of(&r);
                    assert!(
                        shows_click(&shot, click),
                        "{name}, {how}, click {click}: pixel {:?} ({:?})",
                        shot.pixel(500, 300),
                        r.settle
                    );
                }
                assert_eq!(eval(&c, "window.clicks").await, 6, "{name}, {how}");
                c.into_backend().close().await.unwrap();
            }
        })
        .await;
    }
}

/// The screenshot has the model's size whatever the display and region: the whole
/// viewport at the default scale, another display size, and a zoomed region.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_screenshot_has_the_model_size() {
    let server = PageServer::start(None).await;
    for (name, options) in variants() {
        let url = server.url("/targets");
        with_browser_options(options, |browser| async move {
            for (display, dpr) in [
                (Size::new(1024, 640), 1.0),
                (Size::new(1024, 640), 2.0),
                (Size::new(800, 500), 1.0),
                (Size::new(1280, 800), 1.0),
            ] {
                let opts = session_opts(
                    Size::new(1280, 800),
                    dpr,
                    DisplaySpec::Fixed { size: display },
                    Some(url.clone()),
                );
                let mut c = computer(&browser, opts, Rules::allow_all()).await;
                let r = ok_step(&mut c, Vendor::Anthropic, json!({"action": "screenshot"})).await;
                let shot = r.screenshot.as_ref().unwrap();
                assert_eq!(shot.size, display, "{name}, display {display}, dpr {dpr}");
                assert_eq!(Shot::of(&r).size, display, "{name}: the image is that size");
                let r = ok_step(
                    &mut c,
                    Vendor::Anthropic,
                    json!({"action": "zoom", "region": [0, 0, display.width / 2, display.height / 2]}),
                )
                .await;
                assert_eq!(r.status, Status::Ok, "{name}: zoom");
                assert_eq!(
                    Shot::of(&r).size,
                    display,
                    "{name}: a zoomed region is fit into the display"
                );
                c.into_backend().close().await.unwrap();
            }
        })
        .await;
    }
}

/// A page that does nothing is captured at once and as it is, step after step; a
/// screenshot-only step on it is quiet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_page_is_captured_as_it_is() {
    let server = PageServer::start(None).await;
    for (name, options) in variants() {
        let url = server.url("/targets");
        with_browser_options(options, |browser| async move {
            let mut c = computer(&browser, page_opts(1.0, url), Rules::allow_all()).await;
            assert_eq!(eval(&c, &install("paint();")).await, "ok");
            // Left idle for a while: nothing draws it meanwhile when frames are on demand.
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            for _ in 0..3 {
                let r = ok_step(&mut c, Vendor::Anthropic, json!({"action": "screenshot"})).await;
                assert_eq!(r.settle, SettleEnd::Quiet, "{name}");
                assert_eq!(Shot::of(&r).pixel(500, 300), [255, 0, 0], "{name}");
            }
            // A change made while nobody looked is in the next screenshot.
            eval(&c, "document.body.style.background = 'rgb(0,0,255)'").await;
            let r = ok_step(&mut c, Vendor::Anthropic, json!({"action": "screenshot"})).await;
            assert_eq!(Shot::of(&r).pixel(500, 300), [0, 0, 255], "{name}");
            c.into_backend().close().await.unwrap();
        })
        .await;
    }
}

/// Sessions stepping at once in one browser each see their own clicks: with frames on
/// demand the headless shell must draw one page's frame at a time (it hangs and its
/// renderers crash when frames of several pages overlap).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_stepping_at_once_each_see_their_clicks() {
    let server = PageServer::start(None).await;
    for (name, options) in variants() {
        let url = server.url("/targets");
        with_browser_options(options, |browser| async move {
            let mut runs = Vec::new();
            for session in 0..4 {
                let mut c =
                    computer(&browser, page_opts(1.0, url.clone()), Rules::allow_all()).await;
                assert_eq!(eval(&c, &install("paint();")).await, "ok");
                let name = name.clone();
                runs.push(tokio::spawn(async move {
                    for click in 1..=8 {
                        let r = ok_step(
                            &mut c,
                            Vendor::Anthropic,
                            json!({"action": "left_click", "coordinate": [400, 300]}),
                        )
                        .await;
                        let shot = Shot::of(&r);
                        assert!(
                            shows_click(&shot, click),
                            "{name}, session {session}, click {click}: {:?}",
                            shot.pixel(500, 300)
                        );
                    }
                    c.into_backend().close().await.unwrap();
                }));
            }
            for run in runs {
                run.await.unwrap();
            }
        })
        .await;
    }
}
