//! The model-API front door: `POST /v1/messages`, `/v1/chat/completions` and
//! `/v1/responses`. Each client request runs the model loop once:
//!
//! 1. Decode the client's request; turn `cordon_approval` blocks into placeholders so
//!    pairing can be checked; check pairing (nothing has run yet).
//! 2. Build the model's view of the conversation: server-tool blocks become the function
//!    calls the model made, program-made calls and their results disappear.
//! 3. Finish what the client answered: resume a suspended program, run approved calls.
//! 4. Ask the model, run its server-tool calls, feed results back, until the model ends
//!    its turn, something needs the client, or the round cap.
//!
//! A streamed request ([`Gateway::messages_live`](crate::Gateway::messages_live)) runs
//! the same loop while its reply is written: text and client tool calls as the model
//! streams them, server tools once they ran, later rounds in the same response.

mod approvals;
mod browser_tool;
mod code_calls;
mod computer_tool;
mod decode;
mod failure;
mod gemini_computer;
mod live_reply;
mod model_view;
mod offered_tools;
mod request;
mod request_reply;
mod request_state;
mod rounds;
mod server_calls;
mod tool_search_calls;

pub use request_reply::{LiveStream, MessagesAnswer, MessagesCall, MessagesReply, StreamHead};
