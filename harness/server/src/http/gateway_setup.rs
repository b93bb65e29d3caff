//! What the operator puts behind the model gateway ([`GatewaySetup`], `cordon serve
//! --upstream`), and [`parse_duration`] for its time flags.

use std::sync::Arc;
use std::time::Duration;

use cordon_core::ToolRegistry;
use cordon_gateway::{GatewayOptions, Upstream};

use super::gateway_sessions::DEFAULT_SESSION_TTL;

/// What `cordon serve --upstream` puts behind `/v1/messages`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct GatewaySetup {
    /// The model.
    pub upstream: Arc<dyn Upstream>,
    /// Round cap, container time to live, key forwarding.
    pub options: GatewayOptions,
    /// Operator server tools (`--tools FILE`).
    pub tools: Option<ToolRegistry>,
    /// Idle time after which a session of the session protocol expires.
    pub session_ttl: Duration,
    /// The model of sessions that name none.
    pub default_model: Option<String>,
}

impl GatewaySetup {
    /// A setup with default options and no operator tools.
    pub fn new(upstream: Arc<dyn Upstream>) -> Self {
        GatewaySetup {
            upstream,
            options: GatewayOptions::default(),
            tools: None,
            session_ttl: DEFAULT_SESSION_TTL,
            default_model: None,
        }
    }

    crate::setters::setters! {
        options: GatewayOptions,
        tools: Option<ToolRegistry>,
        session_ttl: Duration,
        default_model: Option<String>,
    }
}

/// Parses `500ms`, `30s`, `45m`, `12h` (a bare number is seconds).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?}: expected a number with a unit, like 500ms, 30s or 45m"))?;
    let ms = match unit {
        "ms" => 1,
        "" | "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(format!("{text:?}: the unit must be ms, s, m, h or d")),
    };
    if number == 0 {
        return Err(format!("{text:?}: must be longer than 0"));
    }
    Ok(Duration::from_millis(number.saturating_mul(ms)))
}
