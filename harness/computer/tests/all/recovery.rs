//! A crashed or hung Chromium fails only the sessions that ran in it, with a typed error;
//! the next session gets a new process.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use crate::common::*;
use cordon_computer::browser::Browser;
use cordon_computer::display::Size;
use cordon_computer::gate::Rules;
use cordon_computer::{Error, Status};
use cordon_protocol::computer::{Vendor, decode};
use serde_json::json;
use std::time::Duration;

fn signal(pid: u32, sig: &str) {
    let ok = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {pid}");
}

fn click() -> cordon_protocol::computer::ComputerCall {
    decode(
        Vendor::Anthropic,
        &json!({"action": "left_click", "coordinate": [512, 320]}),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_browser_fails_its_sessions_and_the_next_session_restarts_it() {
    let server = PageServer::start(None).await;
    with_browser(|browser| async move {
        let opts = || page_opts(1.0, server.url("/targets"));
        let mut a = computer(&browser, opts(), Rules::allow_all()).await;
        let mut b = computer(&browser, opts(), Rules::allow_all()).await;
        ok_step(&mut a, Vendor::Anthropic, json!({"action": "screenshot"})).await;
        let first = browser.pid().expect("chromium pid");
        assert_eq!(browser.generation(), 1);

        signal(first, "-KILL");
        // Both sessions of the dead process report it, without waiting for a timeout.
        for c in [&mut a, &mut b] {
            match c.step(click(), None).await {
                Err(Error::BrowserLost { reason }) => {
                    assert!(reason.contains("Chromium"), "{reason}");
                }
                other => panic!("expected BrowserLost, got {other:?}"),
            }
        }
        let err = a.step(click(), None).await.unwrap_err();
        assert!(!err.is_model_visible());
        assert!(err.to_string().contains("open a new session"), "{err}");

        // A new session runs in a new process, and works.
        let mut c = computer(&browser, opts(), Rules::allow_all()).await;
        assert_eq!(browser.generation(), 2);
        assert_ne!(browser.pid(), Some(first));
        let r = left_click(&mut c, [512, 320]).await;
        assert_eq!(r.current_url, Some(server.url("/targets")));
        assert_eq!(r.screenshot.unwrap().size, Size::new(1024, 640));

        // The old sessions stay failed (they do not silently move to the new process),
        // and closing them is fine.
        assert!(matches!(
            b.step(click(), None).await,
            Err(Error::BrowserLost { .. })
        ));
        a.into_backend().close().await.unwrap();
        b.into_backend().close().await.unwrap();
        ok_step(&mut c, Vendor::Anthropic, json!({"action": "screenshot"})).await;
        c.into_backend().close().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_browser_is_detected_killed_and_replaced() {
    let server = PageServer::start(None).await;
    let mut o = browser_options();
    o.request_timeout = Duration::from_secs(2);
    let browser = Browser::launch(o).await.unwrap();
    let opts = page_opts(1.0, server.url("/targets"));
    let mut a = computer(&browser, opts.clone(), Rules::allow_all()).await;
    ok_step(&mut a, Vendor::Anthropic, json!({"action": "screenshot"})).await;
    let first = browser.pid().unwrap();
    // Frozen, not dead: the process is there but answers nothing.
    signal(first, "-STOP");
    match a.step(click(), None).await {
        Err(Error::BrowserLost { reason }) => {
            assert!(reason.contains("stopped answering"), "{reason}")
        }
        other => {
            signal(first, "-KILL");
            panic!("expected BrowserLost, got {other:?}");
        }
    }
    let mut c = computer(&browser, opts, Rules::allow_all()).await;
    assert_ne!(browser.pid(), Some(first));
    let r = ok_step(&mut c, Vendor::Anthropic, json!({"action": "screenshot"})).await;
    assert_eq!(r.status, Status::Ok);
    // The frozen process was killed when it was replaced.
    assert!(
        !std::path::Path::new(&format!("/proc/{first}/status")).exists()
            || std::fs::read_to_string(format!("/proc/{first}/status"))
                .unwrap()
                .contains("zombie")
    );
    a.into_backend().close().await.unwrap();
    c.into_backend().close().await.unwrap();
    browser.close().await.unwrap();
}
