//! Frames on demand: the headless shell's begin-frame path (a frame drawn for each
//! capture, at the display's scale) against Chromium's own frame clock, run under every
//! Chromium binary installed (plain `chromium`, and `chromium-headless-shell`, the default
//! where installed); and the display-scale screens of the headless shell: the page drawn at
//! the model's size, clicks on the CSS element under the model's pixel, and sessions of
//! other scales and DPRs side by side in one browser.

use crate::common::*;
use cordon_computer::browser::{BrowserOptions, CHROMIUM, HEADLESS_SHELL, default_chromium};
use cordon_computer::display::{DisplaySpec, Size};
use cordon_computer::gate::Rules;
use cordon_computer::{SettleEnd, Status};
use cordon_protocol::computer::Vendor;
use serde_json::json;

/// Every way of starting Chromium installed here: plain `chromium` (frame clock) and the
/// headless shell drawing on demand. Fails when neither is installed.
fn variants() -> Vec<(String, BrowserOptions)> {
    let mut out = Vec::new();
    if std::path::Path::new(CHROMIUM).exists() {
        out.push((
            "chromium".to_owned(),
            browser_options().executable(CHROMIUM),
        ));
    }
    if std::path::Path::new(HEADLESS_SHELL).exists() {
        let shell = browser_options().executable(HEADLESS_SHELL);
        assert!(
            shell.draws_on_demand(),
            "the headless shell draws on demand"
        );
        out.push(("headless shell".to_owned(), shell));
    }
    assert!(!out.is_empty(), "no Chromium installed");
    out
}

