//! A SOCKS5 proxy per session that refuses connections to blocked endpoints.
//!
//! Chromium's browser-wide `Fetch` interception sees HTTP(S) requests but not WebSockets
//! (FIELD-NOTES). A context with an allow-list routes everything through a dead proxy and
//! lets the allowed origins bypass it; a block-list cannot be written as a bypass list
//! (Chromium has no negative rules), so a context with only a block-list is routed through
//! this proxy instead. Through SOCKS5 Chromium tunnels every connection (HTTP, HTTPS,
//! WebSockets) and names the host, so one check on `host:port` covers them all, workers
//! included. The proxy sees no scheme: an endpoint is refused when any http/https/ws/wss
//! origin at that host and port is blocked ([`OriginPolicy::check_endpoint`]).

use crate::origin::OriginPolicy;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// The longest a client may take for the handshake, and we for the upstream connect.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

// SOCKS5 (RFC 1928) constants.
const VERSION: u8 = 5;
const NO_AUTH: u8 = 0;
const NO_ACCEPTABLE_METHOD: u8 = 0xFF;
const CMD_CONNECT: u8 = 1;
const ATYP_IPV4: u8 = 1;
const ATYP_DOMAIN: u8 = 3;
const ATYP_IPV6: u8 = 4;
const REPLY_OK: u8 = 0;
const REPLY_GENERAL_FAILURE: u8 = 1;
const REPLY_NOT_ALLOWED: u8 = 2;
const REPLY_HOST_UNREACHABLE: u8 = 4;
const REPLY_COMMAND_NOT_SUPPORTED: u8 = 7;
const REPLY_ADDRESS_NOT_SUPPORTED: u8 = 8;

/// A running proxy; stops when dropped.
#[derive(Debug)]
pub(crate) struct BlockingProxy {
    port: u16,
    task: JoinHandle<()>,
}

impl Drop for BlockingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl BlockingProxy {
    /// Listens on a free loopback port.
    pub(crate) async fn start(policy: OriginPolicy) -> std::io::Result<Self> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let port = listener.local_addr()?.port();
        let task = tokio::spawn(async move {
            // Each connection is its own task, aborted with the runtime; dropping the
            // proxy stops new ones, and Chromium closes the rest with the context.
            while let Ok((client, _)) = listener.accept().await {
                let policy = policy.clone();
                tokio::spawn(async move {
                    let _done = serve(client, &policy).await;
                });
            }
        });
        Ok(Self { port, task })
    }

    /// Chromium's `proxyServer` value.
    pub(crate) fn proxy_server(&self) -> String {
        format!("socks5://127.0.0.1:{}", self.port)
    }
}

/// One client connection: handshake, check, then relay until either side closes.
async fn serve(mut client: TcpStream, policy: &OriginPolicy) -> std::io::Result<()> {
    let target = tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(&mut client))
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
    let Some((host, port)) = target else {
        return Ok(());
    };
    if policy.check_endpoint(&host, port).is_err() {
        return reply(&mut client, REPLY_NOT_ALLOWED).await;
    }
    let upstream = tokio::time::timeout(HANDSHAKE_TIMEOUT, TcpStream::connect((host, port))).await;
    let Ok(Ok(mut upstream)) = upstream else {
        return reply(&mut client, REPLY_HOST_UNREACHABLE).await;
    };
    let _nodelay = upstream.set_nodelay(true);
    reply(&mut client, REPLY_OK).await?;
    tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    Ok(())
}

/// Reads the greeting and the CONNECT request. `None`: refused (already answered).
async fn handshake(client: &mut TcpStream) -> std::io::Result<Option<(String, u16)>> {
    let [version, methods] = read_array(client).await?;
    let mut offered = vec![0; usize::from(methods)];
    client.read_exact(&mut offered).await?;
    if version != VERSION || !offered.contains(&NO_AUTH) {
        client.write_all(&[VERSION, NO_ACCEPTABLE_METHOD]).await?;
        return Ok(None);
    }
    client.write_all(&[VERSION, NO_AUTH]).await?;
    let [_version, command, _reserved, address_type] = read_array(client).await?;
    let host = match address_type {
        ATYP_IPV4 => Ipv4Addr::from(read_array::<4>(client).await?).to_string(),
        ATYP_IPV6 => Ipv6Addr::from(read_array::<16>(client).await?).to_string(),
        ATYP_DOMAIN => {
            let [len] = read_array(client).await?;
            let mut name = vec![0; usize::from(len)];
            client.read_exact(&mut name).await?;
            match String::from_utf8(name) {
                Ok(name) => name,
                Err(_) => {
                    reply(client, REPLY_GENERAL_FAILURE).await?;
                    return Ok(None);
                }
            }
        }
        _ => {
            reply(client, REPLY_ADDRESS_NOT_SUPPORTED).await?;
            return Ok(None);
        }
    };
    let port = u16::from_be_bytes(read_array(client).await?);
    if command != CMD_CONNECT {
        reply(client, REPLY_COMMAND_NOT_SUPPORTED).await?;
        return Ok(None);
    }
    Ok(Some((host, port)))
}

async fn read_array<const N: usize>(s: &mut TcpStream) -> std::io::Result<[u8; N]> {
    let mut b = [0; N];
    s.read_exact(&mut b).await?;
    Ok(b)
}

/// A reply with an unspecified bound address (Chromium does not use it).
async fn reply(client: &mut TcpStream, code: u8) -> std::io::Result<()> {
    client
        .write_all(&[VERSION, code, 0, ATYP_IPV4, 0, 0, 0, 0, 0, 0])
        .await
}
