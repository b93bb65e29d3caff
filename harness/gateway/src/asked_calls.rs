//! Calls handed to the client for approval (an `ask` tool, a computer gate), kept until a
//! `cordon_approval` answers them.

use serde_json::Value;

use crate::bounded_map::BoundedMap;

/// A call handed to the client for approval, as the model made it. Only these can be
/// approved, each once, and what runs is this input, not the client's copy of it.
#[derive(Debug, Clone)]
pub(crate) struct Asked {
    pub(crate) name: String,
    pub(crate) input: Value,
    /// A computer action a gate asked about (else an operator tool).
    pub(crate) computer: bool,
}

/// Calls waiting for a `cordon_approval`, by conversation and call id.
#[derive(Debug)]
pub(crate) struct Asks {
    pub(crate) calls: BoundedMap<Asked>,
}

const ASKS_MAX: usize = 10_000;

impl Default for Asks {
    fn default() -> Self {
        Asks {
            calls: BoundedMap::new(ASKS_MAX),
        }
    }
}
