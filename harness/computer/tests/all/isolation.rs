//! Each session reaches only what its policy allows: navigation, redirects, popups,
//! WebSockets; no cookies or storage shared between sessions; non-web schemes blocked.

#![allow(clippy::unwrap_used, reason = "tests")]

use crate::common::*;
use cordon_computer::Status;
use cordon_computer::gate::Rules;
use cordon_computer::origin::{OriginPattern, OriginPolicy};
use cordon_protocol::computer::Vendor;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_list_blocks_navigation_redirects_popups_and_websockets() {
    let blocked = PageServer::start(None).await;
    let server = PageServer::start(Some(blocked.addr)).await;
    with_browser(|browser| async move {
        let mut opts = page_opts(1.0, server.url("/form"));
        opts.policy = allow(&[&server.origin()]);
        let mut c = computer(&browser, opts, Rules::allow_all()).await;
        // typed navigation: refused before anything loads, as a model-visible error
        let r = step(&mut c, Vendor::Gemini, json!({"name": "navigate", "args": {"url": blocked.url("/x")}})).await;
        assert_eq!(r.status, Status::Error);
        assert!(r.error.as_deref().unwrap().contains("not on the allow-list"), "{r:?}");
        for bad in ["file:///etc/passwd", "chrome://settings", "javascript:alert(1)"] {
            let r = step(&mut c, Vendor::Gemini, json!({"name": "navigate", "args": {"url": bad}})).await;
            assert_eq!(r.status, Status::Error, "{bad}");
            assert!(r.error.as_deref().unwrap().contains("scheme is not allowed"), "{bad}: {r:?}");
        }
        // a redirect to the blocked origin: refused, and the page stays
        let r = step(&mut c, Vendor::Gemini, json!({"name": "navigate", "args": {"url": server.url("/redirect")}})).await;
        assert_eq!(r.status, Status::Error);
        assert!(r.error.as_deref().unwrap().contains("not on the allow-list"), "{r:?}");
        assert_eq!(r.current_url, Some(server.url("/form")));
        // a popup to the blocked origin: refused and closed; the session stays on its opener
        ok_step(&mut c, Vendor::Gemini, json!({"name": "navigate", "args": {"url": server.url("/popup")}})).await;
        let r = step(&mut c, Vendor::Anthropic, json!({"action": "left_click", "coordinate": [50, 40]})).await;
        assert_eq!(r.status, Status::Error, "{r:?}");
        assert!(r.error.as_deref().unwrap().contains(&blocked.url("/popped")), "{r:?}");
        assert_eq!(r.current_url, Some(server.url("/popup")));
        // a WebSocket to the blocked origin
        ok_step(&mut c, Vendor::Gemini, json!({"name": "navigate", "args": {"url": server.url("/ws")}})).await;
        let state = c.backend().eval(
            "new Promise(r => { const t = () => wsState === 'pending' ? setTimeout(t, 10) : r(wsState); t(); })").await.unwrap();
        assert_ne!(state, "open");
        assert_eq!(blocked.hits(), Vec::<String>::new(), "the blocked origin was reached");
        c.into_backend().close().await.unwrap();

        // Positive control: allowing the other origin lets the same WebSocket through, so the
        // test above would have seen it.
        let mut opts = page_opts(1.0, server.url("/ws"));
        opts.policy = allow(&[&server.origin(), &blocked.origin()]);
        let c = computer(&browser, opts, Rules::allow_all()).await;
        c.backend().eval(
            "new Promise(r => { const t = () => wsState === 'pending' ? setTimeout(t, 10) : r(wsState); t(); })").await.unwrap();
        assert!(blocked.hits().iter().any(|h| h.starts_with("GET /socket")), "{:?}", blocked.hits());
        c.into_backend().close().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_list_refuses_redirects_popups_and_websockets() {
    let blocked = PageServer::start(None).await;
    let server = PageServer::start(Some(blocked.addr)).await;
    with_browser(|browser| async move {
        let mut opts = page_opts(1.0, server.url("/popup"));
        opts.policy = OriginPolicy::new(
            vec![],
            vec![OriginPattern::parse(&blocked.origin()).unwrap()],
        );
        let mut c = computer(&browser, opts, Rules::allow_all()).await;
        // A popup to the blocked origin is closed as it opens; the session stays on the
        // opener and the step says why.
        let r = step(
            &mut c,
            Vendor::Anthropic,
            json!({"action": "left_click", "coordinate": [50, 40]}),
        )
        .await;
        assert_eq!(r.status, Status::Error);
        assert!(r.error.as_deref().unwrap().contains("block-list"), "{r:?}");
        assert_eq!(r.current_url, Some(server.url("/popup")));
        assert_eq!(c.backend().open_pages(), 1);
        let r = step(
            &mut c,
            Vendor::Gemini,
            json!({"name": "navigate", "args": {"url": server.url("/redirect")}}),
        )
        .await;
        assert_eq!(r.status, Status::Error);
        assert_eq!(r.current_url, Some(server.url("/popup")));
        // WebSockets, which the browser-wide request guard does not see: from the page and
        // from a worker, both refused by the session's proxy.
        ok_step(
            &mut c,
            Vendor::Gemini,
            json!({"name": "navigate", "args": {"url": server.url("/ws")}}),
        )
        .await;
        let state = c.backend().eval(
            "new Promise(r => { const t = () => wsState === 'pending' ? setTimeout(t, 10) : r(wsState); t(); })").await.unwrap();
        assert_ne!(state, "open");
        let socket_from = |origin: &str, path: &str| {
            format!(
                "new Promise(r => {{ const w = new Worker(URL.createObjectURL(new Blob([\
                 \"const s = new WebSocket('ws://{origin}{path}'); s.onerror = () => postMessage('error'); \
                 s.onopen = () => postMessage('open');\"]))); w.onmessage = e => r(e.data); }})"
            )
        };
        let worker = c.backend().eval(socket_from(&blocked.addr.to_string(), "/worker")).await.unwrap();
        assert_eq!(worker, "error");
        assert_eq!(blocked.hits(), Vec::<String>::new(), "the blocked origin was reached");
        // Positive control: the same proxy relays a WebSocket to an origin not blocked.
        c.backend().eval(socket_from(&server.addr.to_string(), "/open-socket")).await.unwrap();
        assert!(
            server.hits().iter().any(|h| h.starts_with("GET /open-socket")),
            "{:?}",
            server.hits()
        );
        c.into_backend().close().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_share_no_cookies_or_storage() {
    let server = PageServer::start(None).await;
    with_browser(|browser| async move {
        let url = server.url("/cookie");
        let opts = || page_opts(1.0, url.clone());
        let mut a = computer(&browser, opts(), Rules::allow_all()).await;
        assert_eq!(eval(&a, "document.title").await, "seen:none:none");
        ok_step(
            &mut a,
            Vendor::Gemini,
            json!({"name": "navigate", "args": {"url": url}}),
        )
        .await;
        assert_eq!(eval(&a, "document.title").await, "seen:sid=1:v");
        let b = computer(&browser, opts(), Rules::allow_all()).await;
        assert_eq!(eval(&b, "document.title").await, "seen:none:none");
        a.into_backend().close().await.unwrap();
        b.into_backend().close().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downloads_land_in_the_session_directory_only_when_allowed() {
    let server = PageServer::start(None).await;
    let dir = tempfile::tempdir().unwrap();
    with_browser(|browser| async move {
        let mut opts = page_opts(1.0, server.url("/targets"));
        opts.downloads = Some(dir.path().to_owned());
        let mut c = computer(&browser, opts, Rules::allow_all()).await;
        ok_step(
            &mut c,
            Vendor::Gemini,
            json!({"name": "navigate", "args": {"url": server.url("/download")}}),
        )
        .await;
        // The download finishes after the navigation settles; poll (bounded) for the file.
        let mut found = false;
        for _ in 0..200 {
            if std::fs::read_dir(dir.path()).unwrap().next().is_some() {
                found = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(
            found,
            "allowed download did not land in the session directory"
        );
        c.into_backend().close().await.unwrap();
    })
    .await;
}

/// Waits for the page's `wsState` to leave `pending`.
const WS_STATE_JS: &str = "new Promise(r => { const t = () => wsState === 'pending' ? setTimeout(t, 10) : r(wsState); t(); })";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_networks_are_refused_by_default_and_the_model_is_told_why() {
    let private = PageServer::start(None).await;
    let server = PageServer::start(Some(private.addr)).await;
    let port = private.addr.port();
    with_browser_options(strict_browser_options(), |browser| async move {
        // A start page on loopback that nobody named.
        let err = browser
            .new_session(page_opts(1.0, private.url("/targets")))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("private-network address (loopback)"), "{err}");

        // The session names only its own page server; the other loopback server is private.
        let mut opts = page_opts(1.0, server.url("/form"));
        opts.policy = OriginPolicy::default()
            .with_operator(&[OriginPattern::parse(&server.origin()).unwrap()], false);
        let mut c = computer(&browser, opts, Rules::allow_all()).await;
        // Typed navigations in every spelling of the address: refused before anything loads.
        for url in [
            format!("http://127.0.0.1:{port}/"),
            format!("http://localhost:{port}/"),
            format!("http://LocalHost.:{port}/"),
            format!("http://app.localhost:{port}/"),
            format!("http://127.1:{port}/"),
            format!("http://0x7f.1:{port}/"),
            format!("http://[::ffff:7f00:1]:{port}/"),
            format!("http://[::1]:{port}/"),
            format!("http://0.0.0.0:{port}/"),
            "http://169.254.169.254/latest/meta-data/".to_owned(),
        ] {
            let r = step(&mut c, Vendor::Gemini, json!({"name": "navigate", "args": {"url": url}})).await;
            assert_eq!(r.status, Status::Error, "{url}");
            assert!(r.error.as_deref().unwrap().contains("private-network address"), "{url}: {r:?}");
        }
        // A redirect to it: refused before it leaves; the page stays, and the step says why.
        let r = step(&mut c, Vendor::Gemini, json!({"name": "navigate", "args": {"url": server.url("/redirect")}})).await;
        assert_eq!(r.status, Status::Error);
        let text = r.text.clone().unwrap_or_default();
        assert!(text.contains(&format!("refused to open http://127.0.0.1:{port}/redirected")), "{r:?}");
        assert!(text.contains("private-network address (loopback)"), "{text}");
        assert_eq!(r.current_url, Some(server.url("/form")));
        // A popup, a WebSocket, a subresource and a worker, each under several names.
        ok_step(&mut c, Vendor::Gemini, json!({"name": "navigate", "args": {"url": server.url("/popup")}})).await;
        let r = step(&mut c, Vendor::Anthropic, json!({"action": "left_click", "coordinate": [50, 40]})).await;
        assert_eq!(r.status, Status::Error);
        assert!(r.error.as_deref().unwrap().contains("private-network address"), "{r:?}");
        ok_step(&mut c, Vendor::Gemini, json!({"name": "navigate", "args": {"url": server.url("/ws")}})).await;
        assert_ne!(c.backend().eval(WS_STATE_JS).await.unwrap(), "open");
        let mut names = vec![
            "localhost".to_owned(),
            "localhost.".to_owned(),
            "a.b.localhost".to_owned(),
            "[::ffff:7f00:1]".to_owned(),
            "127.1".to_owned(),
        ];
        // The machine's own name usually resolves (through /etc/hosts) to a private
        // address; when it does, it is one more name of a private address.
        if let Ok(host) = std::fs::read_to_string("/etc/hostname") {
            let host = host.trim().to_owned();
            let private_name = std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), port))
                .map(|mut a| a.all(|a| cordon_computer::private_net::private_range(a.ip()).is_some()))
                .unwrap_or(false);
            if private_name && !host.is_empty() {
                names.push(host);
            }
        }
        for name in &names {
            let fetched = c.backend().eval(format!(
                "fetch('http://{name}:{port}/sub', {{mode: 'no-cors'}}).then(() => 'loaded', () => 'failed')"
            )).await.unwrap();
            assert_eq!(fetched, "failed", "{name}");
            let ws = c.backend().eval(format!(
                "new Promise(r => {{ const s = new WebSocket('ws://{name}:{port}/socket'); \
                 s.onopen = () => r('open'); s.onerror = () => r('error'); }})"
            )).await.unwrap();
            assert_eq!(ws, "error", "{name}");
        }
        let r = ok_step(&mut c, Vendor::Anthropic, json!({"action": "screenshot"})).await;
        assert!(r.text.unwrap_or_default().contains("private-network address"));
        assert_eq!(private.hits(), Vec::<String>::new(), "the private server was reached");
        c.into_backend().close().await.unwrap();

        // Positive control: naming the origin in the allow-list lets the same page through.
        let mut opts = page_opts(1.0, server.url("/ws"));
        opts.policy = allow(&[&server.origin(), &private.origin()]);
        let c = computer(&browser, opts, Rules::allow_all()).await;
        c.backend().eval(WS_STATE_JS).await.unwrap();
        assert!(private.hits().iter().any(|h| h.starts_with("GET /socket")), "{:?}", private.hits());
        c.into_backend().close().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_allowed_origins_reach_private_networks_and_nothing_else_changes() {
    let private = PageServer::start(None).await;
    let other = PageServer::start(None).await;
    let mut options = strict_browser_options();
    options.allow_origins = vec![OriginPattern::parse(&private.origin()).unwrap()];
    with_browser_options(options, |browser| async move {
        let mut c = computer(
            &browser,
            page_opts(1.0, private.url("/targets")),
            Rules::allow_all(),
        )
        .await;
        // Also under another name of the same address.
        let localhost = format!("http://localhost:{}/named", private.addr.port());
        ok_step(
            &mut c,
            Vendor::Gemini,
            json!({"name": "navigate", "args": {"url": localhost}}),
        )
        .await;
        assert!(
            private.hits().iter().any(|h| h.starts_with("GET /named")),
            "{:?}",
            private.hits()
        );
        let r = step(
            &mut c,
            Vendor::Gemini,
            json!({"name": "navigate", "args": {"url": other.url("/")}}),
        )
        .await;
        assert_eq!(r.status, Status::Error);
        assert_eq!(other.hits(), Vec::<String>::new());
        c.into_backend().close().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_lists_match_every_name_of_an_address() {
    let blocked = PageServer::start(None).await;
    let server = PageServer::start(Some(blocked.addr)).await;
    let port = blocked.addr.port();
    with_browser(|browser| async move {
        let mut opts = page_opts(1.0, server.url("/targets"));
        opts.policy = OriginPolicy::new(vec![], vec![OriginPattern::parse(&blocked.origin()).unwrap()]);
        let mut c = computer(&browser, opts, Rules::allow_all()).await;
        for url in [
            format!("http://localhost:{port}/a"),
            format!("http://[::ffff:7f00:1]:{port}/b"),
            format!("http://127.1:{port}/c"),
            format!("http://LOCALHOST.:{port}/d"),
        ] {
            let r = step(&mut c, Vendor::Gemini, json!({"name": "navigate", "args": {"url": url}})).await;
            let said = format!("{:?} {:?}", r.error, r.text);
            assert!(said.contains("block-list"), "{url}: {said}");
        }
        let fetched = c.backend().eval(format!(
            "fetch('http://localhost:{port}/sub', {{mode: 'no-cors'}}).then(() => 'loaded', () => 'failed')"
        )).await.unwrap();
        assert_eq!(fetched, "failed");
        assert_eq!(blocked.hits(), Vec::<String>::new(), "the blocked origin was reached");
        // Positive control: the same names reach the page server that is not blocked.
        let r = ok_step(&mut c, Vendor::Gemini, json!({"name": "navigate", "args": {"url": format!("http://localhost:{}/ok", server.addr.port())}})).await;
        assert_eq!(r.error, None);
        assert!(server.hits().iter().any(|h| h.starts_with("GET /ok")), "{:?}", server.hits());
        c.into_backend().close().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webrtc_gathers_no_candidates_outside_the_proxy() {
    let server = PageServer::start(None).await;
    with_browser(|browser| async move {
        let c = computer(&browser, page_opts(1.0, server.url("/targets")), Rules::allow_all()).await;
        let candidates = c.backend().eval(
            "new Promise(async r => { const pc = new RTCPeerConnection({iceServers: []}); \
             pc.createDataChannel('x'); const c = []; \
             pc.onicecandidate = e => e.candidate ? c.push(e.candidate.candidate) : r(c); \
             await pc.setLocalDescription(await pc.createOffer()); setTimeout(() => r(c), 3000); })",
        ).await.unwrap();
        let candidates: Vec<String> = serde_json::from_value(candidates).unwrap();
        for c in &candidates {
            assert!(!c.contains(" udp ") && !c.contains("typ host") && !c.contains("typ srflx"), "{candidates:?}");
        }
        c.into_backend().close().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_storm_is_capped_and_other_sessions_keep_stepping() {
    let server = PageServer::start(None).await;
    with_browser(|browser| async move {
        let mut storm = computer(
            &browser,
            page_opts(1.0, server.url("/storm")),
            Rules::allow_all(),
        )
        .await;
        let mut calm = computer(
            &browser,
            page_opts(1.0, server.url("/targets")),
            Rules::allow_all(),
        )
        .await;
        for (i, (id, x, y)) in TARGETS.iter().enumerate().take(4) {
            // Target centres in model pixels (1280x800 shown as 1024x640).
            let at = [(x + TARGET_SIZE / 2) * 4 / 5, (y + TARGET_SIZE / 2) * 4 / 5];
            ok_step(
                &mut calm,
                Vendor::Anthropic,
                json!({"action": "left_click", "coordinate": at}),
            )
            .await;
            assert_eq!(eval(&calm, "hits.length").await, i + 1, "{id}");
            assert!(storm.backend().open_pages() <= cordon_computer::browser::MAX_OPEN_PAGES);
        }
        let r = ok_step(
            &mut storm,
            Vendor::Anthropic,
            json!({"action": "screenshot"}),
        )
        .await;
        let text = r.text.unwrap_or_default();
        assert!(
            text.contains("more windows than a session may have open at once (20)"),
            "{text}"
        );
        assert!(storm.backend().open_pages() <= cordon_computer::browser::MAX_OPEN_PAGES);
        assert_eq!(browser.generation(), 1, "Chromium was lost");
        storm.into_backend().close().await.unwrap();
        ok_step(
            &mut calm,
            Vendor::Anthropic,
            json!({"action": "screenshot"}),
        )
        .await;
        calm.into_backend().close().await.unwrap();
    })
    .await;
}

/// A link, a form or a script that navigates the page somewhere the policy refuses is
/// reported in the step (status `error`, the URL and the rule), and the page stays where
/// it was instead of showing Chromium's error page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_navigation_is_reported_and_the_page_stays() {
    let blocked = PageServer::start(None).await;
    let server = PageServer::start(Some(blocked.addr)).await;
    with_browser(|browser| async move {
        let form = server.url("/form");
        let mut opts = page_opts(1.0, form.clone());
        opts.policy = allow(&[&server.origin()]);
        let mut c = computer(&browser, opts, Rules::allow_all()).await;
        // The `Elsewhere` link (CSS 100..300 × 400..440) leads to the other server.
        let r = step(
            &mut c,
            Vendor::Anthropic,
            json!({"action": "left_click", "coordinate": [160, 336]}),
        )
        .await;
        assert_eq!(r.status, Status::Error, "{r:?}");
        let error = r.error.clone().unwrap();
        assert!(error.contains(&blocked.url("/landing")), "{error}");
        assert!(error.contains("not on the allow-list"), "{error}");
        let text = r.text.clone().unwrap_or_default();
        assert!(text.contains(&format!("stays on {form}")), "{text}");
        assert_eq!(r.current_url.as_deref(), Some(form.as_str()));
        assert!(r.screenshot.is_some());
        assert_eq!(eval(&c, "location.href").await, json!(form));
        // A script navigation and a redirect are refused the same way.
        let away = blocked.url("/scripted");
        eval(
            &c,
            &format!("setTimeout(() => location.href = '{away}', 0), 1"),
        )
        .await;
        let r = step(
            &mut c,
            Vendor::Anthropic,
            json!({"action": "wait", "duration": 0.2}),
        )
        .await;
        assert_eq!(r.status, Status::Error, "{r:?}");
        assert!(r.error.clone().unwrap().contains(&away), "{r:?}");
        assert_eq!(eval(&c, "location.href").await, json!(form));
        let r = step(
            &mut c,
            Vendor::Gemini,
            json!({"name": "navigate", "args": {"url": server.url("/redirect")}}),
        )
        .await;
        assert_eq!(r.status, Status::Error, "{r:?}");
        assert!(
            r.error
                .clone()
                .unwrap()
                .contains(&blocked.url("/redirected")),
            "{r:?}"
        );
        assert_eq!(r.current_url.as_deref(), Some(form.as_str()));
        // The session goes on: the next step is fine and reports no old refusal (Chromium's
        // own requests, such as autofill's, may still be noted as refused connections).
        let r = ok_step(&mut c, Vendor::Anthropic, json!({"action": "screenshot"})).await;
        let text = r.text.unwrap_or_default();
        assert!(!text.contains("refused to open"), "{text}");
        assert_eq!(
            blocked.hits(),
            Vec::<String>::new(),
            "the blocked origin was reached"
        );
        c.into_backend().close().await.unwrap();
    })
    .await;
}
