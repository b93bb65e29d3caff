//! Which live encoder speaks a client API.

use super::live_anthropic::AnthropicLiveEncoder;
use super::live_chat::ChatLiveEncoder;
use super::live_encoder::LiveEncoder;
use super::live_gemini::GeminiLiveEncoder;
use super::live_responses::ResponsesLiveEncoder;
use crate::conversation::Vendor;

/// A fresh live encoder for `vendor`'s API (one per client stream); `None` for an API
/// with no live encoder yet.
pub fn live_encoder(vendor: Vendor) -> Option<Box<dyn LiveEncoder>> {
    match vendor {
        Vendor::Anthropic => Some(Box::new(AnthropicLiveEncoder::default())),
        Vendor::OpenaiChat => Some(Box::new(ChatLiveEncoder::default())),
        Vendor::OpenaiResponses => Some(Box::new(ResponsesLiveEncoder::default())),
        Vendor::Gemini => Some(Box::new(GeminiLiveEncoder::default())),
        #[allow(unreachable_patterns, reason = "vendors are added one arm at a time")]
        _ => None,
    }
}
