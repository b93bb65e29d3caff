//! Tools files and declarations: every mistake is caught at load time, and says where.

use cordon_core::{RegistryError, ToolRegistry};
use cordon_protocol::tool::{HandlerSpec, Policy, ToolDeclaration};
use pretty_assertions::assert_eq;
use serde_json::json;

fn load(text: &str) -> Result<ToolRegistry, RegistryError> {
    ToolRegistry::from_json(text, "tools.json")
}

fn load_tools(tools: serde_json::Value) -> Result<ToolRegistry, RegistryError> {
    load(&json!({ "tools": tools }).to_string())
}

fn decl(name: &str) -> ToolDeclaration {
    ToolDeclaration {
        name: name.into(),
        description: String::new(),
        input_schema: json!({"type": "object"}),
        policy: Policy::Allow,
        defer_loading: false,
        handler: HandlerSpec::Static {
            result: json!(null),
        },
    }
}

#[test]
fn json_syntax_errors_give_file_line_and_column() {
    let text = "{\n  \"tools\": [\n    {\"name\": \"a\",, \"handler\": {\"kind\": \"static\", \"result\": 1}}\n  ]\n}\n";
    let error = load(text).unwrap_err();
    let RegistryError::Syntax {
        origin,
        line,
        column,
        ..
    } = &error
    else {
        panic!("{error:?}")
    };
    assert_eq!((origin.as_str(), *line), ("tools.json", 3));
    assert_eq!(*column, 18);
    let shown = error.to_string();
    assert!(
        shown.starts_with("tools.json:3:18: not valid JSON: "),
        "{shown}"
    );
    assert!(
        !shown.contains(" at line "),
        "position is given once: {shown}"
    );
}

#[test]
fn truncated_and_trailing_text_are_syntax_errors() {
    assert!(matches!(
        load("{\"tools\": ["),
        Err(RegistryError::Syntax { line: 1, .. })
    ));
    let error = load("{\"tools\": []}\nx").unwrap_err();
    assert!(
        matches!(
            error,
            RegistryError::Syntax {
                line: 2,
                column: 1,
                ..
            }
        ),
        "{error:?}"
    );
}

#[test]
fn shape_errors_name_the_path_of_the_bad_value() {
    let text = r#"{"tools": [
  {"name": "ok", "handler": {"kind": "static", "result": 1}},
  {"name": "bad", "handler": {"kind": "shell", "argv": ["ls"]}}
]}"#;
    let error = load(text).unwrap_err();
    let RegistryError::Shape {
        path,
        line,
        message,
        ..
    } = &error
    else {
        panic!("{error:?}")
    };
    assert_eq!(path, "tools[1].handler.kind");
    assert_eq!(*line, 3);
    assert!(message.contains("unknown variant `shell`"), "{message}");
    assert!(error.to_string().starts_with("tools.json:3:"), "{error}");
    assert!(
        error
            .to_string()
            .contains("tools[1].handler.kind: unknown variant `shell`"),
        "{error}"
    );
}

#[test]
fn missing_fields_wrong_types_and_unknown_fields_are_located() {
    let cases = [
        (
            json!({"tools": [{"name": "a"}]}),
            "tools[0]",
            "missing field `handler`",
        ),
        (
            json!({"tools": [{"name": 5, "handler": {"kind": "client"}}]}),
            "tools[0].name",
            "invalid type: integer `5`",
        ),
        (
            json!({"tools": [{"name": "a", "policy": "maybe", "handler": {"kind": "client"}}]}),
            "tools[0].policy",
            "unknown variant `maybe`",
        ),
        (
            json!({"tools": [{"name": "a", "colour": 1, "handler": {"kind": "client"}}]}),
            "tools[0].colour",
            "unknown field `colour`",
        ),
        (json!({"tool": []}), "tool", "unknown field `tool`"),
        (json!({"tools": {}}), "tools", "invalid type: map"),
    ];
    for (document, want_path, want_message) in cases {
        let error = load(&document.to_string()).unwrap_err();
        let RegistryError::Shape { path, message, .. } = &error else {
            panic!("{error:?}")
        };
        assert_eq!(path, want_path, "for {document}");
        assert!(message.contains(want_message), "for {document}: {message}");
    }
}

