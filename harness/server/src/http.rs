//! The HTTP + SSE API (`cordon serve`): routes, request parsing, authentication, event
//! streams, computer sessions and the OpenAPI document. The contract is
//! `docs/http-api.md`.
//!
//! The state behind the routes: [`HttpApi`] (`server`) builds the live sandboxes
//! (`live_sandboxes`), the computer sessions (`computer_sessions`), the benchmark
//! environments ([`envs`]) and the model gateway (`gateway_mount`), and hands them to every
//! route as one `App` (`app_state`). One file per route family: `sandboxes`, `executions`
//! (with `event_stream`, the SSE cursor), `approvals`, `computers`, `files`, [`envs`],
//! `gateway` and `session`; the requests they share pass `auth`, `extract`, `fallback` and
//! `inert`; `openapi` documents them all.

mod app_state;
mod approvals;
mod auth;
mod computer_sessions;
mod computers;
mod created;
mod env_answers;
mod env_registry;
mod env_tasks;
pub mod envs;
mod event_stream;
mod executions;
mod extract;
mod fallback;
mod files;
mod forward;
mod gateway;
mod gateway_computers;
mod gateway_gemini;
mod gateway_headers;
mod gateway_mount;
mod gateway_records;
mod gateway_sessions;
mod gateway_setup;
mod health;
mod inert;
mod live_sandboxes;
mod openapi;
mod options;
mod replica;
mod sandbox_pause;
mod sandboxes;
mod server;
mod session;
mod transitions;
mod unread_body;

pub use crate::workspace_budget::{DEFAULT_MAX_SANDBOXES, DEFAULT_MAX_WORKSPACE_BYTES_TOTAL};
pub use gateway_setup::{GatewaySetup, parse_duration};
pub use openapi::ApiDoc;
pub use options::{
    DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_COMPUTERS, DEFAULT_PAUSE_AFTER, DEFAULT_RETAIN, HttpOptions,
};
pub use replica::{DEFAULT_REPLICA_LEASE, parse_replica_address};
pub use server::{HttpApi, ShutdownHandle};
