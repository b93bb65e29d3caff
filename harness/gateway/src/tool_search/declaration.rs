//! A tool-search declaration (`tool_search_tool_regex_20251119`,
//! `tool_search_tool_bm25_20251119`) read and checked, and the function tool the model is
//! offered in its place (Cordon runs the search, whatever the upstream).

use cordon_protocol::conversation::{Extra, FunctionTool, ToolDefinition};
use serde_json::{Value, json};

use super::bm25::MAX_QUERY_CHARS;
use super::regex::MAX_PATTERN_CHARS;

/// How a search tool matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SearchKind {
    /// A regular expression.
    Regex,
    /// Natural language, ranked by BM25.
    Bm25,
}

/// A declared search tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SearchTool {
    pub(crate) kind: SearchKind,
    /// The name the model calls it by.
    pub(crate) name: String,
    /// The declared `type`, shown in errors.
    pub(crate) declared_type: String,
}

/// Fields a search-tool declaration may have.
const KNOWN_FIELDS: &[&str] = &[
    "type",
    "name",
    "allowed_callers",
    "cache_control",
    "defer_loading",
    "strict",
];

/// The search kind of a tool `type`, or `None` when it is no tool-search type.
pub(crate) fn search_kind(declared_type: &str) -> Option<SearchKind> {
    if declared_type == "tool_search_tool_regex"
        || declared_type.starts_with("tool_search_tool_regex_")
    {
        Some(SearchKind::Regex)
    } else if declared_type == "tool_search_tool_bm25"
        || declared_type.starts_with("tool_search_tool_bm25_")
    {
        Some(SearchKind::Bm25)
    } else {
        None
    }
}

impl SearchTool {
    /// The search tool declared by `data` (the whole `tools[]` entry) of type
    /// `declared_type`. `Err` is the 400's message: an unknown field, a name that is not a
    /// string, or the search tool itself deferred (nothing could ever find it).
    pub(crate) fn read(
        kind: SearchKind,
        declared_type: &str,
        data: &Value,
    ) -> Result<Self, String> {
        let Some(fields) = data.as_object() else {
            return Err(format!("`{declared_type}` must be an object"));
        };
        if let Some(unknown) = fields.keys().find(|k| !KNOWN_FIELDS.contains(&k.as_str())) {
            return Err(format!(
                "`{declared_type}` has no field `{unknown}` (known: {})",
                KNOWN_FIELDS.join(", ")
            ));
        }
        if fields.get("defer_loading") == Some(&Value::Bool(true)) {
            return Err(format!(
                "`{declared_type}` cannot itself have `defer_loading: true`: it is what finds the \
                 deferred tools"
            ));
        }
        let default = match kind {
            SearchKind::Regex => "tool_search_tool_regex",
            SearchKind::Bm25 => "tool_search_tool_bm25",
        };
        let name = match fields.get("name") {
            None | Some(Value::Null) => default.to_owned(),
            Some(Value::String(name)) if !name.is_empty() => name.clone(),
            Some(_) => {
                return Err(format!(
                    "`{declared_type}`: `name` must be a non-empty string"
                ));
            }
        };
        Ok(SearchTool {
            kind,
            name,
            declared_type: declared_type.to_owned(),
        })
    }

    /// The function tool the model is offered for this search over `deferred` tools.
    pub(crate) fn function(&self, deferred: usize) -> ToolDefinition {
        let (how, query) = match self.kind {
            SearchKind::Regex => (
                format!(
                    "`query` is a regular expression in Python `re` syntax (no look-around or \
                     backreferences; at most {MAX_PATTERN_CHARS} characters), searched for in \
                     each tool's name, description and parameter names and descriptions; \
                     matching is case-sensitive unless the pattern starts with `(?i)`. \
                     Example: `(?i)weather|forecast`."
                ),
                "A regular expression (Python `re` syntax)",
            ),
            SearchKind::Bm25 => (
                format!(
                    "`query` is plain language (at most {MAX_QUERY_CHARS} characters), ranked \
                     against each tool's name, description and parameters. Example: `current \
                     weather in a city`."
                ),
                "What the tool you need does, in plain words",
            ),
        };
        ToolDefinition::Function(FunctionTool {
            name: self.name.clone(),
            description: Some(format!(
                "Search for tools to use. {deferred} more tools exist that are not listed until a \
                 search finds them. {how} Up to 5 matching tools are returned; from then on you \
                 can call them directly."
            )),
            input_schema: json!({
                "type": "object",
                "properties": {"query": {"type": "string", "description": query}},
                "required": ["query"],
            }),
            allowed_callers: Vec::new(),
            extra: Extra::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_are_checked() {
        let kind = search_kind("tool_search_tool_bm25_20251119").unwrap();
        assert_eq!(kind, SearchKind::Bm25);
        assert_eq!(
            search_kind("tool_search_tool_regex"),
            Some(SearchKind::Regex)
        );
        assert_eq!(search_kind("web_search_20250305"), None);
        let t = "tool_search_tool_regex_20251119";
        let ok = SearchTool::read(SearchKind::Regex, t, &json!({"type": t})).unwrap();
        assert_eq!(ok.name, "tool_search_tool_regex");
        let unknown = SearchTool::read(SearchKind::Regex, t, &json!({"type": t, "max": 3}));
        assert!(unknown.unwrap_err().contains("no field `max`"));
        let deferred = SearchTool::read(
            SearchKind::Regex,
            t,
            &json!({"type": t, "defer_loading": true}),
        );
        assert!(deferred.unwrap_err().contains("defer_loading"));
        let bad_name = SearchTool::read(SearchKind::Regex, t, &json!({"type": t, "name": 3}));
        assert!(bad_name.unwrap_err().contains("`name`"));
    }
}
