//! The JavaScript guest: same bridge, limits and suspend/resume as Python.

use cordon_protocol::execution::ClientToolResult;
use cordon_protocol::execution::{
    ExecutionEvent, ExecutionStatus, Language, LimitKind, Limits, ResultEncoding,
};
use cordon_protocol::tool::Locus;
use cordon_sandbox::SessionSpec;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::common::*;

fn defaults() -> Limits {
    Limits::default()
}

#[tokio::test]
async fn console_output_and_the_final_expression() {
    let result = completed(
        js(
            "console.log('hi', 1, {a: [2]}); console.error('oops'); const x = 40; x + 2",
            no_tools(),
            defaults(),
        )
        .await,
    );
    assert_eq!(result.stdout, "hi 1 { a: [ 2 ] }\n");
    assert_eq!(result.stderr, "oops\n");
    assert_eq!(result.result, json!(42));
    let result = completed(js("new Map([[1, 2]])", no_tools(), defaults()).await);
    assert_eq!(result.result_encoding, Some(ResultEncoding::Repr));
}

#[tokio::test]
async fn tools_take_one_object_and_failures_reject_with_tool_error() {
    let tools = tools(json!([
        {"name": "weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
         "handler": {"kind": "static", "result": {"temp_c": 21}}},
        {"name": "nope", "policy": "deny", "handler": {"kind": "static", "result": 0}}
    ]));
    let code = r#"
const a = await weather({city: "Paris"});
const b = tools.call("weather", {city: "Oslo"});
const kinds = [];
for (const f of [() => weather({city: 1}), () => nope({}), () => tools.call("missing", {})]) {
  try { await f(); } catch (e) { kinds.push(e instanceof tools.ToolError ? e.kind : String(e)); }
}
[a.temp_c, b.temp_c, kinds]
"#;
    let result = completed(js(code, tools, defaults()).await);
    assert_eq!(
        result.result,
        json!([21, 21, ["invalid_input", "denied", "unknown_tool"]])
    );
}

#[tokio::test]
async fn promise_all_leaves_as_one_batch_and_resumes() {
    let tools = tools(json!([client_tool("lookup")]));
    let mut execution = start_in(
        Language::Javascript,
        "await Promise.all([1, 2, 3].map(k => lookup({k})))",
        tools,
        defaults(),
    )
    .await;
    let mut calls = Vec::new();
    let pending = loop {
        match execution.next_event().await.expect("suspends") {
            ExecutionEvent::ToolCall {
                id,
                locus: Locus::Client,
                input,
                ..
            } => calls.push((id, input)),
            ExecutionEvent::Awaiting { pending, .. } => break pending,
            ExecutionEvent::Completed(result) => panic!("{result:#?}"),
            _ => {}
        }
    };
    assert_eq!(pending.len(), 3, "one batch of three");
    let results = calls
        .iter()
        .map(|(id, input)| ClientToolResult {
            call_id: id.clone(),
            output: json!(input["k"].as_i64().unwrap() * 10),
            is_error: false,
        })
        .collect();
    execution.submit_tool_results(results).unwrap();
    assert_eq!(
        completed(execution.wait().await).result,
        json!([10, 20, 30])
    );
}

#[tokio::test]
async fn syntax_errors_carry_line_and_column() {
    let result = js("let a = 1;\nlet b = ;\n", no_tools(), defaults()).await;
    let message = raised(&result, "SyntaxError");
    assert!(message.contains('2'), "{message}");
}

