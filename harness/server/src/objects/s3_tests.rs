//! The object store against a real S3 wire-protocol server: moto's server mode, started
//! here on a loopback port and stopped when the test ends. Moto is the S3 stand-in most
//! projects test against, it installs from PyPI with the other test clients
//! (tests/requirements.txt), and it checks the requests' shape as S3 does.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::{Objects, ObjectsError};

/// A moto S3 server on a free loopback port, killed on drop.
struct Moto {
    child: Child,
    port: u16,
}

impl Moto {
    fn start() -> Moto {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let child = Command::new("python3")
            .args([
                "-m",
                "moto.server",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 starts");
        let mut moto = Moto { child, port };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = moto.child.try_wait() {
                panic!(
                    "moto's S3 server exited ({status}); install the test clients: \
                     tests/bootstrap.sh (or python3 -m pip install 'moto[s3,server]')"
                );
            }
            assert!(Instant::now() < deadline, "moto did not listen within 30 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        moto
    }

    /// Creates `bucket` with a bare request (moto does not check signatures).
    fn create_bucket(&self, bucket: &str) {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            stream,
            "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.port
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }

    fn open(&self, location: &str) -> Result<Objects, ObjectsError> {
        let settings = [
            ("endpoint", format!("http://127.0.0.1:{}", self.port)),
            ("allow_http", "true".to_owned()),
            ("region", "us-east-1".to_owned()),
            ("access_key_id", "test".to_owned()),
            ("secret_access_key", "test".to_owned()),
        ];
        Objects::open_with(location, settings.map(|(k, v)| (k.to_owned(), v)))
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn an_s3_store_keeps_replaces_and_forgets_objects_under_its_prefix() {
    let moto = Moto::start();
    moto.create_bucket("cordon-test");
    let objects = moto.open("s3://cordon-test/replicas/a").unwrap();
    let other_prefix = moto.open("s3://cordon-test/replicas/b").unwrap();
    assert_eq!(objects.describe(), "s3://cordon-test/replicas/a");

    assert_eq!(objects.get("paused/sbx_1").await.unwrap(), None);
    let big = Bytes::from(vec![7u8; 3 * 1024 * 1024]);
    objects.put("paused/sbx_1", big.clone()).await.unwrap();
    assert_eq!(objects.get("paused/sbx_1").await.unwrap(), Some(big));
    objects
        .put("paused/sbx_1", Bytes::from_static(b"again"))
        .await
        .unwrap();
    assert_eq!(
        objects.get("paused/sbx_1").await.unwrap().as_deref(),
        Some(&b"again"[..])
    );
    // Prefixes keep stores apart in one bucket.
    assert_eq!(other_prefix.get("paused/sbx_1").await.unwrap(), None);
    objects.delete("paused/sbx_1").await.unwrap();
    objects.delete("paused/sbx_1").await.unwrap();
    assert_eq!(objects.get("paused/sbx_1").await.unwrap(), None);
}

#[tokio::test]
async fn a_missing_bucket_is_an_error_not_an_empty_store() {
    let moto = Moto::start();
    let objects = moto.open("s3://no-such-bucket").unwrap();
    let put = objects.put("x", Bytes::from_static(b"x")).await;
    assert!(matches!(put, Err(ObjectsError::Store(_))), "{put:?}");
}

#[test]
fn credentials_are_refused_in_the_location() {
    let error = Objects::open("s3://bucket/p?secret_access_key=abc")
        .unwrap_err()
        .to_string();
    assert!(error.contains("environment"), "{error}");
    let error = Objects::open("s3://bucket/p?colour=blue")
        .unwrap_err()
        .to_string();
    assert!(error.contains("not an S3 setting"), "{error}");
}
