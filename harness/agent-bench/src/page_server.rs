//! A small static file server on 127.0.0.1 for the pages of web tasks: a suite directory
//! on disk, or the built-in suite compiled into the binary. GET and HEAD only, one request
//! per connection; paths with `..` are refused.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::error::{BenchError, Result};

/// What a [`PageServer`] serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageRoot {
    /// Files under this directory.
    Dir(PathBuf),
    /// The built-in suite's files.
    Builtin,
}

/// A loopback server for task pages; stops when dropped.
#[derive(Debug)]
pub struct PageServer {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for PageServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl PageServer {
    /// Starts serving `root` on an ephemeral port of 127.0.0.1.
    pub async fn start(root: PageRoot) -> Result<PageServer> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| BenchError::io("the task pages server", e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| BenchError::io("the task pages server", e))?;
        let root = Arc::new(root);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let root = root.clone();
                tokio::spawn(async move {
                    let _answered = serve(stream, &root).await;
                });
            }
        });
        Ok(PageServer { addr, task })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The URL of `path` (relative to the root).
    pub fn url(&self, path: &str) -> String {
        format!("{}/{}", self.origin(), path.trim_start_matches('/'))
    }
}

fn content_type(path: &str) -> &'static str {
    let ext = path.rsplit('.').next().unwrap_or("");
    match ext {
        "html" | "htm" => "text/html; charset=utf-8",
        "js" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" => "application/json",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "svg" => "image/svg+xml",
        "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

fn lookup(root: &PageRoot, path: &str) -> Option<Vec<u8>> {
    let path = path.split(['?', '#']).next().unwrap_or("");
    let path = path.trim_start_matches('/');
    if path
        .split('/')
        .any(|part| part == ".." || part == "." || part.contains('\\'))
    {
        return None;
    }
    let path = if path.is_empty() || path.ends_with('/') {
        format!("{path}index.html")
    } else {
        path.to_owned()
    };
    match root {
        PageRoot::Dir(dir) => std::fs::read(dir.join(&path)).ok(),
        PageRoot::Builtin => crate::builtin::file(&path).map(<[u8]>::to_vec),
    }
}

async fn serve(mut stream: TcpStream, root: &PageRoot) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut chunk).await?;
        if n == 0 || buf.len() > 16 * 1024 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf);
    let mut words = head.split_whitespace();
    let method = words.next().unwrap_or("");
    let target = words.next().unwrap_or("/");
    let (status, body, kind) = match method {
        "GET" | "HEAD" => match lookup(root, target) {
            Some(body) => (
                "200 OK",
                body,
                content_type(target.split('?').next().unwrap_or("")),
            ),
            None => ("404 Not Found", b"not found".to_vec(), "text/plain"),
        },
        _ => ("405 Method Not Allowed", Vec::new(), "text/plain"),
    };
    let header = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\ncache-control: no-store\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(header.as_bytes()).await?;
    if method != "HEAD" {
        stream.write_all(&body).await?;
    }
    stream.shutdown().await
}
