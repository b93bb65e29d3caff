//! A throwaway PostgreSQL cluster for tests: `initdb` in a temporary directory, `postgres`
//! on a free loopback port, a database per test (`createdb`). PostgreSQL refuses to run as
//! root, so as root both run as `nobody` (`setpriv`), in a directory that user owns.
//!
//! The server runs under a small `sh` watchdog that stops it and removes its directory
//! when the cluster is dropped (a test that panics drops it too) or when the test process
//! is gone (a cluster shared by a whole test binary is never dropped).
//!
//! Shared by `cordon-server`'s and `cordon-cli`'s tests (the latter include this file).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    dead_code,
    reason = "test support"
)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Debian's package with the server binaries.
pub const INSTALL: &str = "apt-get install -y postgresql";

/// The watchdog: starts `postgres` (the command in "$@"), and stops it and removes the
/// cluster's directory when told to (SIGTERM) or when the test process `$3` exits.
const WATCHDOG: &str = r#"
base=$1; port=$2; watched=$3; shift 3
"$@" -D "$base/data" -p "$port" -k "$base" -c listen_addresses=127.0.0.1 \
    -c fsync=off -c synchronous_commit=off -c full_page_writes=off \
    -c max_connections=200 >"$base/postgres.log" 2>&1 &
pg=$!
stop() { kill -INT "$pg" 2>/dev/null; wait "$pg" 2>/dev/null; rm -rf "$base"; exit 0; }
trap stop TERM INT
while kill -0 "$watched" 2>/dev/null; do sleep 0.2; done
stop
"#;

/// A running cluster; stopped and deleted when dropped.
pub struct PgCluster {
    base: PathBuf,
    port: u16,
    bin: PathBuf,
    watchdog: Child,
}

impl PgCluster {
    /// Starts a cluster and waits until it accepts connections. Panics with the install
    /// command when PostgreSQL's server binaries are missing.
    pub fn start() -> PgCluster {
        let bin = server_bin_dir().unwrap_or_else(|| {
            panic!(
                "PostgreSQL's server binaries (initdb, postgres) are not installed: \
                 run `{INSTALL}` (tests/bootstrap.sh does), or point CORDON_PG_BIN at \
                 their directory"
            )
        });
        let base = tempfile::Builder::new()
            .prefix("cordon-pg-")
            .tempdir()
            .unwrap()
            .keep();
        let as_user = unprivileged_user();
        if let Some((uid, gid)) = as_user {
            std::os::unix::fs::chown(&base, Some(uid), Some(gid)).unwrap();
        }
        let run_as = |program: &Path| -> Command {
            match as_user {
                Some((uid, gid)) => {
                    let mut command = Command::new("setpriv");
                    command
                        .arg(format!("--reuid={uid}"))
                        .arg(format!("--regid={gid}"))
                        .arg("--clear-groups")
                        .arg(program);
                    command
                }
                None => Command::new(program),
            }
        };
        let initdb = run_as(&bin.join("initdb"))
            .args(["-D"])
            .arg(base.join("data"))
            .args(["-U", "cordon", "-A", "trust", "-E", "UTF8", "--no-sync"])
            .current_dir(&base)
            .output()
            .expect("initdb runs");
        assert!(
            initdb.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&initdb.stderr)
        );
        let port = free_port();
        let postgres = run_as(&bin.join("postgres"));
        let mut watchdog = Command::new("sh");
        watchdog
            .args(["-c", WATCHDOG, "pg-watchdog"])
            .arg(&base)
            .arg(port.to_string())
            .arg(std::process::id().to_string())
            .arg(postgres.get_program())
            .args(postgres.get_args())
            .current_dir(&base)
            .stdin(Stdio::null());
        let cluster = PgCluster {
            base,
            port,
            bin,
            watchdog: watchdog.spawn().expect("sh runs"),
        };
        cluster.wait_ready();
        cluster
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ready = Command::new(self.bin.join("pg_isready"))
                .args([
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &self.port.to_string(),
                    "-U",
                    "cordon",
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|status| status.success());
            if ready {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "PostgreSQL did not start: {}",
                std::fs::read_to_string(self.base.join("postgres.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Creates a fresh database; returns its URL.
    pub fn create_database(&self, prefix: &str) -> String {
        static NEXT: AtomicU32 = AtomicU32::new(1);
        let name = format!("{prefix}_{}", NEXT.fetch_add(1, Ordering::SeqCst));
        let created = Command::new(self.bin.join("createdb"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "cordon",
            ])
            .arg(&name)
            .output()
            .expect("createdb runs");
        assert!(
            created.status.success(),
            "createdb {name}: {}",
            String::from_utf8_lossy(&created.stderr)
        );
        self.url(&name)
    }

    /// The URL of database `name`.
    pub fn url(&self, name: &str) -> String {
        format!("postgres://cordon@127.0.0.1:{}/{name}", self.port)
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.watchdog.id().to_string()])
            .status();
        let _ = self.watchdog.wait();
    }
}

/// The newest `/usr/lib/postgresql/*/bin` with `initdb` (or `$CORDON_PG_BIN`).
fn server_bin_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("CORDON_PG_BIN") {
        return Some(PathBuf::from(dir)).filter(|dir| dir.join("initdb").exists());
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

/// As root: `nobody`'s uid and gid (PostgreSQL refuses root). Otherwise `None`.
fn unprivileged_user() -> Option<(u32, u32)> {
    let id = |args: &[&str]| -> u32 {
        let out = Command::new("id").args(args).output().expect("id runs");
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    };
    (id(&["-u"]) == 0).then(|| (id(&["-u", "nobody"]), id(&["-g", "nobody"])))
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}
