//! Tool search run by Cordon (`tool_search_tool_regex_*`, `tool_search_tool_bm25_*`) for
//! any upstream: tools marked `defer_loading` are kept from the model until its search
//! finds them.

mod bm25;
mod declaration;
mod entry;
mod error;
mod regex;
mod results;
mod state;

pub(crate) use declaration::{SearchTool, search_kind};
pub(crate) use results::{RESULT_BLOCK, client_content, model_text, model_text_of_shown};
pub(crate) use state::ToolSearch;