#[test]
fn a_top_level_array_explains_the_expected_shape() {
    let error = load("[]").unwrap_err();
    let RegistryError::Shape { path, .. } = &error else {
        panic!("{error:?}")
    };
    assert_eq!(path, ".");
    let shown = error.to_string();
    assert!(shown.starts_with("tools.json:1:"), "{shown}");
    assert!(
        !shown.contains(": .:"),
        "no path for the top level: {shown}"
    );
    assert!(
        shown.ends_with(
            r#"(a tools file is an object: {"tools": [{"name": …, "handler": {"kind": …}}]})"#
        ),
        "{shown}"
    );
}

#[test]
fn duplicate_names_point_at_both_declarations() {
    let error = load_tools(json!([
        {"name": "a", "handler": {"kind": "client"}},
        {"name": "b", "handler": {"kind": "client"}},
        {"name": "a", "handler": {"kind": "client"}},
    ]))
    .unwrap_err();
    let RegistryError::DuplicateName {
        index, name, first, ..
    } = &error
    else {
        panic!("{error:?}")
    };
    assert_eq!((*index, name.as_str(), *first), (2, "a", Some(0)));
    assert_eq!(
        error.to_string(),
        "tools.json: tools[2]: tool `a` is already declared at tools[0]; tool names must be unique"
    );
}

#[test]
fn tool_names_are_checked() {
    let long = "a".repeat(129);
    for bad in [
        "",
        "1abc",
        ".hidden",
        "has space",
        "semi;colon",
        "ünï",
        long.as_str(),
    ] {
        let error = ToolRegistry::new(vec![decl(bad)]).unwrap_err();
        assert!(
            matches!(&error, RegistryError::InvalidName { name, .. } if name == bad),
            "{bad:?}: {error:?}"
        );
    }
    let longest = "a".repeat(128);
    for good in [
        "get_weather",
        "server.tool-x_1",
        "_private",
        "A",
        longest.as_str(),
    ] {
        ToolRegistry::new(vec![decl(good)]).unwrap_or_else(|error| panic!("{good:?}: {error}"));
    }
}

#[test]
fn invalid_schemas_name_the_tool() {
    let error = load_tools(json!([
        {"name": "ok", "handler": {"kind": "client"}},
        {"name": "broken", "input_schema": {"type": 5}, "handler": {"kind": "client"}},
    ]))
    .unwrap_err();
    let RegistryError::InvalidSchema { index, name, .. } = &error else {
        panic!("{error:?}")
    };
    assert_eq!((*index, name.as_str()), (1, "broken"));
    assert!(
        error
            .to_string()
            .starts_with("tools.json: tools[1] `broken`: input_schema is not a valid JSON Schema")
    );
}

#[test]
fn schemas_that_cannot_accept_an_object_are_rejected() {
    let error = load_tools(json!([
        {"name": "s", "input_schema": {"type": "string"}, "handler": {"kind": "client"}},
    ]))
    .unwrap_err();
    assert!(
        matches!(error, RegistryError::InvalidSchema { .. }),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("objects of named arguments"),
        "{error}"
    );
    load_tools(json!([
        {"name": "s", "input_schema": {"type": ["object", "null"]}, "handler": {"kind": "client"}},
    ]))
    .unwrap();
}

#[test]
fn schema_references_are_never_fetched() {
    for reference in ["https://example.com/schema.json", "file:///etc/passwd"] {
        let error = load_tools(json!([
            {"name": "r", "input_schema": {"$ref": reference}, "handler": {"kind": "client"}},
        ]))
        .unwrap_err();
        assert!(
            matches!(error, RegistryError::InvalidSchema { .. }),
            "{reference}: {error:?}"
        );
    }
}