/// The headless shell's options; fails when it is not installed (tests/bootstrap.sh
/// installs it).
fn shell() -> BrowserOptions {
    assert!(
        std::path::Path::new(HEADLESS_SHELL).exists(),
        "install it: sudo apt-get install -y chromium-headless-shell"
    );
    browser_options().executable(HEADLESS_SHELL)
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
                    let r = left_click(&mut c, [400, 300]).await;
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
            for (display, dpr, at_display_scale) in [
                (Size::new(1024, 640), 1.0, true),
                (Size::new(1024, 640), 1.0, false),
                (Size::new(1024, 640), 2.0, true),
                (Size::new(800, 500), 1.0, true),
                (Size::new(1280, 800), 1.0, true),
            ] {
                let mut opts = session_opts(
                    Size::new(1280, 800),
                    dpr,
                    DisplaySpec::Fixed { size: display },
                    Some(url.clone()),
                );
                opts.render_at_display_scale = at_display_scale;
                let mut c = computer(&browser, opts, Rules::allow_all()).await;
                let r = ok_step(&mut c, Vendor::Anthropic, json!({"action": "screenshot"})).await;
                let shot = r.screenshot.as_ref().unwrap();
                let name = format!("{name}, display {display}, dpr {dpr}, at display scale {at_display_scale}");
                assert_eq!(shot.size, display, "{name}");
                let same_aspect = display.width * 800 == display.height * 1280;
                if name.starts_with("headless shell") && dpr == 1.0 && at_display_scale && same_aspect {
                    assert!(!shot.resized, "{name}: the frame is drawn at the model's size");
                }
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
                        let r = left_click(&mut c, [400, 300]).await;
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

/// The colour of grid cell `(i, j)` (CSS `80·i, 80·j`, 80×80 px): every cell its own.
fn cell_colour(i: u32, j: u32) -> [u8; 3] {
    [
        (i * 16 + 8) as u8,
        (j * 25 + 10) as u8,
        ((i + j) * 10) as u8,
    ]
}

/// Replaces the page with a 16×10 grid of 80×80 CSS px cells, each its own colour, that
/// records the target and CSS position of every mouse press.
fn install_grid() -> String {
    "window.hits = []; document.body.innerHTML = ''; \
     document.body.style.cssText = 'margin:0;height:100vh;overflow:hidden'; \
     for (let i = 0; i < 16; i++) for (let j = 0; j < 10; j++) { \
       const d = document.createElement('div'); d.id = `c${i}_${j}`; \
       d.style.cssText = `position:absolute;left:${i*80}px;top:${j*80}px;width:80px;height:80px;` + \
         `background:rgb(${i*16+8},${j*25+10},${(i+j)*10})`; \
       document.body.appendChild(d); } \
     addEventListener('mousedown', e => hits.push([e.target.id, e.clientX, e.clientY])); 'ok'"
        .to_owned()
}

/// With frames on demand (the headless shell), a DPR-1 session shown at 1024×640 draws
/// its 1280×800 page at 0.8: the frame is the model's image, with every cell of a grid
/// at its CSS place times 0.8 to the pixel, and no resize here; the page keeps its CSS
/// size and reads devicePixelRatio 0.8. A zoomed region is exact too, and a popup the
/// session follows is drawn at the same scale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_draws_at_its_display_scale_to_the_pixel() {
    let server = PageServer::start(None).await;
    let url = server.url("/popup-self");
    with_browser_options(shell(), |browser| async move {
        let mut c = computer(&browser, page_opts(1.0, url), Rules::allow_all()).await;
        let page = eval(
            &c,
            "JSON.stringify([devicePixelRatio, innerWidth, innerHeight])",
        )
        .await;
        let [dpr, width, height]: [f64; 3] = serde_json::from_str(page.as_str().unwrap()).unwrap();
        assert!((dpr - 0.8).abs() < 1e-6, "devicePixelRatio {dpr}");
        assert_eq!((width, height), (1280.0, 800.0), "CSS size unchanged");
        // Following the page's popup, which opens the test's grid page.
        let r = left_click(&mut c, [80, 40]).await;
        assert_eq!(c.backend().open_pages(), 2, "the popup is open");
        assert!(
            !r.screenshot.as_ref().unwrap().resized,
            "the popup is drawn at the model's size"
        );
        let dpr = eval(&c, "devicePixelRatio").await.as_f64().unwrap();
        assert!(
            (dpr - 0.8).abs() < 1e-6,
            "the popup's devicePixelRatio {dpr}"
        );
        assert_eq!(eval(&c, &install_grid()).await, "ok");
        let r = ok_step(&mut c, Vendor::Anthropic, json!({"action": "screenshot"})).await;
        let image = r.screenshot.as_ref().unwrap();
        assert_eq!(image.size, Size::new(1024, 640));
        assert!(!image.resized, "one drawn frame, not resized here");
        let shot = Shot::of(&r);
        // Each 80 px cell is 64 model px: its first, middle and last pixels are its own.
        for i in 0..16 {
            for j in 0..10 {
                for (dx, dy) in [(0, 0), (32, 32), (63, 63), (0, 63), (63, 0)] {
                    let (x, y) = (i * 64 + dx, j * 64 + dy);
                    assert_eq!(
                        shot.pixel(x, y),
                        cell_colour(i, j),
                        "cell ({i}, {j}) at model ({x}, {y})"
                    );
                }
            }
        }
        // Cells 1..9 × 1..6 (CSS 80..720 × 80..480), zoomed 1.6× to 1024×640.
        let r = ok_step(
            &mut c,
            Vendor::Anthropic,
            json!({"action": "zoom", "region": [64, 64, 576, 384]}),
        )
        .await;
        let zoom = Shot::of(&r);
        assert_eq!(zoom.size, Size::new(1024, 640));
        for i in 1..9 {
            for j in 1..6 {
                let (x, y) = ((i - 1) * 128 + 64, (j - 1) * 128 + 64);
                assert_eq!(
                    zoom.pixel(x, y),
                    cell_colour(i, j),
                    "zoomed cell ({i}, {j})"
                );
            }
        }
        c.into_backend().close().await.unwrap();
    })
    .await;
}

/// With the page drawn at 0.8, a click at a model pixel lands on the CSS element drawn
/// there: the first, middle and last model pixels of grid cells, each press on its cell
/// at the CSS position the model's pixel covers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clicks_at_display_scale_land_on_the_element_under_the_pixel() {
    let server = PageServer::start(None).await;
    let url = server.url("/targets");
    with_browser_options(shell(), |browser| async move {
        let mut c = computer(&browser, page_opts(1.0, url), Rules::allow_all()).await;
        assert_eq!(eval(&c, &install_grid()).await, "ok");
        let mut clicks = Vec::new();
        for (i, j) in [(0, 0), (3, 2), (15, 9), (7, 5), (10, 1), (1, 8)] {
            // Pixel 63 of a cell is inside it by 1.25 CSS px, less than the 1 px square
            // Blink hit-tests a point with; 62 is the last pixel safely inside.
            for (dx, dy) in [(1, 1), (32, 32), (62, 62), (1, 62), (62, 1)] {
                clicks.push((i, j, i * 64 + dx, j * 64 + dy));
            }
        }
        for &(i, j, x, y) in &clicks {
            let r = left_click(&mut c, [x, y]).await;
            assert_eq!(
                Shot::of(&r).pixel(x, y),
                cell_colour(i, j),
                "the model sees cell ({i}, {j}) at ({x}, {y})"
            );
        }
        let hits = eval(&c, "JSON.stringify(hits)").await;
        let hits: Vec<(String, f64, f64)> = serde_json::from_str(hits.as_str().unwrap()).unwrap();
        assert_eq!(hits.len(), clicks.len(), "one press per click");
        for (&(i, j, x, y), (id, css_x, css_y)) in clicks.iter().zip(&hits) {
            assert_eq!(id, &format!("c{i}_{j}"), "model ({x}, {y})");
            // The model pixel's centre in CSS px (`display.rs`); MouseEvent truncates.
            let (want_x, want_y) = ((f64::from(x) + 0.5) * 1.25, (f64::from(y) + 0.5) * 1.25);
            assert!(
                (css_x - want_x).abs() <= 1.0 && (css_y - want_y).abs() <= 1.0,
                "model ({x}, {y}) pressed at CSS ({css_x}, {css_y}), want ({want_x}, {want_y})"
            );
        }
        c.into_backend().close().await.unwrap();
    })
    .await;
}

