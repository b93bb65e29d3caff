//! A computer session's set-up, checked: [`Setup`] from a [`CreateComputer`] body, with the
//! idle-time bounds.

use std::time::Duration;

use cordon_computer::browser::SessionOptions;
use cordon_computer::display::{DisplaySpec, Preset, Size};
use cordon_computer::gate::Rules;
use cordon_computer::image::ImageFormat;
use cordon_computer::origin::{OriginPattern, OriginPolicy};
use cordon_protocol::computer::Vendor;
use serde_json::{Value, json};

use super::error::ComputerError;
use crate::api::{CreateComputer, SizeBody};

/// Idle time after which a computer session is closed, unless its creator says otherwise.
pub const DEFAULT_COMPUTER_TTL: Duration = Duration::from_secs(900);
/// Longest idle time a computer session may ask for.
pub const MAX_COMPUTER_TTL: Duration = Duration::from_secs(24 * 3600);

/// A session's set-up, checked: what [`CreateComputer`] asks for.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Setup {
    /// Start page.
    pub url: String,
    /// CSS pixels.
    pub viewport: Size,
    /// Device pixel ratio (1 or 2).
    pub dpr: f64,
    /// The page reads `dpr` exactly (never the display's scale; see [`CreateComputer`]).
    pub exact_dpr: bool,
    /// How the model display is chosen.
    pub display: DisplaySpec,
    /// What the session may reach.
    pub policy: OriginPolicy,
    /// Approval rules.
    pub rules: Rules,
    /// Screenshot encoding.
    pub image_format: ImageFormat,
    /// Idle time before the session is closed.
    pub ttl: Duration,
    /// The longest a step waits for the page to settle.
    pub settle_timeout: Duration,
}

fn size_arg(value: &Value, field: &str) -> Result<Size, String> {
    let size = match value {
        Value::String(text) => Size::parse(text),
        Value::Object(_) => serde_json::from_value::<SizeBody>(value.clone())
            .ok()
            .filter(|s| s.width > 0 && s.height > 0)
            .map(|s| Size::new(s.width, s.height)),
        _ => None,
    };
    size.ok_or_else(|| {
        format!("`{field}` must be \"WxH\" or {{\"width\", \"height\"}} (positive), not {value}")
    })
}

fn patterns(list: &[String], field: &str) -> Result<Vec<OriginPattern>, String> {
    list.iter()
        .map(|raw| OriginPattern::parse(raw).map_err(|error| format!("`{field}`: {error}")))
        .collect()
}

impl Setup {
    /// Checks a [`CreateComputer`] body. `Err` says what is wrong with it.
    pub fn parse(body: &CreateComputer) -> Result<Setup, ComputerError> {
        let invalid = ComputerError::Invalid;
        let viewport = match &body.viewport {
            None | Some(Value::Null) => Size::new(1280, 800),
            Some(value) => size_arg(value, "viewport").map_err(invalid)?,
        };
        if viewport.width > 3840 || viewport.height > 2160 {
            return Err(invalid(format!(
                "`viewport` {viewport} is larger than 3840x2160"
            )));
        }
        let dpr = body.dpr.unwrap_or(1.0);
        if dpr != 1.0 && dpr != 2.0 {
            return Err(invalid(format!("`dpr` must be 1 or 2, not {dpr}")));
        }
        let display = match &body.display {
            None | Some(Value::Null) => DisplaySpec::DEFAULT_BUDGET,
            Some(Value::String(name)) if name.eq_ignore_ascii_case("budget") => {
                DisplaySpec::DEFAULT_BUDGET
            }
            Some(Value::String(name)) if Preset::parse(name).is_some() => DisplaySpec::Preset {
                preset: Preset::parse(name).unwrap_or(Preset::Xga),
            },
            Some(value) => DisplaySpec::Fixed {
                size: size_arg(value, "display").map_err(|_| {
                    invalid(format!(
                        "`display` must be \"WxH\", {{\"width\", \"height\"}}, xga, wxga, fwxga \
                         or budget, not {value}"
                    ))
                })?,
            },
        };
        let shown = display.resolve(viewport);
        if shown.width > 4096 || shown.height > 4096 {
            return Err(invalid(format!(
                "`display` {shown} is larger than 4096x4096"
            )));
        }
        let policy = OriginPolicy::new(
            patterns(&body.allow_origins, "allow_origins").map_err(invalid)?,
            patterns(&body.block_origins, "block_origins").map_err(invalid)?,
        );
        // Schemes and the lists are checked here; the private-network rule, which the
        // operator may widen (`--allow-origin`, `--allow-private-network`), when the
        // session opens, on the addresses the name resolves to.
        let lists = policy.clone().with_operator(&[], true);
        if let Err(refusal) = lists.check(&body.url) {
            return Err(ComputerError::Blocked(format!(
                "the start url {:?} is refused: {}",
                body.url, refusal.0
            )));
        }
        let rules = match &body.rules {
            None | Some(Value::Null) => Rules::default(),
            Some(list @ Value::Array(_)) => serde_json::from_value(json!({ "rules": list }))
                .map_err(|error| invalid(format!("`rules`: {error}")))?,
            Some(object) => serde_json::from_value(object.clone())
                .map_err(|error| invalid(format!("`rules`: {error}")))?,
        };
        let image_format = match &body.image_format {
            None => ImageFormat::Png,
            Some(name) => ImageFormat::parse(name).ok_or_else(|| {
                invalid(format!(
                    "`image_format` must be png, jpeg or jpeg:QUALITY (1-100), not {name:?}"
                ))
            })?,
        };
        let ttl = match body.ttl_seconds {
            None => DEFAULT_COMPUTER_TTL,
            Some(0) => return Err(invalid("`ttl_seconds` must be at least 1".to_owned())),
            Some(seconds) if Duration::from_secs(seconds) > MAX_COMPUTER_TTL => {
                return Err(invalid(format!(
                    "`ttl_seconds` must be at most {}",
                    MAX_COMPUTER_TTL.as_secs()
                )));
            }
            Some(seconds) => Duration::from_secs(seconds),
        };
        let settle_timeout = match body.settle_timeout_ms {
            None => cordon_computer::browser::DEFAULT_SETTLE_TIMEOUT,
            Some(ms @ 1..=30_000) => Duration::from_millis(ms),
            Some(ms) => {
                return Err(invalid(format!(
                    "`settle_timeout_ms` must be in 1..=30000, not {ms}"
                )));
            }
        };
        Ok(Setup {
            url: body.url.clone(),
            viewport,
            dpr,
            exact_dpr: body.exact_dpr.unwrap_or(false),
            display,
            policy,
            rules,
            image_format,
            ttl,
            settle_timeout,
        })
    }

