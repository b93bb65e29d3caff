//! Computer use: the canonical [`Action`] and lossless codecs for each vendor's shape.
//!
//! A model asks for UI actions in its vendor's shape; [`anthropic`], [`openai`] and
//! [`gemini`] decode those into a [`ComputerCall`] (one or more [`Action`]s plus the call
//! id, the coordinate space and any vendor safety checks) and encode them back. The
//! canonical form keeps every vendor-specific detail it needs to re-encode the same call
//! (scroll units, Gemini's normalized grid, OpenAI's batched form), so
//! `encode(decode(x)) == x` for calls written the way the vendor writes them, and
//! `decode(encode(a)) == a` for every action the vendor can express.
//!
//! Coordinates stay in the space the model used ([`CoordSpace`]); mapping them onto a real
//! screen is the executor's job (`cordon-computer`), because only it knows the image it sent.
//!
//! ```
//! use cordon_protocol::computer::{anthropic, Action, Button, Point};
//! let input = serde_json::json!({"action": "left_click", "coordinate": [100, 200]});
//! let action = anthropic::decode_input(&input, anthropic::Version::V20250124).unwrap();
//! assert_eq!(action, Action::Click {
//!     at: Some(Point { x: 100, y: 200 }), button: Button::Left, count: 1, modifiers: vec![],
//! });
//! assert_eq!(anthropic::encode_input(&action).unwrap(), input);
//! ```

mod action;
pub mod anthropic;
mod codec;
mod error;
mod fields;
pub mod gemini;
mod keys;
pub mod openai;
mod result;

pub use action::{
    Action, Button, ComputerCall, CoordSpace, Direction, GEMINI_GRID, Point, Region, SafetyCheck,
    ScrollDelta, Vendor,
};
pub use codec::{decode, encode};
pub use error::{DecodeError, EncodeError};
pub use keys::Key;
pub use result::{ComputerOutput, Screenshot};

#[cfg(test)]
mod tests;