#[tokio::test]
async fn limits_are_enforced_and_named() {
    let result = js(
        "while (true) {}",
        no_tools(),
        Limits {
            cpu_ms: 100,
            ..defaults()
        },
    )
    .await;
    assert_eq!(
        (result.status, result.limit),
        (ExecutionStatus::LimitExceeded, Some(LimitKind::Cpu))
    );
    let result = js(
        "const a = []; while (true) a.push('x'.repeat(1 << 20) + a.length)",
        no_tools(),
        Limits {
            memory_bytes: 64 << 20,
            ..defaults()
        },
    )
    .await;
    assert_eq!(
        (result.status, result.limit),
        (ExecutionStatus::LimitExceeded, Some(LimitKind::Memory)),
        "{result:#?}"
    );
    let result = js(
        "for (;;) console.log('flood')",
        no_tools(),
        Limits {
            max_output_bytes: 5000,
            ..defaults()
        },
    )
    .await;
    assert_eq!(result.limit, Some(LimitKind::Output));
    let result = js(
        "await new Promise(r => setTimeout(r, 60000))",
        no_tools(),
        Limits {
            wall_ms: 200,
            ..defaults()
        },
    )
    .await;
    assert_eq!(result.limit, Some(LimitKind::Wall));
}

#[tokio::test]
async fn deep_recursion_is_a_clean_error() {
    let result = js(
        "function f(n) { return f(n + 1) + 1 }\nf(0)",
        no_tools(),
        defaults(),
    )
    .await;
    assert_eq!(result.status, ExecutionStatus::Error, "{result:#?}");
}

#[tokio::test]
async fn overwriting_bridge_objects_breaks_nothing_outside_the_guest() {
    let tools = tools(json!([static_tool("ping", json!("pong"))]));
    let session = sandbox()
        .await
        .session(SessionSpec::new(Language::Javascript, tools));
    let hostile = "globalThis.tools = null; Promise = null; JSON = null; console = null; Object.prototype.then = 1; 'done'";
    let first = session.execute(hostile).wait().await;
    assert_ne!(first.status, ExecutionStatus::LimitExceeded, "{first:#?}");
    let second = completed(session.execute("await ping({})").wait().await);
    assert_eq!(second.result, json!("pong"));
    // And fresh instances never see it.
    let fresh = completed(js("typeof JSON.stringify", no_tools(), defaults()).await);
    assert_eq!(fresh.result, json!("function"));
}

#[tokio::test]
async fn sessions_keep_globals() {
    let session = sandbox()
        .await
        .session(SessionSpec::new(Language::Javascript, no_tools()));
    completed(
        session
            .execute("var n = 1; function bump() { n += 1 }")
            .wait()
            .await,
    );
    completed(session.execute("bump(); bump()").wait().await);
    assert_eq!(
        completed(session.execute("n").wait().await).result,
        json!(3)
    );
}

#[tokio::test]
async fn no_host_reach() {
    let code = "[typeof fetch, typeof require, typeof process, typeof std, typeof os]";
    let result = completed(js(code, no_tools(), defaults()).await);
    assert_eq!(
        result.result,
        json!([
            "undefined",
            "undefined",
            "undefined",
            "undefined",
            "undefined"
        ])
    );
}

/// Fresh instances reuse memory slots (reset in place for JavaScript): whatever a run wrote,
/// heap and globals, the next run starts from the image.
#[tokio::test]
async fn fresh_instances_start_from_the_image_whatever_ran_before() {
    let dirty = "globalThis.secret = 'x'.repeat(1 << 20); \
                 globalThis.kept = Array.from({length: 20000}, (_, i) => ({i})); \
                 Object.prototype.polluted = 1; JSON.stringify = null; kept.length";
    let check = "[typeof secret, typeof kept, ({}).polluted === undefined, \
                 JSON.stringify({a: [1, 2]}), Array.from({length: 1000}, (_, i) => i).reduce((a, b) => a + b)]";
    for _ in 0..10 {
        let written = completed(js(dirty, no_tools(), defaults()).await);
        assert_eq!(written.result, json!(20000));
        let clean = completed(js(check, no_tools(), defaults()).await);
        assert_eq!(
            clean.result,
            json!(["undefined", "undefined", true, "{\"a\":[1,2]}", 499500])
        );
    }
}

