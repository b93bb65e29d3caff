//! `--policy upstream`: a model behind a vendor API drives web and desktop episodes with
//! that vendor's computer-use tool. One module per dialect (what goes out, how its calls
//! become environment actions, how results go back); one loop shared by all of them.

mod anthropic;
mod dialect;
mod episode_loop;
mod gemini;
mod openai;
mod policy;
mod settings;

pub use policy::UpstreamPolicy;
pub use settings::{ComputerTool, SafetyChecks};
