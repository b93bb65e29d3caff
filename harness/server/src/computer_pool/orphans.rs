//! The Chromium a killed server left behind: found by the pid the store recorded, killed
//! only when it is one of ours, and its profile directory removed.

use std::path::PathBuf;
use std::time::Duration;

/// The store's meta key for the pid of the Chromium a server runs: one per replica
/// address, since replicas share a store but each reaps only the Chromium of its own host
/// (a pid means nothing on another one); `chromium_pid` for a server running alone.
pub fn chromium_pid_key(replica_address: Option<&str>) -> String {
    match replica_address {
        Some(address) => format!("chromium_pid {address}"),
        None => "chromium_pid".to_owned(),
    }
}

/// Kills the Chromium a killed server left behind (`pid`, recorded while it ran), if that
/// process still runs and is one of ours; removes its profile directory. Returns whether
/// it found one.
pub fn reap_orphaned_chromium(pid: u32) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let args: Vec<String> = cmdline
        .split(|byte| *byte == 0)
        .map(|arg| String::from_utf8_lossy(arg).into_owned())
        .collect();
    let profile = args.iter().find_map(|arg| {
        arg.strip_prefix("--user-data-dir=")
            .filter(|dir| dir.contains("cordon-chromium-"))
            .map(PathBuf::from)
    });
    let Some(profile) = profile else {
        return false;
    };
    // The profile is named after the process that started this Chromium
    // (`cordon-chromium-<pid>-<n>`). If that process still runs, the browser is not an
    // orphan: another server sharing the database, or a reused pid.
    if let Some(owner) = profile_owner(&profile)
        && running(owner)
    {
        return false;
    }
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    let killed = kill(pid);
    if killed {
        // Its helper processes exit when the browser process does; give it a moment.
        for _ in 0..50 {
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    remove_profile(&profile, killed);
    killed
}

/// Removes a reaped Chromium's profile directory, but only when its kill succeeded and the
/// directory is one Cordon made: directly in the temp directory, named
/// `cordon-chromium-…`, a real directory (not a symlink) owned by this user. The path
/// comes from a process's command line, which anyone could have written.
fn remove_profile(profile: &std::path::Path, killed: bool) -> bool {
    if !killed || !own_profile_dir(profile) {
        return false;
    }
    std::fs::remove_dir_all(profile).is_ok()
}

fn own_profile_dir(profile: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    let named = profile
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("cordon-chromium-"));
    let temp = std::env::temp_dir().canonicalize().ok();
    let parent = profile.parent().and_then(|p| p.canonicalize().ok());
    let in_temp = temp.is_some() && parent == temp;
    // /proc/self belongs to this process's effective user.
    let me = std::fs::metadata("/proc/self").map(|m| m.uid()).ok();
    let ours = std::fs::symlink_metadata(profile)
        .is_ok_and(|m| m.file_type().is_dir() && Some(m.uid()) == me);
    named && in_temp && ours
}

/// Whether a process exists and has not exited (a zombie has: its parent has just not
/// collected it yet).
fn running(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // `pid (comm) state …`: comm may hold spaces and parentheses, so split at the last `)`.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next());
    !matches!(state, None | Some('Z' | 'X'))
}

/// The pid in a `cordon-chromium-<pid>-<n>` profile directory name.
fn profile_owner(profile: &std::path::Path) -> Option<u32> {
    let name = profile.file_name()?.to_str()?;
    let rest = name.strip_prefix("cordon-chromium-")?;
    rest.split('-').next()?.parse().ok()
}

#[allow(
    unsafe_code,
    reason = "kill(2) on a pid we checked is our Chromium; no memory is involved"
)]
fn kill(pid: i32) -> bool {
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    unsafe { libc::kill(pid, libc::SIGKILL) == 0 }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn each_replica_records_its_chromium_under_its_own_key() {
        let alone = chromium_pid_key(None);
        let a = chromium_pid_key(Some("http://10.0.0.5:7420"));
        let b = chromium_pid_key(Some("http://10.0.0.6:7420"));
        assert_eq!(alone, "chromium_pid");
        assert!(alone != a && a != b, "{alone} {a} {b}");
        assert_eq!(a, chromium_pid_key(Some("http://10.0.0.5:7420")));
    }

    #[test]
    fn a_chromium_whose_server_still_runs_is_not_reaped() {
        assert_eq!(
            profile_owner(std::path::Path::new("/tmp/cordon-chromium-4242-7")),
            Some(4242)
        );
        assert_eq!(
            profile_owner(std::path::Path::new("/tmp/other-4242-7")),
            None
        );
        // A process whose profile names a live owner (this test process) is left alone; a
        // shell carrying the flag stands in for the browser.
        let profile = format!(
            "--user-data-dir=/tmp/cordon-chromium-{}-0",
            std::process::id()
        );
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30; :", &profile])
            .spawn()
            .unwrap();
        // Until the shell has replaced the forked test process, its command line is empty.
        let cmdline = format!("/proc/{}/cmdline", child.id());
        for _ in 0..200 {
            if std::fs::read(&cmdline).is_ok_and(|c| !c.is_empty()) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!reap_orphaned_chromium(child.id()));
        assert!(
            child.try_wait().unwrap().is_none(),
            "the process was killed"
        );
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn only_our_own_profile_directories_in_temp_are_removed() {
        use std::os::unix::fs::PermissionsExt as _;
        let temp = std::env::temp_dir();
        let make = |name: &str| {
            let dir = temp.join(name);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
            dir
        };
        let id = std::process::id();
        // Ours, and the kill succeeded: removed.
        let ours = make(&format!("cordon-chromium-{id}-reap-1"));
        assert!(remove_profile(&ours, true));
        assert!(!ours.exists());
        // The kill failed: kept.
        let kept = make(&format!("cordon-chromium-{id}-reap-2"));
        assert!(!remove_profile(&kept, false));
        assert!(kept.exists());
        // Not directly in the temp directory (a command line can name any path).
        let outside = tempfile::tempdir_in(".").unwrap();
        let elsewhere = outside.path().join(format!("cordon-chromium-{id}-reap-3"));
        std::fs::create_dir(&elsewhere).unwrap();
        assert!(!remove_profile(&elsewhere, true));
        assert!(elsewhere.exists());
        let sneaky = temp.join(format!(
            "cordon-chromium-{id}-reap-2/../cordon-chromium-x/.."
        ));
        assert!(!remove_profile(&sneaky, true));
        assert!(kept.exists());
        // A symlink in the temp directory to a directory elsewhere.
        let link = temp.join(format!("cordon-chromium-{id}-reap-4"));
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
        assert!(!remove_profile(&link, true));
        assert!(elsewhere.exists());
        std::fs::remove_file(&link).unwrap();
        // Another user's directory (only root can make one to test with).
        if std::fs::metadata("/proc/self")
            .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
            .ok()
            == Some(0)
        {
            let theirs = make(&format!("cordon-chromium-{id}-reap-5"));
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
            assert!(!remove_profile(&theirs, true));
            assert!(theirs.exists());
            std::fs::remove_dir_all(&theirs).unwrap();
        }
        std::fs::remove_dir_all(&kept).unwrap();
    }
}