/// A result is delivered before its instance's slot is back in the pool; a caller that
/// starts the next execution at once must still find a slot, even in a pool of one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn back_to_back_executions_in_a_pool_of_one_never_find_it_full() {
    let sandbox = small_pool(Language::Javascript, 1).await;
    for round in 0..200 {
        let request = cordon_sandbox::ExecutionRequest::new(
            Language::Javascript,
            format!("{round} + 1"),
            no_tools(),
        );
        let result = sandbox.execute(request).wait().await;
        assert_eq!(
            result.status,
            ExecutionStatus::Completed,
            "round {round}: {result:#?}"
        );
        assert_eq!(result.result, json!(round + 1));
    }
}

#[tokio::test]
async fn arguments_reach_the_host_as_json_stringify_writes_them() {
    // Plain data is written by the guest directly; everything else still goes through
    // JSON.stringify. Either way the host must receive what JSON.stringify writes, and a
    // getter must run once per call (the direct path gives up before reading anything
    // that runs code).
    let tools = tools(json!([static_tool("echo", json!("ok"))]));
    let code = r#"
let reads = 0;
const withGetter = { a: 1, get b() { reads += 1; return 2; } };
class Point { constructor() { this.x = 1; } }
const deep = {};
let cursor = deep;
for (let i = 0; i < 40; i++) { cursor.next = { i }; cursor = cursor.next; }
const shapes = [
  { key: 1 }, {},
  { s: "plain", e: "", q: "quote\" back\\ nl\n tab\t cr\r bs\b ff\f nul\u0000 us\u001f", u: "é😀\u2028\u007f" },
  { n: [0, -0, 1, -1, 2147483647, -2147483648, 2147483648, 2.5, -0.1, 0.1 + 0.2, 1 / 3, 1e-6,
        9.99e-7, 1e-7, 1e20, 1e21, 2 ** 53 + 2, 2 ** 60, 123.456e5, NaN, Infinity, -Infinity,
        1.7976931348623157e308, 5e-324, -1e-300] },
  { t: true, f: false, z: null, skipped: undefined, arr: [undefined, null, "x"] },
  { nested: { a: [1, { b: [2, [3, { c: "d" }]] }], "": "empty key" } },
  { b: 1, 2: "two", 1: "one", a: 2, "-1": "minus", "01": "zero one" },
  { "k\"ey": 1, "ключ": 2, "😀": 3 },
  { date: new Date(0) }, { point: new Point() }, { map: new Map([[1, 2]]) }, { sparse: [1, , 3] },
  { fn: () => 1, sym: Symbol("s"), kept: 1 }, { own: { toJSON() { return "custom"; } } },
  Object.assign(Object.create(null), { bare: 1 }),
  withGetter, { deep },
  JSON.parse('{"__proto__": {"p": 1}}'),
  { hidden: Object.defineProperty({ k: 1 }, "toJSON", { value: () => "hidden", enumerable: false }) },
  { list: Object.assign([1, 2], { toJSON() { return "list"; } }) },
];
const expected = [];
for (const shape of shapes) {
  expected.push(JSON.parse(JSON.stringify(shape)));
  tools.call("echo", shape);
  await echo(shape);
}
// A `toJSON` on the prototype changes what every object writes.
Object.prototype.toJSON = function () { return { replaced: true }; };
try {
  expected.push(JSON.parse(JSON.stringify({ key: 1 })));
  tools.call("echo", { key: 1 });
  await echo({ key: 1 });
} finally {
  delete Object.prototype.toJSON;
}
// So does one on a prototype put between Array.prototype and Object.prototype.
Object.setPrototypeOf(Array.prototype, { toJSON() { return "between"; } });
try {
  expected.push(JSON.parse(JSON.stringify({ a: [1] })));
  tools.call("echo", { a: [1] });
  await echo({ a: [1] });
} finally {
  Object.setPrototypeOf(Array.prototype, Object.prototype);
}
// A lone surrogate has no JSON the host accepts: refused, never replaced.
const refused = [];
for (const shape of [{ lone: "\ud800x" }, { ["\udc00"]: 1 }]) {
  try { tools.call("echo", shape); refused.push("sent"); } catch (e) { refused.push(e.kind); }
}
[expected, reads, refused]
"#;
    let result = completed(js(code, tools, defaults()).await);
    let expected = result.result[0]
        .as_array()
        .expect("a list of inputs")
        .clone();
    assert_eq!(result.result[1], json!(3), "each call read the getter once");
    assert_eq!(result.result[2], json!(["invalid_input", "invalid_input"]));
    let sent: Vec<_> = result.tool_calls.iter().map(|call| &call.input).collect();
    assert!(sent.len() >= expected.len() * 2, "{sent:?}");
    for (index, want) in expected.iter().enumerate() {
        assert_eq!(sent[2 * index], want, "tools.call, shape {index}");
        assert_eq!(sent[2 * index + 1], want, "await echo(...), shape {index}");
    }
    assert_eq!(expected[0], json!({"key": 1}));
    assert_eq!(expected[expected.len() - 2], json!({"replaced": true}));
    assert_eq!(expected.last(), Some(&json!({"a": "between"})));
    assert!(
        expected.contains(&json!({"hidden": "hidden"})),
        "{expected:?}"
    );
    assert!(expected.contains(&json!({"list": "list"})), "{expected:?}");
}

