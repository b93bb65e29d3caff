//! The tool search of one request: the declared search tools, the deferred tools they look
//! through, and which of those are loaded (offered to the model in full) so far.

use std::collections::HashSet;

use cordon_protocol::conversation::{FunctionTool, ToolDefinition};
use serde_json::Value;

use super::bm25::bm25_search;
use super::declaration::{SearchKind, SearchTool};
use super::entry::SearchEntry;
use super::error::SearchError;
use super::regex::regex_search;

/// Tools one search returns at most (the vendor's number).
pub(crate) const MAX_RESULTS: usize = 5;

/// The tool search set up for one request.
#[derive(Debug, Clone, Default)]
pub(crate) struct ToolSearch {
    tools: Vec<SearchTool>,
    /// What a search reads of each deferred tool…
    entries: Vec<SearchEntry>,
    /// …and the definition offered once it is found (same order).
    definitions: Vec<ToolDefinition>,
    loaded: HashSet<String>,
}

impl ToolSearch {
    /// A search over no tools yet, by the declared `tools`.
    pub(crate) fn new(tools: Vec<SearchTool>) -> Self {
        ToolSearch {
            tools,
            ..ToolSearch::default()
        }
    }

    /// Keeps `tool` from the model until a search finds it (its `defer_loading` dropped:
    /// the upstream is offered it as an ordinary tool).
    pub(crate) fn defer(&mut self, tool: &FunctionTool) {
        let mut offered = tool.clone();
        offered.extra.remove("defer_loading");
        offered.allowed_callers.clear();
        self.entries.push(SearchEntry::new(
            &tool.name,
            tool.description.as_deref().unwrap_or_default(),
            &tool.input_schema,
        ));
        self.definitions.push(ToolDefinition::Function(offered));
    }

    /// The search tool the model calls `name`.
    pub(crate) fn tool(&self, name: &str) -> Option<&SearchTool> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The names of the search tools.
    pub(crate) fn names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.name.clone()).collect()
    }

    /// Whether `name` is a deferred tool.
    pub(crate) fn is_deferred(&self, name: &str) -> bool {
        self.entries.iter().any(|e| e.name == name)
    }

    /// The function tools the model is offered for the searches.
    pub(crate) fn functions(&self) -> Vec<ToolDefinition> {
        self.tools
            .iter()
            .map(|t| t.function(self.entries.len()))
            .collect()
    }

    /// Runs the search tool `name` on the model's `input`: the names of up to
    /// [`MAX_RESULTS`] deferred tools, best first.
    pub(crate) fn search(&self, name: &str, input: &Value) -> Result<Vec<String>, SearchError> {
        let kind = self.tool(name).map_or(SearchKind::Regex, |t| t.kind);
        let query = input
            .get("query")
            .and_then(Value::as_str)
            .ok_or(SearchError::NoQuery)?;
        let found = match kind {
            SearchKind::Regex => regex_search(&self.entries, query)?,
            SearchKind::Bm25 => bm25_search(&self.entries, query)?,
        };
        Ok(found
            .into_iter()
            .take(MAX_RESULTS)
            .map(|index| self.entries[index].name.clone())
            .collect())
    }

    /// Marks the deferred tools `names` loaded; the definitions of those not loaded before,
    /// to offer the model from now on.
    pub(crate) fn load(&mut self, names: &[String]) -> Vec<ToolDefinition> {
        let mut newly = Vec::new();
        for name in names {
            if self.loaded.contains(name) {
                continue;
            }
            if let Some(index) = self.entries.iter().position(|e| &e.name == name) {
                self.loaded.insert(name.clone());
                newly.push(self.definitions[index].clone());
            }
        }
        newly
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cordon_protocol::conversation::Extra;
    use serde_json::json;

    fn function(name: &str, description: &str) -> FunctionTool {
        let mut extra = Extra::new();
        extra.insert("defer_loading".into(), json!(true));
        FunctionTool {
            name: name.to_owned(),
            description: Some(description.to_owned()),
            input_schema: json!({"type": "object"}),
            allowed_callers: Vec::new(),
            extra,
        }
    }

    #[test]
    fn a_search_returns_at_most_five_and_loads_each_tool_once() {
        let tool = SearchTool {
            kind: SearchKind::Regex,
            name: "find".into(),
            declared_type: "tool_search_tool_regex_20251119".into(),
        };
        let mut search = ToolSearch::new(vec![tool]);
        for n in 0..8 {
            search.defer(&function(&format!("tool_{n}"), "does things"));
        }
        let found = search.search("find", &json!({"query": "tool_"})).unwrap();
        assert_eq!(found.len(), MAX_RESULTS);
        let loaded = search.load(&found);
        assert_eq!(loaded.len(), MAX_RESULTS);
        let ToolDefinition::Function(first) = &loaded[0] else {
            panic!("a function")
        };
        assert!(!first.extra.contains_key("defer_loading"));
        assert!(search.load(&found).is_empty());
        assert_eq!(search.search("find", &json!({})), Err(SearchError::NoQuery));
    }
}