    /// The model display this set-up gives.
    pub fn display_size(&self) -> Size {
        self.display.resolve(self.viewport)
    }

    /// `session.json` of the trajectory, in the shape `cordon replay DIR` reads.
    pub fn session_json(&self) -> Value {
        json!({
            "url": self.url,
            "viewport": self.viewport,
            "dpr": self.dpr,
            "exact_dpr": self.exact_dpr,
            "display": self.display,
            "policy": self.policy,
            "image_format": self.image_format,
            "rules": self.rules,
            "vendor": Vendor::Native,
        })
    }

    pub(super) fn session_options(&self) -> SessionOptions {
        let mut options = SessionOptions::default();
        options.viewport = self.viewport;
        options.dpr = self.dpr;
        options.display = self.display;
        options.policy = self.policy.clone();
        options.start_url = Some(self.url.clone());
        options.settle_cap = self.settle_timeout;
        options.render_at_display_scale = !self.exact_dpr;
        options
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    fn body(extra: Value) -> CreateComputer {
        let mut value = json!({"url": "http://127.0.0.1:9/"});
        if let (Value::Object(into), Value::Object(from)) = (&mut value, extra) {
            into.extend(from);
        }
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn setup_takes_sizes_presets_and_rules() {
        let setup = Setup::parse(&body(json!({
            "viewport": {"width": 1280, "height": 800}, "display": "1024x640",
            "rules": [], "image_format": "jpeg:70", "allow_origins": ["http://127.0.0.1:9"],
        })))
        .unwrap();
        assert_eq!(setup.display_size(), Size::new(1024, 640));
        assert_eq!(setup.rules, Rules::allow_all());
        assert_eq!(setup.image_format, ImageFormat::Jpeg { quality: 70 });
        let setup = Setup::parse(&body(json!({"display": "xga"}))).unwrap();
        assert_eq!(setup.display_size(), Size::new(1024, 768));
        let setup = Setup::parse(&body(json!({}))).unwrap();
        assert_eq!(setup.display_size(), Size::new(1280, 800));
        assert_eq!(setup.rules, Rules::default());
        assert_eq!(
            setup.session_options().settle_cap,
            cordon_computer::browser::DEFAULT_SETTLE_TIMEOUT
        );
        assert!(setup.session_options().render_at_display_scale);
        let exact = Setup::parse(&body(json!({"exact_dpr": true}))).unwrap();
        assert!(!exact.session_options().render_at_display_scale);
        assert_eq!(exact.session_json()["exact_dpr"], true);
        let setup = Setup::parse(&body(json!({"settle_timeout_ms": 500}))).unwrap();
        assert_eq!(
            setup.session_options().settle_cap,
            Duration::from_millis(500)
        );
    }

    #[test]
    fn setup_says_what_is_wrong() {
        for (extra, needle) in [
            (json!({"dpr": 3}), "dpr"),
            (json!({"viewport": "big"}), "viewport"),
            (json!({"display": 7}), "display"),
            (json!({"rules": [{"decision": "maybe"}]}), "rules"),
            (json!({"image_format": "gif"}), "image_format"),
            (json!({"ttl_seconds": 0}), "ttl_seconds"),
            (json!({"settle_timeout_ms": 0}), "settle_timeout_ms"),
            (json!({"settle_timeout_ms": 30_001}), "settle_timeout_ms"),
            (
                json!({"allow_origins": ["ftp://files.example"]}),
                "allow_origins",
            ),
        ] {
            let error = Setup::parse(&body(extra.clone())).unwrap_err();
            assert!(
                matches!(&error, ComputerError::Invalid(m) if m.contains(needle)),
                "{extra}: {error}"
            );
        }
        let error =
            Setup::parse(&body(json!({"allow_origins": ["http://example.com"]}))).unwrap_err();
        assert!(matches!(error, ComputerError::Blocked(_)), "{error}");
    }
}
