//! The basic step: click, type, keys, scroll, iframes, batches, settle, and model-visible
//! errors, against a real Chromium.

#![allow(clippy::unwrap_used, reason = "tests")]

use crate::common::*;
use cordon_computer::Status;
use cordon_computer::display::{CssPoint, Size};
use cordon_computer::gate::Rules;
use cordon_protocol::computer::Vendor;
use serde_json::json;

/// Model coordinates (1024×640 display over a 1280×800 viewport) of a CSS point.
fn m(x: f64, y: f64) -> [i64; 2] {
    [(x * 0.8).floor() as i64, (y * 0.8).floor() as i64]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typing_unicode_newlines_and_key_chords() {
    let server = PageServer::start(None).await;
    with_browser(|browser| async move {
        let opts = page_opts(1.0, server.url("/form"));
        let mut c = computer(&browser, opts, Rules::allow_all()).await;
        ok_step(
            &mut c,
            Vendor::Anthropic,
            json!({"action": "left_click", "coordinate": m(250.0, 120.0)}),
        )
        .await;
        ok_step(
            &mut c,
            Vendor::Anthropic,
            json!({"action": "type", "text": "héllo wörld € 日本"}),
        )
        .await;
        assert_eq!(
            eval(&c, "document.getElementById('name').value").await,
            "héllo wörld € 日本"
        );

        ok_step(
            &mut c,
            Vendor::Anthropic,
            json!({"action": "left_click", "coordinate": m(250.0, 200.0)}),
        )
        .await;
        ok_step(
            &mut c,
            Vendor::Anthropic,
            json!({"action": "type", "text": "line1\nline2"}),
        )
        .await;
        assert_eq!(
            eval(&c, "document.getElementById('bio').value").await,
            "line1\nline2"
        );

        // Key chords reach the page with their modifiers, and ctrl+a selects.
        ok_step(
            &mut c,
            Vendor::Anthropic,
            json!({"action": "left_click", "coordinate": m(250.0, 480.0)}),
        )
        .await;
        ok_step(
            &mut c,
            Vendor::Anthropic,
            json!({"action": "type", "text": "abc"}),
        )
        .await;
        ok_step(
            &mut c,
            Vendor::Anthropic,
            json!({"action": "key", "text": "ctrl+a"}),
        )
        .await;
        ok_step(
            &mut c,
            Vendor::Anthropic,
            json!({"action": "key", "text": "BackSpace"}),
        )
        .await;
        assert_eq!(eval(&c, "document.getElementById('keys').value").await, "");
        let log: Vec<String> = serde_json::from_value(eval(&c, "log").await).unwrap();
        assert!(log.contains(&"kd:a+ctrl".to_string()), "{log:?}");
        assert!(log.contains(&"kd:Backspace".to_string()), "{log:?}");
        c.into_backend().close().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scroll_moves_the_page_and_the_screenshot_follows() {
    let server = PageServer::start(None).await;
    with_browser(|browser| async move {
        for dpr in [1.0, 2.0] {
            let opts = page_opts(dpr, server.url("/long"));
            let mut c = computer(&browser, opts, Rules::allow_all()).await;
            let r = ok_step(
                &mut c,
                Vendor::Anthropic,
                json!({"action": "scroll", "coordinate": [500, 300],
                "scroll_direction": "down", "scroll_amount": 3}),
            )
            .await;
            assert_eq!(eval(&c, "scrollY").await, 300, "dpr {dpr}");
            // The red band starts at document y=300: now at the top of the image.
            let shot = Shot::of(&r);
            assert_eq!(
                shot.pixel(10, 5),
                [255, 0, 0],
                "dpr {dpr}: top row after scrolling"
            );
            assert_eq!(shot.pixel(10, 100), [255, 255, 255], "dpr {dpr}");
            // OpenAI pixels and Gemini's document scroll too.
            ok_step(
                &mut c,
                Vendor::OpenAi,
                json!({"type": "scroll", "x": 10, "y": 10, "scroll_x": 0, "scroll_y": -80}),
            )
            .await;
            assert_eq!(eval(&c, "scrollY").await, 200, "80 model px = 100 css px");
            ok_step(
                &mut c,
                Vendor::Gemini,
                json!({"name": "scroll_document", "args": {"direction": "down"}}),
            )
            .await;
            assert_eq!(eval(&c, "scrollY").await, 1000);
            c.into_backend().close().await.unwrap();
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clicks_reach_into_iframes() {
    let server = PageServer::start(None).await;
    with_browser(|browser| async move {
        let opts = page_opts(2.0, server.url("/iframe"));
        let mut c = computer(&browser, opts, Rules::allow_all()).await;
        ok_step(
            &mut c,
            Vendor::Anthropic,
            json!({"action": "left_click", "coordinate": m(300.0, 225.0)}),
        )
        .await;
        assert_eq!(eval(&c, "hits").await, json!(["inner"]));
        c.into_backend().close().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vendor_shapes_drive_the_same_page() {
    let server = PageServer::start(None).await;
    with_browser(|browser| async move {
        let opts = page_opts(1.0, server.url("/form"));
        let mut c = computer(&browser, opts, Rules::allow_all()).await;
        // OpenAI batch: one screenshot for three actions.
        let [x, y] = m(250.0, 120.0);
        let r = ok_step(
            &mut c,
            Vendor::OpenAi,
            json!({"type": "computer_call", "call_id": "c1", "actions": [
            {"type": "click", "button": "left", "x": x, "y": y},
            {"type": "type", "text": "abc"},
            {"type": "keypress", "keys": ["CTRL", "A"]},
            {"type": "type", "text": "xyz"},
        ], "pending_safety_checks": []}),
        )
        .await;
        assert_eq!(r.call_id.as_deref(), Some("c1"));
        assert!(r.screenshot.is_some());
        assert_eq!(
            eval(&c, "document.getElementById('name').value").await,
            "xyz"
        );
        // Gemini: normalized grid, type_text_at clears first by default.
        let gx = (250.0 / 1280.0 * 1000.0) as i64;
        let gy = (120.0 / 800.0 * 1000.0) as i64;
        ok_step(
            &mut c,
            Vendor::Gemini,
            json!({"name": "type_text_at",
            "args": {"x": gx, "y": gy, "text": "gemini"}}),
        )
        .await;
        assert_eq!(
            eval(&c, "document.getElementById('name').value").await,
            "gemini"
        );
        // cursor_position answers in model pixels.
        let r = ok_step(
            &mut c,
            Vendor::Anthropic,
            json!({"action": "cursor_position"}),
        )
        .await;
        let p = c.scaler().to_model(CssPoint {
            x: (gx as f64 + 0.5) * 1.28,
            y: (gy as f64 + 0.5) * 0.8,
        });
        assert_eq!(r.text, Some(format!("X={},Y={}", p.x, p.y)));
        // zoom: a region at native resolution, fit into the display.
        let r = ok_step(
            &mut c,
            Vendor::Anthropic,
            json!({"action": "zoom", "region": [0, 0, 512, 320]}),
        )
        .await;
        assert_eq!(r.screenshot.unwrap().size, Size::new(1024, 640));
        c.into_backend().close().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_waits_for_requests_the_action_started() {
    let server = PageServer::start(None).await;
    with_browser(|browser| async move {
        let opts = page_opts(1.0, server.url("/slow"));
        let mut c = computer(&browser, opts, Rules::allow_all()).await;
        let r = left_click(&mut c, [100, 100]).await;
        assert!(r.settled);
        assert_eq!(eval(&c, "document.title").await, "fetched:done");
        // navigation settles on the loaded document and reports its URL
        let url = server.url("/targets");
        let r = ok_step(
            &mut c,
            Vendor::Gemini,
            json!({"name": "navigate", "args": {"url": url}}),
        )
        .await;
        assert_eq!(r.current_url.as_deref(), Some(url.as_str()));
        assert_eq!(eval(&c, "document.readyState").await, "complete");
        let r = ok_step(
            &mut c,
            Vendor::Gemini,
            json!({"name": "go_back", "args": {}}),
        )
        .await;
        assert_eq!(r.current_url, Some(server.url("/slow")));
        c.into_backend().close().await.unwrap();
    })
    .await;
}

/// File choosers, however they open (here from script), are answered with the session's
/// upload files or refused, and the model reads which in the step's text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_choosers_get_the_session_uploads_or_are_refused() {
    let server = PageServer::start(None).await;
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<_> = ["a.txt", "b.txt"]
        .iter()
        .map(|name| {
            let path = dir.path().join(name);
            std::fs::write(&path, name).unwrap();
            path
        })
        .collect();
    with_browser(|browser| async move {
        // 1280x800 shown as 1024x640: model = css * 0.8.
        let attach = json!({"action": "left_click", "coordinate": [80, 40]});
        let opts = page_opts(1.0, server.url("/upload"));
        let mut c = computer(&browser, opts, Rules::allow_all()).await;
        let r = ok_step(&mut c, Vendor::Anthropic, attach.clone()).await;
        let text = r.text.unwrap_or_default();
        assert!(text.contains("refused"), "{text}");
        assert_eq!(
            eval(&c, "document.getElementById('one').files.length").await,
            0
        );
        c.into_backend().close().await.unwrap();

        let mut opts = page_opts(1.0, server.url("/upload"));
        opts.uploads = files;
        let mut c = computer(&browser, opts, Rules::allow_all()).await;
        let r = ok_step(&mut c, Vendor::Anthropic, attach).await;
        assert!(r.text.unwrap_or_default().contains("a.txt"));
        assert_eq!(eval(&c, "document.title").await, "one:a.txt");
        // A multiple-file input takes them all.
        left_click(&mut c, [80, 180]).await;
        assert_eq!(eval(&c, "document.title").await, "many:a.txt,b.txt");
        c.into_backend().close().await.unwrap();
    })
    .await;
}

/// Work a click queues in a timer (a fetch, a scroll) is in the screenshot of that step:
/// settling does not wait for the timer turn, so the capture must notice and capture again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_screenshot_shows_what_timers_started_by_the_action_did() {
    let server = PageServer::start(None).await;
    with_browser(|browser| async move {
        for dpr in [1.0, 2.0] {
            let opts = page_opts(dpr, server.url("/timers"));
            let mut c = computer(&browser, opts, Rules::allow_all()).await;
            let centre = |r| {
                let shot = Shot::of(r);
                shot.pixel(shot.size.width / 2, shot.size.height / 2)
            };
            // Right half: the timer scrolls to the green band.
            let r = left_click(&mut c, [900, 300]).await;
            let [red, green, blue] = centre(&r);
            assert!(
                green > 120 && red < 60 && blue < 60,
                "dpr {dpr}: centre pixel {:?}, want the green band",
                (red, green, blue)
            );
            // Left half: the timer fetches, then paints the page blue.
            eval(&c, "window.scrollTo(0, 0)").await;
            let r = left_click(&mut c, [100, 100]).await;
            assert_eq!(eval(&c, "document.title").await, "fetched:done");
            let [red, green, blue] = centre(&r);
            assert!(
                blue > 200 && red < 60 && green < 60,
                "dpr {dpr}: centre pixel {:?}, want blue",
                (red, green, blue)
            );
            c.into_backend().close().await.unwrap();
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_actions_are_model_visible_and_the_session_goes_on() {
    let server = PageServer::start(None).await;
    with_browser(|browser| async move {
        let opts = page_opts(1.0, server.url("/targets"));
        let mut c = computer(&browser, opts, Rules::allow_all()).await;
        let r = step(&mut c, Vendor::Anthropic, json!({"action": "left_click", "coordinate": [1024, 10]})).await;
        assert_eq!(r.status, Status::Error);
        assert_eq!(r.error.as_deref(),
            Some("coordinate (1024, 10) is outside the screen: x must be in 0..=1023 and y in 0..=639"));
        let r = step(&mut c, Vendor::Anthropic, json!({"action": "wait", "duration": 999})).await;
        assert_eq!(r.status, Status::Error);
        // Oversized calls are refused whole, before anything runs.
        let clicks = vec![json!({"type": "click", "x": 10, "y": 10}); 101];
        let r = step(&mut c, Vendor::OpenAi, json!({"type": "computer_call", "call_id": "c", "actions": clicks})).await;
        assert_eq!(r.status, Status::Error);
        assert!(r.error.as_deref().unwrap().contains("several calls"), "{r:?}");
        let r = step(&mut c, Vendor::Anthropic, json!({"action": "type", "text": "x".repeat(20_001)})).await;
        assert_eq!(r.status, Status::Error);
        ok_step(&mut c, Vendor::Anthropic, json!({"action": "screenshot"})).await;
        assert_eq!(eval(&c, "hits").await, json!([]));
        c.into_backend().close().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_follows_a_popup_like_a_new_tab() {
    let server = PageServer::start(None).await;
    with_browser(|browser| async move {
        let opts = page_opts(2.0, server.url("/popup-self"));
        let mut c = computer(&browser, opts, Rules::allow_all()).await;
        let r = left_click(&mut c, [50, 40]).await;
        assert_eq!(r.current_url, Some(server.url("/targets")));
        assert_eq!(r.screenshot.unwrap().size, Size::new(1024, 640));
        // and the popup is driven at the session's viewport and DPR
        assert_eq!(
            eval(&c, "[innerWidth, innerHeight, devicePixelRatio]").await,
            json!([1280, 800, 2])
        );
        c.into_backend().close().await.unwrap();
    })
    .await;
}

/// A popup is followed and settled on once its page shows, however far its load got
/// before the session watched it: loaded already (a local page usually has), answered
/// late (400 ms), an `about:blank` its opener wrote into, a blank window its opener
/// navigates later. None of them holds the step to the settle cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_popup_settles_on_its_page() {
    let server = PageServer::start(None).await;
    let shown = server.url("/shown");
    let late = server.url("/late-shown");
    // A document written into with `document.open` takes its opener's URL.
    let opener = server.url("/popup-kinds");
    // (model x of the button, the popup's colour, its URL)
    let kinds = [
        (80, [0, 160, 0], shown.as_str()),
        (240, [0, 0, 255], late.as_str()),
        (400, [255, 160, 0], opener.as_str()),
        (560, [0, 160, 0], shown.as_str()),
    ];
    with_browser(|browser| async move {
        for (x, colour, url) in kinds {
            let opts = page_opts(1.0, server.url("/popup-kinds"));
            let mut c = computer(&browser, opts, Rules::allow_all()).await;
            let r = left_click(&mut c, [x, 40]).await;
            assert!(r.settled, "button at {x}: {:?}", r.settle);
            assert_eq!(r.current_url.as_deref(), Some(url), "button at {x}");
            assert_eq!(Shot::of(&r).pixel(500, 400), colour, "button at {x}");
            c.into_backend().close().await.unwrap();
        }
    })
    .await;
}

/// A session's futures are `Send`, so sessions can run on every worker thread of a
/// multi-threaded runtime (checked at compile time; nothing runs).
#[test]
fn session_futures_are_send() {
    fn send<T: Send>(_: &T) {}
    #[allow(dead_code, reason = "type-checked only")]
    fn check(
        c: &mut cordon_computer::Computer<cordon_computer::browser::BrowserSession>,
        b: &cordon_computer::browser::Browser,
        call: cordon_protocol::computer::ComputerCall,
    ) {
        send(&b.new_session(cordon_computer::browser::SessionOptions::default()));
        send(&c.step(call, None));
        send(&c.backend_mut().close());
    }
}

/// A step waits for the screen to stop moving: a 400 ms CSS transition and a 400 ms
/// script animation both show their end state, and the step says it waited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_screenshot_shows_the_end_of_a_short_animation() {
    let server = PageServer::start(None).await;
    with_browser(|browser| async move {
        for dpr in [1.0, 2.0] {
            let opts = page_opts(dpr, server.url("/motion"));
            let mut c = computer(&browser, opts, Rules::allow_all()).await;
            // Left half: the page's background transitions from red to blue.
            let r = left_click(&mut c, [300, 400]).await;
            let shot = Shot::of(&r);
            assert_eq!(
                shot.pixel(500, 500),
                [0, 0, 255],
                "dpr {dpr}: {:?}",
                r.settle
            );
            assert_eq!(r.settle, cordon_computer::SettleEnd::Stable);
            assert!(r.settled);
            // Right half: a timer moves the bar to the right edge, then paints it blue.
            let r = left_click(&mut c, [900, 400]).await;
            let shot = Shot::of(&r);
            // The bar ends at CSS x 1180..1280, y 0..100: model x 944..1024, y 0..80.
            assert_eq!(
                shot.pixel(980, 40),
                [0, 0, 255],
                "dpr {dpr}: {:?}",
                r.settle
            );
            assert_eq!(
                shot.pixel(40, 40),
                [0, 0, 255],
                "dpr {dpr}: the page behind"
            );
            assert_eq!(r.settle, cordon_computer::SettleEnd::Stable);
            // Nothing moves now: the next step does not wait.
            let r = ok_step(&mut c, Vendor::Anthropic, json!({"action": "screenshot"})).await;
            assert_eq!(r.settle, cordon_computer::SettleEnd::Quiet);
            c.into_backend().close().await.unwrap();
        }
    })
    .await;
}

/// An interval animation that clears itself in its last run shows its end, and once it
/// has ended it holds no later step: a plain click after it settles `quiet`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interval_animation_ends_and_holds_no_later_step() {
    let server = PageServer::start(None).await;
    with_browser(|browser| async move {
        let opts = page_opts(1.0, server.url("/interval"));
        let mut c = computer(&browser, opts, Rules::allow_all()).await;
        let r = left_click(&mut c, [300, 400]).await;
        // The bar ends at CSS x 800..900: model x 640..720.
        let shot = Shot::of(&r);
        assert_eq!(shot.pixel(680, 40), [0, 160, 0], "{:?}", r.settle);
        assert_eq!(shot.pixel(40, 40), [255, 0, 0], "{:?}", r.settle);
        assert!(r.settled);
        let r = left_click(&mut c, [900, 400]).await;
        assert_eq!(Shot::of(&r).pixel(500, 500), [0, 0, 255]);
        assert_eq!(r.settle, cordon_computer::SettleEnd::Quiet);
        c.into_backend().close().await.unwrap();
    })
    .await;
}

/// A page that moves forever ends the step at the session's settle timeout, captured as
/// it is; an endless CSS animation is not waited for at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_animation_ends_the_step_at_the_settle_timeout() {
    let server = PageServer::start(None).await;
    with_browser(|browser| async move {
        let mut opts = page_opts(1.0, server.url("/endless"));
        opts.settle_cap = std::time::Duration::from_millis(800);
        let mut c = computer(&browser, opts, Rules::allow_all()).await;
        // The spinner alone (CSS, endless) does not hold the step up.
        let r = ok_step(&mut c, Vendor::Anthropic, json!({"action": "screenshot"})).await;
        assert_eq!(r.settle, cordon_computer::SettleEnd::Quiet);
        // The script animation never stops: the step ends at the timeout. The bound here is
        // generous (timeout + several seconds); the figures are in the benchmarks.
        let started = std::time::Instant::now();
        let r = left_click(&mut c, [900, 400]).await;
        assert!(started.elapsed() < std::time::Duration::from_millis(800 + 5000));
        assert_eq!(r.settle, cordon_computer::SettleEnd::Timeout);
        assert!(!r.settled);
        assert!(r.screenshot.is_some());
        // The motion is the page's own now: the next steps wait for it only briefly, never
        // up to the timeout again. They report it as moving; on a starved machine the page
        // may draw no frame while a capture is taken, and the step then says quiet.
        for _ in 0..2 {
            let r = ok_step(&mut c, Vendor::Anthropic, json!({"action": "screenshot"})).await;
            assert!(
                matches!(
                    r.settle,
                    cordon_computer::SettleEnd::Moving | cordon_computer::SettleEnd::Quiet
                ),
                "{:?}",
                r.settle
            );
            assert_eq!(r.settled, r.settle == cordon_computer::SettleEnd::Quiet);
        }
        c.into_backend().close().await.unwrap();
    })
    .await;
}

/// Every step's screenshot shows the page after that step's click: a click that repaints
/// the whole page, forty times in a row at DPR 1 and 2, each screenshot in the colour its
/// click count gives (a frame copied before the click's frame was drawn would show the
/// other colour).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_screenshot_shows_the_click_before_it() {
    let server = PageServer::start(None).await;
    with_browser(|browser| async move {
        for dpr in [1.0, 2.0] {
            let opts = page_opts(dpr, server.url("/targets"));
            let mut c = computer(&browser, opts, Rules::allow_all()).await;
            eval(
                &c,
                "window.clicks = 0; document.body.style.background = '#00ccff'; \
                 document.body.addEventListener('click', () => { window.clicks++; \
                 document.body.style.background = window.clicks % 2 ? '#ffcc00' : '#00ccff'; })",
            )
            .await;
            for click in 1..=40 {
                let r = ok_step(
                    &mut c,
                    Vendor::Anthropic,
                    json!({"action": "left_click", "coordinate": m(200.0, 600.0)}),
                )
                .await;
                let [red, _, blue] = Shot::of(&r).pixel(800, 300);
                let yellow = red > 200 && blue < 100;
                let cyan = blue > 200 && red < 100;
                assert!(
                    if click % 2 == 1 { yellow } else { cyan },
                    "dpr {dpr}, click {click}: pixel {:?} shows the page before the click",
                    (red, blue)
                );
            }
            assert_eq!(eval(&c, "window.clicks").await, 40);
            c.into_backend().close().await.unwrap();
        }
    })
    .await;
}

/// A session that opts into the screencast capture still gets the model's size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opted_in_screencast_capture_has_the_model_size() {
    let server = PageServer::start(None).await;
    with_browser(|browser| async move {
        let mut opts = page_opts(1.0, server.url("/targets"));
        opts.screencast = true;
        let mut c = computer(&browser, opts, Rules::allow_all()).await;
        let r = ok_step(&mut c, Vendor::Anthropic, json!({"action": "screenshot"})).await;
        assert_eq!(Shot::of(&r).size, Size::new(1024, 640));
        c.into_backend().close().await.unwrap();
    })
    .await;
}
