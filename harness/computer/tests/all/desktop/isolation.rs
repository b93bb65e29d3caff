//! Sessions are apart: two displays side by side see only their own windows and input,
//! and nothing a session started outlives it (closed, dropped, or dropped by a panic).

use super::*;
use cordon_computer::desktop::marked_processes;
use cordon_computer::image::decode_rgb;
use pretty_assertions::assert_eq;
use serde_json::json;

fn cat(bg: &str, geometry: &str) -> String {
    format!(r#"xterm -bg {bg} -geometry {geometry} -e sh -c 'cat > "$HOME/out.txt"'"#)
}

/// Pixels of the report's screenshot that are clearly `want` (red or blue).
fn count(r: &StepReport, want: [bool; 3]) -> usize {
    let (_, px) = decode_rgb(&r.screenshot.as_ref().unwrap().data).unwrap();
    px.as_chunks::<3>()
        .0
        .iter()
        .filter(|p| {
            p.iter()
                .zip(want)
                .all(|(v, on)| if on { *v > 200 } else { *v < 60 })
        })
        .count()
}
const RED: [bool; 3] = [true, false, false];
const BLUE: [bool; 3] = [false, false, true];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_run_side_by_side_without_seeing_each_other() {
    let a = start(&[&cat("red", "40x10+0+0")]).await;
    let b = start(&[&cat("blue", "40x10+600+400")]).await;
    assert_ne!(a.display(), b.display());
    assert_ne!(a.home(), b.home());
    let (a_out, b_out) = (a.home().join("out.txt"), b.home().join("out.txt"));
    let mut a = computer(a, Rules::allow_all());
    let mut b = computer(b, Rules::allow_all());
    // Each clicks into its own terminal; B also clicks where A's window is in A's display,
    // which in B is bare root.
    let ra = ok_step(
        &mut a,
        json!({"action": "left_click", "coordinate": m(100, 50)}),
    )
    .await;
    let rb = ok_step(
        &mut b,
        json!({"action": "left_click", "coordinate": m(100, 50)}),
    )
    .await;
    assert_eq!(rb.current_url.as_deref(), Some("x11:"));
    assert!(
        count(&ra, RED) > 10_000 && count(&ra, BLUE) == 0,
        "A sees only red"
    );
    assert!(
        count(&rb, BLUE) > 10_000 && count(&rb, RED) == 0,
        "B sees only blue"
    );
    // Typing in B while the pointer is over nothing reaches no program.
    ok_step(&mut b, json!({"action": "type", "text": "lost\n"})).await;
    ok_step(
        &mut b,
        json!({"action": "left_click", "coordinate": m(700, 450)}),
    )
    .await;
    // Interleaved typing: each file gets only its own text.
    ok_step(&mut a, json!({"action": "type", "text": "from a\n"})).await;
    ok_step(&mut b, json!({"action": "type", "text": "from b\n"})).await;
    ok_step(&mut a, json!({"action": "type", "text": "more a\n"})).await;
    let windows = |c: &mut Computer<DesktopSession>| {
        c.backend_mut()
            .windows()
            .unwrap()
            .into_iter()
            .map(|w| (w.x, w.y))
            .collect::<Vec<_>>()
    };
    assert_eq!(windows(&mut a), [(0, 0)]);
    assert_eq!(windows(&mut b), [(600, 400)]);
    for c in [&mut a, &mut b] {
        ok_step(c, json!({"action": "key", "text": "ctrl+d"})).await;
    }
    assert_eq!(
        file_becomes(&a_out, "from a\nmore a\n").await,
        "from a\nmore a\n"
    );
    assert_eq!(file_becomes(&b_out, "from b\n").await, "from b\n");
    a.into_backend().close().await.unwrap();
    b.into_backend().close().await.unwrap();
}

/// The one child of `parent` (waits, bounded, for it to appear).
async fn only_child(parent: u32) -> u32 {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let kids: Vec<u32> = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| {
                let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
                let ppid = stat[stat.rfind(')')? + 1..].split_whitespace().nth(1)?;
                (ppid.parse::<u32>().ok()? == parent)
                    .then(|| e.file_name().to_str()?.parse().ok())?
            })
            .collect();
        if let [kid] = kids[..] {
            return kid;
        }
        assert!(Instant::now() < until, "children of {parent}: {kids:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn socket(session: &DesktopSession) -> std::path::PathBuf {
    format!("/tmp/.X11-unix/X{}", &session.display()[1..]).into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_leaves_no_process_socket_or_directory_behind() {
    let mut s = start(&[
        r#"xterm -e sh -c 'cat > "$HOME/out.txt"'"#,
        "sh -c 'sleep 600 & sleep 600'",
        // Leaves the group and the marker behind: only its parent knows it.
        "sh -c 'setsid env -i sleep 600 & wait'",
    ])
    .await;
    let id = s.id().to_owned();
    let mut pids: Vec<u32> = s.programs().iter().map(|p| p.pid).collect();
    let escapee = only_child(pids[2]).await;
    pids.push(s.xvfb_pid().unwrap());
    let (sock, dir) = (socket(&s), s.dir().to_owned());
    let display = s.display()[1..].to_owned();
    assert!(sock.exists() && dir.exists());
    // Xvfb, xterm, the shell in its terminal (a session of its own) with cat, sh, 2×sleep.
    let marked = marked_processes(&id);
    assert!(marked.len() >= 6, "{marked:?}");
    for p in &pids {
        assert!(marked.contains(p), "{p} in {marked:?}");
    }
    s.close().await.unwrap();
    assert_eq!(marked_processes(&id), Vec::<u32>::new());
    for p in marked {
        assert!(!alive(p), "{p} outlived its session");
    }
    assert!(
        !alive(escapee),
        "the unmarked {escapee} outlived its session"
    );
    // The socket is gone, unless another test's server took the number over since.
    let xvfb = pids[pids.len() - 1];
    let lock = std::fs::read_to_string(format!("/tmp/.X{}-lock", display)).unwrap_or_default();
    let reused = lock.trim().parse::<u32>().is_ok_and(|owner| owner != xvfb);
    assert!(reused || !sock.exists(), "{} left behind", sock.display());
    assert!(!dir.exists(), "{} left behind", dir.display());
}

#[test]
fn a_panic_drops_the_session_and_everything_in_it() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let outcome = rt.block_on(rt.spawn(async move {
        let s = start(&["xterm", "sh -c 'sleep 600'"]).await;
        tx.send((s.id().to_owned(), marked_processes(s.id())))
            .unwrap();
        panic!("the caller fails mid-session");
    }));
    assert!(outcome.unwrap_err().is_panic());
    let (id, marked) = rx.recv().unwrap();
    assert!(marked.len() >= 3, "{marked:?}");
    assert_eq!(marked_processes(&id), Vec::<u32>::new());
    assert!(marked.iter().all(|p| !alive(*p)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cookie_is_readable_by_its_owner_only_and_never_logged() {
    use std::os::unix::fs::PermissionsExt as _;
    let s = start(&[]).await;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let auth = s.dir().join("Xauthority");
    assert_eq!((mode(s.dir()), mode(&auth)), (0o700, 0o600));
    let file = std::fs::read(&auth).unwrap();
    let cookie = &file[file.len() - 16..];
    let debug = format!("{s:?}");
    assert!(!debug.contains(&format!("{cookie:?}")), "{debug}");
    s.close().await.unwrap();
}
