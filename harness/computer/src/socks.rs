//! A SOCKS5 proxy per session: every connection of the session goes through it, and it
//! decides where each may go.
//!
//! Chromium's browser-wide `Fetch` interception sees HTTP(S) requests but not WebSockets
//! (FIELD-NOTES), and never the address a name resolves to. Each session's BrowserContext
//! is routed through this proxy with `socks5://` (no bypass, `<-loopback>` included), so
//! Chromium tunnels every connection (HTTP, HTTPS, WebSockets, workers, popups) here and
//! sends the *name*, unresolved. The proxy checks the name (allow- and block-list,
//! [`OriginPolicy::check_connection`]), resolves it itself, checks every address
//! ([`OriginPolicy::check_address`]: block-list and private networks) and connects to an
//! address that passed: the address checked is the address connected to, so a name that
//! changes its answer between a check and Chromium's own lookup (DNS rebinding) gains
//! nothing. Refusals are kept for the session to tell the model.

use crate::origin::{OriginPolicy, Refusal};
use crate::private_net::is_localhost_name;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// The longest a client may take for the handshake, and we for the upstream connect.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Most refusals kept between two reads (a page retrying in a loop must not grow memory).
const MAX_REFUSALS: usize = 20;

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
pub(crate) struct SessionProxy {
    port: u16,
    task: JoinHandle<()>,
    refusals: Arc<Mutex<Vec<String>>>,
}

impl Drop for SessionProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl SessionProxy {
    /// Listens on a free loopback port.
    pub(crate) async fn start(policy: OriginPolicy) -> std::io::Result<Self> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let port = listener.local_addr()?.port();
        let refusals = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&refusals);
        let policy = Arc::new(policy);
        let task = tokio::spawn(async move {
            // Each connection is its own task, aborted with the runtime; dropping the
            // proxy stops new ones, and Chromium closes the rest with the context.
            while let Ok((client, _)) = listener.accept().await {
                let policy = Arc::clone(&policy);
                let log = Arc::clone(&log);
                tokio::spawn(async move {
                    let _done = serve(client, &policy, &log).await;
                });
            }
        });
        Ok(Self {
            port,
            task,
            refusals,
        })
    }

    /// Chromium's `proxyServer` value.
    pub(crate) fn proxy_server(&self) -> String {
        format!("socks5://127.0.0.1:{}", self.port)
    }

    /// The connections refused since the last call, as sentences for the model.
    pub(crate) fn take_refusals(&self) -> Vec<String> {
        std::mem::take(&mut *self.refusals.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

fn note(log: &Mutex<Vec<String>>, host: &str, port: u16, why: &str) {
    let line = format!("Cordon refused a connection to {host}:{port}: {why}.");
    let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
    if log.len() < MAX_REFUSALS && !log.contains(&line) {
        log.push(line);
    }
}

/// The addresses `host` stands for. `localhost` names mean loopback without asking DNS,
/// as in Chromium (RFC 6761).
async fn resolve(host: &str, port: u16) -> std::io::Result<Vec<IpAddr>> {
    if let Ok(ip) = host.trim_start_matches('[').trim_end_matches(']').parse() {
        return Ok(vec![ip]);
    }
    if is_localhost_name(host) {
        return Ok(vec![
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
        ]);
    }
    let found = tokio::time::timeout(HANDSHAKE_TIMEOUT, tokio::net::lookup_host((host, port)))
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
    Ok(found.map(|a| a.ip()).collect())
}

/// The checks the proxy would make on a connection to `url`'s host, made before the
/// request leaves: the URL itself ([`OriginPolicy::check`]), then, when the
/// private-network rule applies to its host name, every address the name resolves to
/// (refused when no address passes, as the proxy would). A name that does not resolve
/// passes here; the proxy answers it.
pub(crate) async fn check_url(policy: &OriginPolicy, url: &str) -> Result<(), Refusal> {
    policy.check(url)?;
    let Some((host, port)) = policy.endpoint_to_resolve(url) else {
        return Ok(());
    };
    let Ok(addrs) = resolve(&host, port).await else {
        return Ok(());
    };
    let mut refused = None;
    for ip in addrs {
        match policy.check_address(&host, port, ip) {
            Ok(()) => return Ok(()),
            Err(refusal) => {
                refused.get_or_insert(refusal);
            }
        }
    }
    refused.map_or(Ok(()), Err)
}

/// One client connection: handshake, check, then relay until either side closes.
async fn serve(
    mut client: TcpStream,
    policy: &OriginPolicy,
    log: &Mutex<Vec<String>>,
) -> std::io::Result<()> {
    let target = tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(&mut client))
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
    let Some((host, port)) = target else {
        return Ok(());
    };
    // Chromium sends canonical hosts; a trailing dot or capitals must not slip by anyway.
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    if let Err(refusal) = policy.check_connection(&host, port) {
        note(log, &host, port, &refusal.0);
        return reply(&mut client, REPLY_NOT_ALLOWED).await;
    }
    let Ok(addrs) = resolve(&host, port).await else {
        return reply(&mut client, REPLY_HOST_UNREACHABLE).await;
    };
    let mut refused = None;
    let mut upstream = None;
    for ip in addrs {
        if let Err(refusal) = policy.check_address(&host, port, ip) {
            refused.get_or_insert(refusal);
            continue;
        }
        let connect = TcpStream::connect(SocketAddr::new(ip, port));
        if let Ok(Ok(stream)) = tokio::time::timeout(HANDSHAKE_TIMEOUT, connect).await {
            upstream = Some(stream);
            break;
        }
    }
    let Some(mut upstream) = upstream else {
        return match refused {
            Some(refusal) => {
                note(log, &host, port, &refusal.0);
                reply(&mut client, REPLY_NOT_ALLOWED).await
            }
            None => reply(&mut client, REPLY_HOST_UNREACHABLE).await,
        };
    };
    let _nodelay = upstream.set_nodelay(true);
    let _nodelay = client.set_nodelay(true);
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