#[tokio::test]
async fn tools_call_takes_every_argument_shape_and_says_what_is_wrong() {
    // `tools.call` runs most calls natively and hands the rest to its general path: every
    // shape must get the same answer either way, and a call made while another's argument
    // is being written must get its own.
    let mut deep = json!(1);
    for _ in 0..40 {
        deep = json!([deep]);
    }
    let tools = tools(json!([
        static_tool("echo", json!({"ok": [1, 2, 3, 4]})),
        static_tool("deep", deep.clone()),
        {"name": "typed", "input_schema": {"type": "object", "required": ["n"]},
         "handler": {"kind": "static", "result": 1}}
    ]));
    let code = r#"
const outcome = (thunk) => {
  try { const v = thunk(); return ["value", v && v.ok ? v.ok.length : v]; }
  catch (e) { return e instanceof tools.ToolError ? [e.kind, e.tool, e.message] : [e.name, e.message]; }
};
const nested = { get a() { return tools.call("echo", { inner: true }).ok.length; } };
let depth = 0;
for (let d = tools.call("deep", {}); Array.isArray(d); d = d[0]) depth += 1;
[
  outcome(() => tools.call("echo")),
  outcome(() => tools.call("echo", undefined)),
  outcome(() => tools.call("echo", null)),
  outcome(() => tools.call("echo", { a: 1 }, "extra")),
  outcome(() => tools.call("echo", [1])),
  outcome(() => tools.call("echo", () => 1)),
  outcome(() => tools.call(7, {})),
  outcome(() => tools.call("typed", {})),
  outcome(() => tools.call("missing", {})),
  outcome(() => tools.call("echo", nested)),
  depth,
  [typeof tools.call, tools.call.name, tools.call.length],
  [() => tools.call("missing", {}), () => tools.call(7)].map((thunk) => {
    try { thunk(); } catch (e) { return e.stack.split("\n")[0]; }
  }),
]
"#;
    let result = completed(js(code, tools, defaults()).await);
    let seen = result.result.as_array().expect("a list").clone();
    let four = json!(["value", 4]);
    assert_eq!(
        seen[..4],
        [four.clone(), four.clone(), four.clone(), four.clone()]
    );
    for (index, (kind, needle)) in [
        ("TypeError", "tools.call() takes one object argument"),
        ("TypeError", "tools.call() takes one object argument"),
        ("TypeError", "takes the tool name as a string"),
        ("invalid_input", "typed: "),
        ("unknown_tool", "missing: unknown tool"),
    ]
    .into_iter()
    .enumerate()
    {
        let got = &seen[4 + index];
        assert_eq!(got[0], kind, "{got}");
        let text = got
            .as_array()
            .and_then(|parts| parts.last())
            .and_then(|t| t.as_str());
        assert!(text.is_some_and(|t| t.contains(needle)), "{got}");
    }
    assert_eq!(seen[9], four);
    assert_eq!(
        seen[10],
        json!(40),
        "deep results are JSON.parse's to build"
    );
    assert_eq!(seen[11], json!(["function", "call", 1]));
    // Errors start at the author's call site, not in `tools.call` itself.
    for top in seen[12].as_array().expect("two stacks") {
        let top = top.as_str().unwrap_or_default();
        assert!(
            top.starts_with("    at ") && top.contains("<cell>"),
            "{top:?}"
        );
    }
    let inputs: Vec<String> = result
        .tool_calls
        .iter()
        .map(|call| format!("{} {}", call.name, call.input))
        .collect();
    assert_eq!(
        inputs,
        [
            "deep {}",
            "echo {}",
            "echo {}",
            "echo {}",
            r#"echo {"a":1}"#,
            "typed {}",
            "missing {}",
            r#"echo {"inner":true}"#,
            r#"echo {"a":4}"#,
            "missing {}",
        ]
    );
}

