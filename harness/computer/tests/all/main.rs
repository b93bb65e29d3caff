//! Integration tests for cordon-computer: a real Chromium against pages served on loopback.
//! Chromium must be installed (`sudo apt-get install -y chromium chromium-headless-shell`;
//! the headless shell is the default browser where installed); tests fail otherwise.
//! With feature `desktop`, the `desktop` tests drive real Xvfb displays (tests/bootstrap.sh).

mod browser;
mod common;
#[cfg(feature = "desktop")]
mod desktop;
mod frames;
mod gates;
mod isolation;
mod origin_properties;
mod recovery;
mod restart;
mod scaling;
mod trajectory;
