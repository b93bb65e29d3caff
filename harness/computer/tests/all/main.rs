//! Integration tests for cordon-computer: a real Chromium against pages served on loopback.
//! Chromium must be installed (`sudo apt-get install -y chromium`); tests fail otherwise.

mod browser;
mod common;
mod gates;
mod isolation;
mod recovery;
mod scaling;
mod trajectory;
