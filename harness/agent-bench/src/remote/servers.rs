//! [`RemoteServers`]: the Cordon servers a run spreads its episodes over (`--remote`), and
//! which one takes the next episode.
//!
//! Least busy first: the server with the fewest of this run's episodes in flight, ties to
//! the one that has had fewer so far, then to the earlier `--remote`. Episodes differ in
//! length (a task solved in one step, one that runs to its cap), so a fixed rotation would
//! queue an episode behind a long one while another server sits idle; counting what is in
//! flight sends it to the idle one. Over equal servers it fills them evenly, as a rotation
//! would. Only this run's episodes are counted: the servers are not asked (one more round
//! trip per episode), so other clients' load is not seen.
//!
//! A server that cannot be reached (connection refused or reset, no answer in time) is
//! taken out of the run: the episode it failed is an error naming it and the reason, and
//! later episodes go to the servers still up.

use std::sync::{Arc, Mutex, PoisonError};

use super::client::EnvClient;

/// The servers of a run and how busy each is.
#[derive(Debug)]
pub struct RemoteServers {
    clients: Vec<EnvClient>,
    loads: Mutex<Vec<Load>>,
}

#[derive(Debug, Default, Clone)]
struct Load {
    in_flight: usize,
    assigned: usize,
    /// Why the server was taken out of the run.
    down: Option<String>,
}

impl RemoteServers {
    /// The servers at `urls` (`http://host:port`), each sent `token` as a bearer token when
    /// given.
    pub fn new(urls: &[String], token: Option<String>) -> Result<RemoteServers, String> {
        if urls.is_empty() {
            return Err("no server to run on".into());
        }
        for url in urls {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(format!(
                    "--remote {url}: give the server's URL, http://HOST:PORT"
                ));
            }
        }
        let http = reqwest::Client::builder()
            .build()
            .map_err(|e| format!("an HTTP client: {e}"))?;
        let clients: Vec<EnvClient> = urls
            .iter()
            .map(|url| EnvClient::new(http.clone(), url, token.clone()))
            .collect();
        let loads = vec![Load::default(); clients.len()];
        Ok(RemoteServers {
            clients,
            loads: Mutex::new(loads),
        })
    }

    /// The servers' URLs, in the order given.
    pub fn urls(&self) -> Vec<String> {
        self.clients.iter().map(|c| c.base().to_owned()).collect()
    }

    fn loads(&self) -> std::sync::MutexGuard<'_, Vec<Load>> {
        self.loads.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The least busy server still up, counted busy until the lease drops; `Err` says why
    /// none is left.
    pub(crate) fn pick(self: &Arc<Self>) -> Result<Lease, String> {
        let mut loads = self.loads();
        let index = loads
            .iter()
            .enumerate()
            .filter(|(_, load)| load.down.is_none())
            .min_by_key(|(index, load)| (load.in_flight, load.assigned, *index))
            .map(|(index, _)| index);
        let Some(index) = index else {
            let reasons: Vec<String> = self
                .clients
                .iter()
                .zip(loads.iter())
                .map(|(c, l)| format!("{}: {}", c.base(), l.down.as_deref().unwrap_or("")))
                .collect();
            return Err(format!("every server is down ({})", reasons.join("; ")));
        };
        loads[index].in_flight += 1;
        loads[index].assigned += 1;
        Ok(Lease {
            servers: self.clone(),
            index,
        })
    }

    fn mark_down(&self, index: usize, reason: &str) {
        if let Some(load) = self.loads().get_mut(index)
            && load.down.is_none()
        {
            load.down = Some(reason.to_owned());
            eprintln!(
                "bench: server {} is down ({reason}); the next episodes go to the others",
                self.clients[index].base()
            );
        }
    }
}

/// One episode's hold on a server: busy until dropped.
#[derive(Debug)]
pub(crate) struct Lease {
    servers: Arc<RemoteServers>,
    index: usize,
}

impl Lease {
    pub(crate) fn client(&self) -> &EnvClient {
        &self.servers.clients[self.index]
    }

    /// Takes the server out of the run.
    pub(crate) fn mark_down(&self, reason: &str) {
        self.servers.mark_down(self.index, reason);
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(load) = self.servers.loads().get_mut(self.index) {
            load.in_flight = load.in_flight.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    fn servers(n: usize) -> Arc<RemoteServers> {
        let urls: Vec<String> = (0..n)
            .map(|i| format!("http://127.0.0.1:{}", 9000 + i))
            .collect();
        Arc::new(RemoteServers::new(&urls, None).unwrap())
    }

    fn url(lease: &Lease) -> &str {
        lease.client().base()
    }

    #[test]
    fn the_least_busy_server_takes_the_next_episode() {
        let s = servers(2);
        let a = s.pick().unwrap();
        let b = s.pick().unwrap();
        assert_eq!(
            (url(&a), url(&b)),
            ("http://127.0.0.1:9000", "http://127.0.0.1:9001")
        );
        // The first server's episode ends: it is the idle one now, however many it had.
        drop(a);
        let c = s.pick().unwrap();
        assert_eq!(url(&c), "http://127.0.0.1:9000");
        drop(b);
        drop(c);
        // Both idle: the one that has had fewer episodes.
        assert_eq!(url(&s.pick().unwrap()), "http://127.0.0.1:9001");
    }

    #[test]
    fn a_server_taken_out_gets_no_more_episodes_and_none_left_says_why() {
        let s = servers(2);
        let a = s.pick().unwrap();
        a.mark_down("could not connect");
        drop(a);
        for _ in 0..3 {
            assert_eq!(url(&s.pick().unwrap()), "http://127.0.0.1:9001");
        }
        s.pick().unwrap().mark_down("broke off");
        let none = s.pick().unwrap_err();
        assert!(
            none.contains("could not connect") && none.contains("broke off"),
            "{none}"
        );
    }

    #[test]
    fn urls_that_are_not_http_are_refused() {
        let refused = RemoteServers::new(&["127.0.0.1:7420".into()], None).unwrap_err();
        assert!(refused.contains("http://HOST:PORT"), "{refused}");
        assert!(RemoteServers::new(&[], None).is_err());
    }
}