/// Sessions of different scales and DPRs side by side in one headless shell, stepped in
/// turn: each reads its own devicePixelRatio — exactly 2 at DPR 2, exactly 1 where it
/// opted out or shows the viewport as it is, the display's scale otherwise — gets its
/// screenshot at its display size, and every screenshot shows that session's latest
/// click.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_at_other_scales_and_dprs_coexist_exactly() {
    let server = PageServer::start(None).await;
    let url = server.url("/targets");
    with_browser_options(shell(), |browser| async move {
        // (display, DPR, at the display's scale, the devicePixelRatio the page reads)
        let kinds = [
            (Size::new(1024, 640), 1.0, true, 0.8),
            (Size::new(1024, 640), 2.0, true, 2.0),
            (Size::new(800, 500), 1.0, true, 0.625),
            (Size::new(1024, 640), 1.0, false, 1.0),
            (Size::new(1280, 800), 1.0, true, 1.0),
            (Size::new(1024, 640), 1.0, true, 0.8),
        ];
        let mut sessions = Vec::new();
        for (display, dpr, at_display_scale, _) in kinds {
            let mut opts = session_opts(
                Size::new(1280, 800),
                dpr,
                DisplaySpec::Fixed { size: display },
                Some(url.clone()),
            );
            opts.render_at_display_scale = at_display_scale;
            let c = computer(&browser, opts, Rules::allow_all()).await;
            assert_eq!(eval(&c, &install("paint();")).await, "ok");
            sessions.push(c);
        }
        for click in 1..=4 {
            for (k, c) in sessions.iter_mut().enumerate() {
                let (display, dpr, at_display_scale, page_dpr) = kinds[k];
                let what =
                    format!("display {display}, dpr {dpr}, at display scale {at_display_scale}");
                let r = ok_step(
                    c,
                    Vendor::Anthropic,
                    json!({"action": "left_click", "coordinate": [400, 300]}),
                )
                .await;
                let shot = Shot::of(&r);
                assert_eq!(shot.size, display, "{what}");
                assert!(
                    shows_click(&shot, click),
                    "{what}, click {click}: pixel {:?}",
                    shot.pixel(500, 300)
                );
                let read = eval(c, "devicePixelRatio").await.as_f64().unwrap();
                if page_dpr == 0.8 || page_dpr == 0.625 {
                    assert!(
                        (read - page_dpr).abs() < 1e-6,
                        "{what}: devicePixelRatio {read}"
                    );
                } else {
                    let js = format!("devicePixelRatio === {page_dpr}");
                    assert_eq!(eval(c, &js).await, true, "{what}: devicePixelRatio {read}");
                }
            }
        }
        for c in sessions {
            c.into_backend().close().await.unwrap();
        }
    })
    .await;
}

/// The default binary is the headless shell where it is installed (and `CORDON_CHROMIUM`
/// does not choose another).
#[test]
fn the_headless_shell_is_the_default_where_installed() {
    if std::env::var_os("CORDON_CHROMIUM").is_some() {
        return;
    }
    let shell_installed = std::path::Path::new(HEADLESS_SHELL).exists();
    let want = if shell_installed {
        HEADLESS_SHELL
    } else {
        CHROMIUM
    };
    assert_eq!(default_chromium(), std::path::Path::new(want));
    assert_eq!(
        BrowserOptions::default().executable,
        std::path::Path::new(want)
    );
    assert_eq!(BrowserOptions::default().draws_on_demand(), shell_installed);
}

/// A missing binary is a clear error naming the Debian package that installs it.
#[tokio::test]
async fn a_missing_binary_names_its_package() {
    for (path, package) in [
        (
            "/nonexistent/chromium-headless-shell",
            "chromium-headless-shell",
        ),
        ("/nonexistent/chromium", "chromium"),
    ] {
        let err = cordon_computer::browser::Browser::launch(browser_options().executable(path))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("`sudo apt-get install -y {package}`")),
            "{err}"
        );
    }
}
