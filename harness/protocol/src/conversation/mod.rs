//! One canonical conversation model and pure converters to and from vendor shapes.
//!
//! A gateway decodes the client's request ([`anthropic`], [`chat`], [`responses`],
//! [`gemini`]) into a [`Request`], validates tool-call pairing with [`validate_pairing`], encodes it for the
//! upstream, decodes the upstream's answer into a [`Turn`] (whose call ids
//! [`validate_turn_ids`] checks before any runs) and encodes that back in the client's
//! shape. Fields a vendor has that the model does not name are kept in `extra`
//! maps, and vendor-only blocks (reasoning, server tools) are carried opaquely with the
//! vendor they came from, so a same-vendor round trip is lossless.

pub mod anthropic;

pub mod chat;
mod error;
pub mod gemini;
mod gemini_parts;
mod gemini_response;
mod json;
mod openai;
mod request_fields;
pub mod responses;
pub mod stream;

mod types;
mod validate;

pub use error::{ConversionError, PairingError, VendorError, encode_error};
pub use types::*;
pub use validate::{validate_pairing, validate_turn_ids};
