//! Tool packs from the command line: `user_ask` answered on the terminal, pack tools
//! callable from code, `cordon tools export` in each vendor's shape.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn tools_file(dir: &std::path::Path) -> std::path::PathBuf {
    let root = dir.join("project");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("notes.txt"), "alpha\nbeta\n").unwrap();
    let path = dir.join("tools.json");
    let text = json!({"tools": [
        {"pack": "user_ask"},
        {"pack": "fs", "root": root},
        {"pack": "bash", "root": root, "allow": ["wc"]}
    ]});
    std::fs::write(&path, text.to_string()).unwrap();
    path
}

#[test]
fn user_ask_is_answered_on_the_terminal_by_number_or_freely() {
    let dir = tempfile::tempdir().unwrap();
    let tools = tools_file(dir.path());
    let program = dir.path().join("ask.py");
    std::fs::write(
        &program,
        "a = await user_ask(question='Which color?', options=['red', 'blue'])\n\
         b = await user_ask(question='Anything else?')\n[a, b]",
    )
    .unwrap();
    let output = crate::cordon(
        &[
            "run",
            "--json",
            "--tools",
            tools.to_str().unwrap(),
            program.to_str().unwrap(),
        ],
        "2\nmake it shiny\n",
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    let result: Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
    assert_eq!(
        result["result"],
        json!([
            {"answer": "blue", "is_freeform": false},
            {"answer": "make it shiny", "is_freeform": true}
        ]),
        "{stderr}"
    );
    assert!(
        stderr.contains("Which color?") && stderr.contains("2. blue"),
        "{stderr}"
    );
}

#[test]
fn pack_tools_are_callable_from_code() {
    let dir = tempfile::tempdir().unwrap();
    let tools = tools_file(dir.path());
    let output = crate::cordon(
        &["run", "--json", "--tools", tools.to_str().unwrap(), "-"],
        "r = await fs_read_file(path='notes.txt')\n\
         b = await bash(command='wc -l notes.txt')\n\
         try:\n    await bash(command='rm notes.txt')\n    refused = None\n\
         except ToolError as e:\n    refused = str(e)\n\
         [r['content'], b['stdout'].split()[0], 'refused: ' in refused]",
    );
    let result: Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
    assert_eq!(
        result["result"],
        json!(["alpha\nbeta\n", "2", true]),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn tools_export_prints_each_vendors_shape() {
    let dir = tempfile::tempdir().unwrap();
    let tools = tools_file(dir.path());
    let export = |format: &str| -> Value {
        let output = crate::cordon(
            &[
                "tools",
                "export",
                tools.to_str().unwrap(),
                "--format",
                format,
            ],
            "",
        );
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).unwrap()
    };
    let anthropic = export("anthropic");
    let names: Vec<&str> = anthropic
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "user_ask",
            "fs_read_file",
            "fs_list_files",
            "fs_search",
            "bash"
        ]
    );
    assert_eq!(
        anthropic[0]["input_schema"]["required"],
        json!(["question"])
    );
    let openai = export("openai");
    assert_eq!(openai[4]["type"], "function");
    assert_eq!(openai[4]["function"]["name"], "bash");
    assert!(openai[4]["function"]["parameters"]["properties"]["command"].is_object());
    let mcp = export("mcp");
    assert_eq!(mcp[1]["name"], "fs_read_file");
    assert!(mcp[1]["inputSchema"].is_object());
    let output = crate::cordon(
        &[
            "tools",
            "export",
            tools.to_str().unwrap(),
            "--format",
            "cobol",
        ],
        "",
    );
    assert_eq!(output.status.code(), Some(2));
}
