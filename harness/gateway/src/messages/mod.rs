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

mod approvals;
mod code_calls;
mod computer_tool;
mod decode;
mod failure;
mod model_view;
mod offered_tools;
mod request;
mod request_reply;
mod request_state;
mod rounds;
mod server_calls;

pub use request_reply::{MessagesCall, MessagesReply};
