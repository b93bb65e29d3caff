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
        // a redirect to the blocked origin
        ok_step(&mut c, Vendor::Gemini, json!({"name": "navigate", "args": {"url": server.url("/redirect")}})).await;
        // a popup to the blocked origin
        ok_step(&mut c, Vendor::Gemini, json!({"name": "navigate", "args": {"url": server.url("/popup")}})).await;
        ok_step(&mut c, Vendor::Anthropic, json!({"action": "left_click", "coordinate": [50, 40]})).await;
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
        ok_step(
            &mut c,
            Vendor::Anthropic,
            json!({"action": "left_click", "coordinate": [50, 40]}),
        )
        .await;
        let r = ok_step(
            &mut c,
            Vendor::Gemini,
            json!({"name": "navigate", "args": {"url": server.url("/redirect")}}),
        )
        .await;
        assert_ne!(r.current_url, Some(blocked.url("/redirected")));
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