#[test]
fn handler_specs_are_checked() {
    let error =
        load_tools(json!([{"name": "c", "handler": {"kind": "command", "argv": []}}])).unwrap_err();
    assert!(
        matches!(error, RegistryError::EmptyArgv { index: 0, .. }),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("handler.argv is empty"),
        "{error}"
    );

    for (url, reason) in [
        ("not a url", "is not a URL"),
        ("ftp://example.com/x", "scheme `ftp`"),
        ("file:///tmp/x", "scheme `file`"),
    ] {
        let error = load_tools(json!([{"name": "h", "handler": {"kind": "http", "url": url}}]))
            .unwrap_err();
        assert!(
            matches!(&error, RegistryError::BadUrl { url: u, .. } if u == url),
            "{error:?}"
        );
        assert!(error.to_string().contains(reason), "{error}");
    }

    let error = load_tools(json!([
        {"name": "c", "handler": {"kind": "command", "argv": ["true"], "timeout_ms": 0}},
    ]))
    .unwrap_err();
    assert!(
        matches!(error, RegistryError::ZeroTimeout { .. }),
        "{error:?}"
    );
}

#[test]
fn defaults_and_declaration_order() {
    let registry = load_tools(json!([
        {"name": "zeta", "handler": {"kind": "client"}},
        {"name": "alpha", "description": "first letter", "policy": "ask", "handler": {"kind": "static", "result": [1]}},
    ]))
    .unwrap();
    assert_eq!(registry.names(), vec!["zeta", "alpha"]);
    let zeta = registry.get("zeta").unwrap();
    assert_eq!(zeta.declaration.input_schema, json!({"type": "object"}));
    assert_eq!(zeta.declaration.policy, Policy::Allow);
    assert_eq!(
        registry.get("alpha").unwrap().declaration.policy,
        Policy::Ask
    );
    assert!(registry.get("beta").is_none());
    assert_eq!(ToolRegistry::empty().names(), Vec::<&str>::new());
}

#[test]
fn extend_is_all_or_nothing() {
    let mut registry = ToolRegistry::new(vec![decl("a")]).unwrap();
    let error = registry.extend(vec![decl("b"), decl("a")]).unwrap_err();
    assert!(
        matches!(
            error,
            RegistryError::DuplicateName {
                index: 1,
                first: None,
                ..
            }
        ),
        "{error:?}"
    );
    assert_eq!(registry.names(), vec!["a"]);
    let error = registry.extend(vec![decl("c"), decl("c")]).unwrap_err();
    assert!(
        matches!(
            error,
            RegistryError::DuplicateName {
                index: 1,
                first: Some(0),
                ..
            }
        ),
        "{error:?}"
    );
    registry.extend(vec![decl("b"), decl("mcp.c")]).unwrap();
    assert_eq!(registry.names(), vec!["a", "b", "mcp.c"]);
}

#[test]
fn files_are_read_and_missing_files_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tools.json");
    std::fs::write(
        &path,
        r#"{"tools": [{"name": "a", "handler": {"kind": "client"}}]}"#,
    )
    .unwrap();
    assert_eq!(ToolRegistry::from_file(&path).unwrap().names(), vec!["a"]);

    std::fs::write(&path, "{\"tools\": [}").unwrap();
    let error = ToolRegistry::from_file(&path).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with(&format!("{}:1:12:", path.display())),
        "{error}"
    );

    let missing = dir.path().join("missing.json");
    let error = ToolRegistry::from_file(&missing).unwrap_err();
    assert!(matches!(error, RegistryError::Read { .. }), "{error:?}");
    assert!(error.to_string().contains("missing.json"), "{error}");
}

#[derive(Debug)]
struct NoProvider;

impl cordon_core::ToolProvider for NoProvider {
    fn call<'a>(
        &'a self,
        _tool: &'a str,
        _input: &'a serde_json::Value,
    ) -> futures::future::BoxFuture<'a, Result<serde_json::Value, String>> {
        Box::pin(async { Err("not called in these tests".to_owned()) })
    }
}

/// What a connection offers: `calc.add` with the server's schema, policy `policy`.
fn offered(policy: Policy) -> Vec<ToolDeclaration> {
    vec![ToolDeclaration {
        name: "calc.add".into(),
        description: "Adds two integers.".into(),
        input_schema: json!({"type": "object", "required": ["a", "b"]}),
        policy,
        defer_loading: false,
        handler: HandlerSpec::Mcp {
            server: "calc".into(),
            tool: "add".into(),
        },
    }]
}

