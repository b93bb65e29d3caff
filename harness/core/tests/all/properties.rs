//! Property tests of the tools-file parser: on any text it returns a typed `RegistryError`
//! naming the file, or a registry, never panics; and a tools file written from generated
//! declarations loads back to the same declarations.

use cordon_core::{RegistryError, ToolRegistry};
use cordon_protocol::tool::{HandlerSpec, Policy, ToolDeclaration};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};
use serde_json::{Map, Value, json};

fn config() -> Config {
    Config {
        cases: 256,
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        ..Config::default()
    }
}

const WORDS: &[&str] = &[
    "tools",
    "name",
    "description",
    "input_schema",
    "policy",
    "handler",
    "kind",
    "static",
    "command",
    "http",
    "client",
    "mcp",
    "result",
    "argv",
    "url",
    "timeout_ms",
    "env",
    "inherit_env",
    "allow",
    "ask",
    "deny",
    "type",
    "object",
    "string",
    "integer",
    "array",
    "properties",
    "required",
    "items",
    "pattern",
    "enum",
    "$ref",
    "#/definitions/a",
    "definitions",
    "$defs",
    "anyOf",
    "oneOf",
    "not",
    "format",
    "minimum",
    "maxLength",
    "additionalProperties",
    "const",
    "^[a-z]+$",
    "(a+)+$",
    "[",
    "server",
    "tool",
];

fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(WORDS).prop_map(str::to_owned),
        1 => "\\PC{0,8}",
    ]
}

fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-5i64..100).prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f)
            .map(Value::Number)),
        word().prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 48, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((word(), inner), 0..6)
                .prop_map(|fields| Value::Object(fields.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// A tools file: `{"tools": [...]}` whose entries are objects with likely keys and any
/// values (schemas included, which the registry compiles).
fn tools_file() -> impl Strategy<Value = Value> {
    let entry = prop::collection::vec((word(), json()), 0..6)
        .prop_map(|fields| Value::Object(fields.into_iter().collect::<Map<_, _>>()));
    prop_oneof![
        prop::collection::vec(entry, 0..4).prop_map(|tools| json!({ "tools": tools })),
        json(),
    ]
}

/// Schemas a declaration may carry, valid or not.
fn schema() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!({"type": "object"})),
        Just(
            json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
        ),
        Just(json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}})),
        json().prop_map(|extra| json!({"type": "object", "properties": {"x": extra}})),
    ]
}

fn handler() -> impl Strategy<Value = HandlerSpec> {
    prop_oneof![
        json().prop_map(|result| HandlerSpec::Static { result }),
        Just(HandlerSpec::Client {}),
    ]
}

fn declaration() -> impl Strategy<Value = ToolDeclaration> {
    (
        "[a-z][a-z0-9_]{0,10}",
        "[ -~]{0,20}",
        schema(),
        prop::sample::select(&[Policy::Allow, Policy::Ask, Policy::Deny][..]),
        handler(),
    )
        .prop_map(
            |(name, description, input_schema, policy, handler)| ToolDeclaration {
                name,
                description,
                input_schema,
                policy,
                defer_loading: false,
                handler,
            },
        )
}

fn check(text: &str) -> Result<(), TestCaseError> {
    match ToolRegistry::from_json(text, "tools.json") {
        Ok(registry) => prop_assert_eq!(registry.names().len(), registry.len()),
        Err(error) => {
            // Every message names the file it is about.
            let shown = error.to_string();
            prop_assert!(shown.contains("tools.json"), "{}", shown);
            let _typed: &RegistryError = &error;
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_text_is_a_registry_or_a_typed_error(text in "\\PC{0,128}") {
        check(&text)?;
    }

    #[test]
    fn any_json_is_a_registry_or_a_typed_error(file in tools_file()) {
        check(&file.to_string())?;
    }

    #[test]
    fn written_declarations_load_back(decls in prop::collection::vec(declaration(), 0..5)) {
        let text = json!({ "tools": decls }).to_string();
        let mut names: Vec<&str> = decls.iter().map(|d| d.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        match ToolRegistry::from_json(&text, "tools.json") {
            Ok(registry) => {
                prop_assert_eq!(names.len(), decls.len(), "duplicates were accepted");
                for decl in &decls {
                    prop_assert_eq!(&registry.get(&decl.name).unwrap().declaration, decl);
                }
            }
            // Duplicate names and schemas that do not compile are refused, nothing else.
            Err(RegistryError::DuplicateName { .. }) => prop_assert!(names.len() < decls.len()),
            Err(error @ RegistryError::InvalidSchema { .. }) => prop_assert!(error.to_string().contains("tools.json")),
            Err(error) => prop_assert!(false, "{}", error),
        }
    }
}
