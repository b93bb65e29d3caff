//! The policies of `cordon bench` that are not scripts: an external agent driving each
//! episode over HTTP, and a model behind an upstream API (one dialect per vendor).

mod external;
mod upstream;

pub use external::ExternalPolicy;
pub use upstream::{ComputerTool, SafetyChecks, UpstreamPolicy};