#[tokio::test]
async fn results_arrive_as_json_parse_makes_them() {
    // Results are built by the guest directly (JSON.parse only for what it leaves): the
    // values, key order, property kinds and prototypes must be JSON.parse's.
    let value = json!({
        "text": "é😀\u{2028} \"q\" \\ / \n\t\u{1}\u{1f}",
        "numbers": [0, 1, -1, 2147483647, 2147483648u64, -2147483649i64, 1.5, -0.25, 1e300,
                    -1e-7, 9007199254740993u64, 18446744073709551615u64],
        "negzero": -0.0,
        "nested": {"a": [[], {}, [{"b": null}]], "": true, "2": false, "1": "one"},
        "__proto__": {"polluted": true},
        "é": "accented",
    });
    let tools = tools(json!([static_tool("shapes", value.clone())]));
    // The script names a property "Ã©" (the UTF-8 bytes of "é" read one byte a character)
    // before the result's key "é" is made.
    let code = r#"
const mojibake = { "Ã©": 0 };
const r = tools.call("shapes", {});
const s = await shapes({});
const d = Object.getOwnPropertyDescriptor(r, "text");
[r, {
  sameTwice: JSON.stringify(r) === JSON.stringify(s),
  plain: Object.getPrototypeOf(r) === Object.prototype
    && Object.getPrototypeOf(r.nested.a[2][0]) === Object.prototype,
  arrays: Array.isArray(r.numbers) && r.numbers.length === 12 && Array.isArray(r.nested.a[0]),
  ownProto: Object.keys(r).includes("__proto__") && ({}).polluted === undefined
    && r.polluted === undefined,
  negzero: Object.is(r.negzero, -0),
  dataProperty: d.writable && d.enumerable && d.configurable && !("get" in d),
  nestedKeys: Object.keys(r.nested),
  accented: r["é"] === "accented" && !("Ã©" in r) && Object.keys(mojibake).length === 1,
}]
"#;
    let result = completed(js(code, tools, defaults()).await);
    let got = &result.result[0];
    assert_eq!(got["text"], value["text"]);
    assert_eq!(got["nested"], value["nested"]);
    assert_eq!(got["__proto__"], value["__proto__"]);
    assert_eq!(
        got["numbers"],
        json!([
            0,
            1,
            -1,
            2147483647,
            2147483648u64,
            -2147483649i64,
            1.5,
            -0.25,
            1e300,
            -1e-7,
            9007199254740992u64,
            18446744073709552000.0
        ])
    );
    assert_eq!(
        result.result[1],
        json!({"sameTwice": true, "plain": true, "arrays": true, "ownProto": true,
               "negzero": true, "dataProperty": true, "nestedKeys": ["1", "2", "", "a"],
               "accented": true})
    );
}
