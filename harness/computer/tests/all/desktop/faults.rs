//! Bad input ends in a typed, clear outcome and hurts no other session: programs that
//! exit, hang or flood the display; an X server that dies; actions outside the screen or
//! beyond the desktop; keys that cannot be typed; missing binaries.

use super::*;
use cordon_computer::Error;
use cordon_computer::desktop::marked_processes;
use pretty_assertions::assert_eq;
use serde_json::json;

fn capped(launch: &[&str], cap_ms: u64) -> DesktopOptions {
    let mut o = opts(launch);
    o.settle_cap = Duration::from_millis(cap_ms);
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_that_exits_is_reported_and_the_session_goes_on() {
    let mut s = start(&["sh -c 'echo bye; exit 3'", "xev -geometry 100x100+0+0"]).await;
    let p = exited(&mut s, 0).await;
    assert_eq!(
        (p.state.clone(), std::fs::read_to_string(&p.log).unwrap()),
        (
            ProgramState::Exited {
                code: Some(3),
                signal: None
            },
            "bye\n".to_owned()
        )
    );
    let exits = s.take_exits();
    assert_eq!(exits.len(), 1, "{exits:?}");
    assert!(s.take_exits().is_empty(), "reported once");
    let mut c = computer(s, Rules::allow_all());
    ok_step(
        &mut c,
        json!({"action": "left_click", "coordinate": m(50, 50)}),
    )
    .await;
    // It stays unreaped until the session stops, so that its pid (the number of the
    // process group the session signals on close) cannot pass to another process.
    let proc_dir = format!("/proc/{}", p.pid);
    assert!(Path::new(&proc_dir).exists() && !alive(p.pid));
    c.into_backend().close().await.unwrap();
    assert!(!Path::new(&proc_dir).exists(), "reaped on close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hanging_and_flooding_programs_end_the_settle_at_its_cap() {
    // A spinning program never waits: every step ends at the cap with `settled: false`.
    // A flooding one keeps the screen changing: the step returns a screenshot all the
    // same (settled or not: on a starved CPU even a flood has quiet moments).
    for (launch, spins) in [
        ("sh -c 'while :; do :; done'", true),
        ("xterm -e sh -c 'while :; do echo flood; done'", false),
    ] {
        let s = DesktopSession::start(capped(&[launch], 300)).await.unwrap();
        let mut c = computer(s, Rules::allow_all());
        let r = ok_step(&mut c, json!({"action": "screenshot"})).await;
        if spins {
            assert!(!r.settled, "{launch}: {:?}", r.timings_ms);
        }
        assert_eq!(r.screenshot.unwrap().size, Size::new(1024, 640));
        let id = c.backend().id().to_owned();
        c.into_backend().close().await.unwrap();
        assert_eq!(marked_processes(&id), Vec::<u32>::new(), "{launch}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_x_server_that_dies_fails_only_its_own_session() {
    let doomed = start(&["xterm"]).await;
    let other = start(&["xev -geometry 100x100+0+0"]).await;
    let (id, pid) = (doomed.id().to_owned(), doomed.xvfb_pid().unwrap());
    let mut doomed = computer(doomed, Rules::allow_all());
    let mut other = computer(other, Rules::allow_all());
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let call = decode(
        Vendor::Anthropic,
        &json!({"action": "left_click", "coordinate": [10, 10]}),
    )
    .unwrap();
    let err = doomed.step(call, None).await.unwrap_err();
    assert!(matches!(err, Error::DisplayLost { .. }), "{err:?}");
    assert!(!err.is_model_visible());
    assert!(err.to_string().contains("open a new session"), "{err}");
    // The next call fails the same way, at once.
    let call = decode(Vendor::Anthropic, &json!({"action": "screenshot"})).unwrap();
    assert!(matches!(
        doomed.step(call, None).await,
        Err(Error::DisplayLost { .. })
    ));
    ok_step(
        &mut other,
        json!({"action": "left_click", "coordinate": m(50, 50)}),
    )
    .await;
    let display = doomed.backend().display()[1..].to_owned();
    doomed.into_backend().close().await.unwrap();
    assert_eq!(marked_processes(&id), Vec::<u32>::new());
    // The killed server's lock (and socket) are cleaned up with the session, unless a
    // new server (another test) has taken the display number over since.
    let lock = std::fs::read_to_string(format!("/tmp/.X{display}-lock")).unwrap_or_default();
    assert_ne!(
        lock.trim().parse::<u32>().ok(),
        Some(pid),
        "stale lock left"
    );
    other.into_backend().close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actions_outside_the_screen_or_the_desktop_are_model_visible() {
    let mut c = computer(start(&[]).await, Rules::allow_all());
    let r = step(
        &mut c,
        json!({"action": "left_click", "coordinate": [1024, 10]}),
    )
    .await;
    assert_eq!(r.status, Status::Error);
    assert_eq!(
        r.error.as_deref(),
        Some("coordinate (1024, 10) is outside the screen: x must be in 0..=1023 and y in 0..=639")
    );
    let item = json!({"name": "navigate", "args": {"url": "https://example.com"}});
    let r = c
        .step(decode(Vendor::Gemini, &item).unwrap(), Some(&item))
        .await
        .unwrap();
    assert_eq!(r.status, Status::Error);
    assert!(
        r.error.as_deref().unwrap().starts_with("navigation")
            && r.error.as_deref().unwrap().contains("desktop backend"),
        "{:?}",
        r.error
    );
    let r = step(&mut c, json!({"action": "key", "text": "ctrl+\u{1}"})).await;
    assert_eq!(r.status, Status::Error);
    assert!(
        r.error.as_deref().unwrap().contains("U+0001"),
        "{:?}",
        r.error
    );
    // Nothing is left held: a plain screenshot step works and Control is up.
    let r = ok_step(&mut c, json!({"action": "screenshot"})).await;
    assert_eq!(r.screenshot.unwrap().size, Size::new(1024, 640));
    c.into_backend().close().await.unwrap();
}

/// Processes whose working directory is inside `dir`.
fn working_in(dir: &Path) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<u32>().ok()?;
            let cwd = std::fs::read_link(e.path().join("cwd")).ok()?;
            (cwd.starts_with(dir) && alive(pid)).then_some(pid)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_starts_say_why_and_leave_nothing_running() {
    let base = tempfile::tempdir().unwrap();
    let mut o = opts(&[]);
    o.base_dir = Some(base.path().into());
    o.xvfb = "/nonexistent/Xvfb".into();
    let err = DesktopSession::start(o.clone()).await.unwrap_err();
    assert!(matches!(err, Error::XvfbMissing { .. }), "{err:?}");
    assert!(err.to_string().contains("apt-get install -y xvfb"), "{err}");

    // The server starts, then a program cannot: the server is stopped again.
    o.xvfb = DesktopOptions::default().xvfb;
    o.launch = vec!["xterm".into(), "no-such-program --flag".into()];
    let err = DesktopSession::start(o.clone()).await.unwrap_err();
    assert!(matches!(err, Error::Desktop(_)), "{err:?}");
    assert!(err.to_string().contains("no-such-program"), "{err}");
    assert_eq!(working_in(base.path()), Vec::<u32>::new());
    assert_eq!(
        std::fs::read_dir(base.path()).unwrap().count(),
        0,
        "session dirs removed"
    );

    o.launch = vec!["xterm -e 'unterminated".into()];
    let err = DesktopSession::start(o.clone()).await.unwrap_err();
    assert!(err.to_string().contains("unterminated"), "{err}");
    o.launch.clear();
    o.depth = 8;
    let err = DesktopSession::start(o).await.unwrap_err();
    assert!(matches!(err, Error::Config(_)), "{err:?}");
}
