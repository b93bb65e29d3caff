//! Episodes on Cordon servers (`cordon bench --remote URL …`): each one is created on a
//! server through its `/v1/envs` API and stepped there, so a run spreads over machines.
//!
//! - `client.rs`: one server's `/v1/envs` calls and how they fail;
//! - `servers.rs`: [`RemoteServers`], the run's servers and which takes the next episode;
//! - `env.rs`: [`RemoteEnv`], a remote episode as a policy steps it;
//! - `episode.rs`: one remote episode start to end, recorded as a local one.

mod client;
mod env;
pub(crate) mod episode;
mod servers;

pub use env::RemoteEnv;
pub use servers::RemoteServers;