fn connect(registry: &mut ToolRegistry, policy: Policy) -> Result<(), RegistryError> {
    registry.connect("calc", offered(policy), std::sync::Arc::new(NoProvider))
}

#[test]
fn a_declaration_of_a_connected_tool_sets_its_policy_and_description() {
    let mut registry = load_tools(json!([
        {"name": "calc.add", "policy": "ask", "description": "Adds; ask first.",
         "handler": {"kind": "mcp", "server": "calc", "tool": "add"}},
        {"name": "other", "handler": {"kind": "static", "result": 1}}
    ]))
    .unwrap();
    connect(&mut registry, Policy::Allow).unwrap();
    assert_eq!(registry.names(), vec!["calc.add", "other"]);
    let tool = registry.get("calc.add").unwrap();
    assert_eq!(tool.declaration.policy, Policy::Ask);
    assert_eq!(tool.declaration.description, "Adds; ask first.");
    // The schema is the server's: a call without `b` is refused before it leaves.
    assert_eq!(
        tool.declaration.input_schema,
        json!({"type": "object", "required": ["a", "b"]})
    );
    assert!(tool.validate_input(&json!({"a": 1})).is_err());
}

#[test]
fn the_stricter_of_connection_default_and_declaration_wins() {
    for (declared, default, effective) in [
        ("allow", Policy::Ask, Policy::Ask),
        ("deny", Policy::Ask, Policy::Deny),
        ("ask", Policy::Deny, Policy::Deny),
        ("allow", Policy::Allow, Policy::Allow),
    ] {
        let mut registry = load_tools(json!([
            {"name": "calc.add", "policy": declared,
             "handler": {"kind": "mcp", "server": "calc", "tool": "add"}}
        ]))
        .unwrap();
        connect(&mut registry, default).unwrap();
        let tool = registry.get("calc.add").unwrap();
        assert_eq!(
            tool.declaration.policy, effective,
            "{declared} + {default:?}"
        );
        // An empty description keeps the server's.
        assert_eq!(tool.declaration.description, "Adds two integers.");
    }
}

#[test]
fn a_declaration_that_cannot_stand_for_a_connected_tool_is_refused() {
    for (tools, needle) in [
        (
            json!([{"name": "calc.add", "handler": {"kind": "static", "result": 1}}]),
            "{\"kind\":\"static\"}",
        ),
        (
            json!([{"name": "calc.add", "handler": {"kind": "command", "argv": ["true"]}}]),
            "{\"kind\":\"command\"}",
        ),
        (
            json!([{"name": "calc.add", "handler": {"kind": "mcp", "server": "calc", "tool": "sub"}}]),
            "\"tool\":\"sub\"",
        ),
        (
            json!([{"name": "calc.add", "handler": {"kind": "mcp", "server": "files", "tool": "add"}}]),
            "\"server\":\"files\"",
        ),
        (
            json!([{"name": "calc.add", "input_schema": {"type": "object", "properties": {}},
                    "handler": {"kind": "mcp", "server": "calc", "tool": "add"}}]),
            "input_schema",
        ),
    ] {
        let mut registry = load_tools(tools.clone()).unwrap();
        let before = registry.get("calc.add").unwrap().declaration.clone();
        let error = connect(&mut registry, Policy::Allow).unwrap_err();
        let RegistryError::ConnectedOverride { name, server, .. } = &error else {
            panic!("{tools}: {error:?}")
        };
        assert_eq!((name.as_str(), server.as_str()), ("calc.add", "calc"));
        let message = error.to_string();
        assert!(message.contains(needle), "{message}");
        assert!(
            message.contains(r#"{"kind":"mcp","server":"calc","tool":"add"}"#)
                || needle == "input_schema",
            "{message}"
        );
        // All or nothing: the registry is unchanged.
        assert_eq!(registry.get("calc.add").unwrap().declaration, before);
    }
}
