//! What a tool search looks through for one deferred tool: its name, its description, and
//! the names and descriptions of its parameters, each bounded so that a huge schema costs
//! no more than a small one.

use serde_json::Value;

/// Parameters read from one schema (nested objects and array items included).
const MAX_PARAMETERS: usize = 200;
/// How deep nested schemas are read.
const MAX_DEPTH: usize = 8;
/// Bytes of one text field that are searched.
const MAX_FIELD_BYTES: usize = 4096;

/// The searchable text of one deferred tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SearchEntry {
    /// The tool's name.
    pub(crate) name: String,
    /// Its description ("" when it has none).
    pub(crate) description: String,
    /// Its parameters' names and descriptions, in schema order.
    pub(crate) parameters: Vec<String>,
}

impl SearchEntry {
    /// The entry of the tool `name` described by `description` taking `input_schema`.
    pub(crate) fn new(name: &str, description: &str, input_schema: &Value) -> Self {
        let mut parameters = Vec::new();
        collect_parameters(input_schema, 0, &mut parameters);
        SearchEntry {
            name: bounded(name),
            description: bounded(description),
            parameters,
        }
    }

    /// Every searched field: the name first, then the description, then the parameters.
    pub(crate) fn fields(&self) -> impl Iterator<Item = &str> {
        [self.name.as_str(), self.description.as_str()]
            .into_iter()
            .chain(self.parameters.iter().map(String::as_str))
    }
}

fn collect_parameters(schema: &Value, depth: usize, out: &mut Vec<String>) {
    if depth >= MAX_DEPTH || out.len() >= MAX_PARAMETERS {
        return;
    }
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            if out.len() >= MAX_PARAMETERS {
                return;
            }
            out.push(bounded(name));
            if let Some(text) = property.get("description").and_then(Value::as_str) {
                out.push(bounded(text));
            }
            collect_parameters(property, depth + 1, out);
        }
    }
    if let Some(items) = schema.get("items") {
        collect_parameters(items, depth + 1, out);
    }
}

fn bounded(text: &str) -> String {
    let mut end = text.len().min(MAX_FIELD_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parameters_are_read_from_nested_objects_and_items() {
        let schema = json!({"type": "object", "properties": {
            "city": {"type": "string", "description": "City name"},
            "stops": {"type": "array", "items": {"type": "object", "properties": {
                "zip": {"type": "string"}}}}}});
        let entry = SearchEntry::new("route", "Plan a route", &schema);
        assert_eq!(entry.parameters, ["city", "City name", "stops", "zip"]);
        assert_eq!(entry.fields().next(), Some("route"));
    }
}
