//! What Python guest code sees: output, results, errors, tools, batching, modules.

use cordon_protocol::execution::{ExecutionEvent, ResultEncoding, Stream};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn prints_and_returns_the_final_expression_as_json() {
    let result = completed(python("print('hello')\nx = 20\n{'answer': x + 22, 'ok': True}").await);
    assert_eq!(result.stdout, "hello\n");
    assert_eq!(result.result, json!({"answer": 42, "ok": true}));
    assert_eq!(result.result_encoding, Some(ResultEncoding::Json));
}

#[tokio::test]
async fn non_json_values_come_back_as_repr() {
    let result = completed(python("class P:\n    def __repr__(self): return '<P 1>'\nP()").await);
    assert_eq!(result.result, json!("<P 1>"));
    assert_eq!(result.result_encoding, Some(ResultEncoding::Repr));
    let result = completed(python("float('nan')").await);
    assert_eq!(result.result_encoding, Some(ResultEncoding::Repr));
}

#[tokio::test]
async fn statements_only_give_no_result() {
    let result = completed(python("x = 1").await);
    assert_eq!(result.result, serde_json::Value::Null);
    assert_eq!(result.result_encoding, None);
}

#[tokio::test]
async fn exceptions_carry_type_message_and_traceback() {
    let result = python("def f():\n    return 1 / 0\nf()").await;
    assert_eq!(raised(&result, "ZeroDivisionError"), "division by zero");
    let traceback = &result.error.as_ref().unwrap().traceback;
    assert!(traceback.contains("line 2"), "{traceback}");
    assert!(
        !traceback.contains("<cordon>"),
        "runtime frames leak: {traceback}"
    );
}

#[tokio::test]
async fn syntax_errors_name_line_and_column() {
    let result = python("x = 1\ny = 2 +* 3\n").await;
    let message = raised(&result, "SyntaxError");
    assert!(message.contains("line 2"), "{message}");
    assert!(message.contains("column"), "{message}");
}

#[tokio::test]
async fn stderr_is_separate_and_streamed_as_deltas() {
    let mut execution = start(
        "import sys\nprint('out')\nprint('err', file=sys.stderr)",
        no_tools(),
        Default::default(),
    )
    .await;
    let events = all_events(&mut execution).await;
    let deltas: Vec<_> = events
        .iter()
        .filter_map(|event| match event {
            ExecutionEvent::OutputDelta { stream, text } => Some((*stream, text.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        deltas,
        vec![(Stream::Stdout, "out\n"), (Stream::Stderr, "err\n")]
    );
    let ExecutionEvent::Completed(result) = events.last().unwrap() else {
        panic!("no completion")
    };
    assert_eq!(
        (result.stdout.as_str(), result.stderr.as_str()),
        ("out\n", "err\n")
    );
}

#[tokio::test]
async fn standard_modules_models_reach_for_import() {
    let code = r##"
import json, re, math, datetime, collections, itertools, functools, random, string
import statistics, textwrap, dataclasses, typing, decimal, fractions, heapq, bisect
import base64, hashlib, uuid, time, csv, io, enum
from dataclasses import dataclass
@dataclass
class P:
    x: int
[json.dumps({"a": 1}), re.sub(r"\d", "#", "a1"), math.isqrt(17), statistics.mean([1, 2, 3]),
 hashlib.sha256(b"x").hexdigest()[:8], str(decimal.Decimal("1.1") + 1), str(fractions.Fraction(1, 3)),
 base64.b64encode(b"hi").decode(), len(str(uuid.uuid4())), P(3).x, heapq.nsmallest(1, [3, 1]),
 datetime.date(2024, 1, 2).isoformat(), list(itertools.accumulate([1, 2, 3]))]
"##;
    let result = completed(python(code).await);
    assert_eq!(
        result.result,
        json!([
            "{\"a\": 1}",
            "a#",
            4,
            2,
            "2d711642",
            "2.1",
            "1/3",
            "aGk=",
            36,
            3,
            [1],
            "2024-01-02",
            [1, 3, 6]
        ])
    );
}

#[tokio::test]
async fn fresh_instances_draw_different_random_numbers() {
    let first = completed(python("import random\nrandom.random()").await).result;
    let second = completed(python("import random\nrandom.random()").await).result;
    assert_ne!(first, second, "the snapshot froze the random state");
}

#[tokio::test]
async fn back_to_back_executions_in_a_pool_of_one_share_it_with_the_instance_made_ahead() {
    // Between executions the pool's only slot holds the instance made ahead for the next
    // one: every execution must still get an instance, and find it as fresh as a new one.
    let language = python_language();
    let sandbox = small_pool(language, 1).await;
    for round in 0..30 {
        let code = format!("assert 'seen' not in globals()\nseen = {round}\nseen + 1");
        let request = cordon_sandbox::ExecutionRequest::new(language, code, no_tools());
        let result = sandbox.execute(request).wait().await;
        assert_eq!(
            result.status,
            cordon_protocol::execution::ExecutionStatus::Completed,
            "round {round}: {result:#?}"
        );
        assert_eq!(result.result, json!(round + 1));
    }
    // A session takes the instance made ahead too, and keeps it.
    let session = sandbox.session(cordon_sandbox::SessionSpec::new(language, no_tools()));
    completed(session.execute("kept = 5").wait().await);
    assert_eq!(
        completed(session.execute("kept + 1").wait().await).result,
        json!(6)
    );
}

/// Fresh instances reuse memory slots (reset in place where the kernel tracks
/// written pages): whatever a run wrote, heap, modules and builtins, in pages it kept or
/// past what a slot keeps, the next run starts from the image.
#[tokio::test]
async fn fresh_instances_start_from_the_image_whatever_ran_before() {
    let language = python_language();
    let sandbox = small_pool(language, 2).await;
    let run = |code: &str| {
        let request = cordon_sandbox::ExecutionRequest::new(language, code, no_tools());
        sandbox.execute(request).wait()
    };
    // Nothing the runtime itself uses is patched: CPython's runtime is Python code in the
    // same interpreter, and a patched `len` would break the dirty run itself.
    let dirty = "import sys, builtins, textwrap\n\
                 secret = bytearray(b's' * (12 << 20))\n\
                 kept = [{'i': i} for i in range(20000)]\n\
                 sys.modules['planted'] = 1\n\
                 textwrap.dedent = None\n\
                 builtins.planted_builtin = True\n\
                 len(kept)";
    let check = "import sys, builtins, textwrap\n\
                 [sorted(k for k in ('secret', 'kept') if k in globals()), 'planted' in sys.modules, \
                  hasattr(builtins, 'planted_builtin'), textwrap.dedent('  a'), sum(range(1000)), \
                  bytearray(1 << 16).count(0)]";
    for round in 0..8 {
        let written = completed(run(dirty).await);
        assert_eq!(written.result, json!(20000), "round {round}");
        let clean = completed(run(check).await);
        assert_eq!(
            clean.result,
            json!([[], false, false, "a", 499500, 65536]),
            "round {round}"
        );
    }
}

#[tokio::test]
async fn tools_are_global_async_functions_and_a_module() {
    let tools = tools(json!([static_tool("get_weather", json!({"temp_c": 21}))]));
    let code = r#"
import tools as t
a = await get_weather(city="Paris")
b = await t.get_weather(city="Oslo")
c = tools.call("get_weather", {"city": "Lima"})
[a["temp_c"], b["temp_c"], c["temp_c"], t.ToolError is ToolError]
"#;
    let result = completed(python_with(code, tools).await);
    assert_eq!(result.result, json!([21, 21, 21, true]));
    assert_eq!(result.tool_calls.len(), 3);
    assert_eq!(result.tool_calls[0].name, "get_weather");
    assert_eq!(result.tool_calls[0].input, json!({"city": "Paris"}));
}

#[tokio::test]
async fn schema_violations_unknown_tools_and_denials_raise_tool_error() {
    let tools = tools(json!([
        {"name": "typed", "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
         "handler": {"kind": "static", "result": 1}},
        {"name": "forbidden", "policy": "deny", "handler": {"kind": "static", "result": 1}}
    ]));
    let code = r#"
kinds = []
for call in (lambda: typed(n="x"), lambda: forbidden(), lambda: tools.nope()):
    try:
        await call()
    except AttributeError:
        kinds.append("attribute")
    except ToolError as error:
        kinds.append(error.kind)
try:
    tools.call("nope", {})
except ToolError as error:
    kinds.append(error.kind)
    kinds.append("nope" in str(error))
kinds
"#;
    let result = completed(python_with(code, tools).await);
    assert_eq!(
        result.result,
        json!(["invalid_input", "denied", "attribute", "unknown_tool", true])
    );
}

#[tokio::test]
async fn tools_call_says_what_is_wrong_with_its_arguments_and_results() {
    let tools = tools(json!([
        static_tool("echo", json!({"ok": [1, 2.5, "x", null]})),
        {"name": "typed", "input_schema": {"type": "object", "required": ["n"]},
         "handler": {"kind": "static", "result": 1}}
    ]));
    let code = r#"
seen = [tools.call("echo", {"a": 1}), tools.call("echo", a=1), tools.call("echo")]
def outcome(thunk):
    try:
        return ["value", thunk()]
    except ToolError as error:
        return [error.kind, error.tool, str(error)]
    except TypeError as error:
        return ["TypeError", str(error)]
seen.append(outcome(lambda: tools.call("echo", {"when": object()})))
seen.append(outcome(lambda: tools.call("echo", {"n": float("nan")})))
seen.append(outcome(lambda: tools.call("echo", [1, 2])))
seen.append(outcome(lambda: tools.call("echo", {"a": 1}, b=2)))
seen.append(outcome(lambda: tools.call(7, {})))
seen.append(outcome(lambda: tools.call("typed", {})))
seen.append(outcome(lambda: tools.call("missing", {})))
seen
"#;
    let result = completed(python_with(code, tools).await);
    let seen = result.result.as_array().expect("a list").clone();
    let ok = json!({"ok": [1, 2.5, "x", null]});
    assert_eq!(seen[..3], [ok.clone(), ok.clone(), ok]);
    for (index, (kind, needle)) in [
        ("invalid_input", "echo: arguments are not JSON: "),
        ("invalid_input", "echo: arguments are not JSON: "),
        (
            "TypeError",
            "echo() takes keyword arguments or a single dict",
        ),
        ("TypeError", "not both"),
        ("TypeError", "tool name as a string"),
        ("invalid_input", "typed: "),
        ("unknown_tool", "missing: unknown tool"),
    ]
    .into_iter()
    .enumerate()
    {
        let got = &seen[3 + index];
        assert_eq!(got[0], kind, "{got}");
        let text = got
            .as_array()
            .and_then(|parts| parts.last())
            .and_then(|t| t.as_str());
        assert!(
            text.is_some_and(|t| t.starts_with(needle) || t.contains(needle)),
            "{got}"
        );
        if kind != "TypeError" {
            assert_eq!(
                got[1],
                got[2].as_str().unwrap().split(':').next().unwrap(),
                "{got}"
            );
        }
    }
    // Calls refused before they ran are recorded; arguments that never became JSON are not.
    let names: Vec<&str> = result
        .tool_calls
        .iter()
        .map(|call| call.name.as_str())
        .collect();
    assert_eq!(names, ["echo", "echo", "echo", "typed", "missing"]);
}

#[tokio::test]
async fn asyncio_run_gather_and_sleep_work() {
    let tools = tools(json!([static_tool("echo", json!("pong"))]));
    let code = r#"
import asyncio
async def main():
    await asyncio.sleep(0.01)
    results = await asyncio.gather(*[echo(i=i) for i in range(3)])
    return results
asyncio.run(main())
"#;
    let result = completed(python_with(code, tools).await);
    assert_eq!(result.result, json!(["pong", "pong", "pong"]));
}

#[tokio::test]
async fn a_deadlocked_event_loop_is_reported_not_hung() {
    let result = python("import asyncio\nawait asyncio.get_running_loop().create_future()").await;
    let message = raised(&result, "RuntimeError");
    assert!(message.contains("deadlock"), "{message}");
}

#[tokio::test]
async fn non_utf8_output_is_replaced_not_fatal() {
    let result = completed(
        python("import sys\nsys.stdout.buffer.write(b'a\\xff\\xfeb')\nprint('\\ud800')").await,
    );
    assert!(
        result.stdout.starts_with("a\u{fffd}\u{fffd}b"),
        "{:?}",
        result.stdout
    );
}

#[tokio::test]
async fn many_executions_at_once_all_complete_with_their_own_output() {
    let mut handles = Vec::new();
    for i in 0..24 {
        handles.push(tokio::spawn(async move {
            (i, python(&format!("print({i})\n{i} * 2")).await)
        }));
    }
    for handle in handles {
        let (i, result) = handle.await.unwrap();
        let result = completed(result);
        assert_eq!(result.stdout, format!("{i}\n"));
        assert_eq!(result.result, json!(i * 2));
    }
}

#[tokio::test]
async fn queues_async_generators_wait_for_and_task_groups_work() {
    let tools = tools(json!([static_tool("weather", json!({"temp_c": 21}))]));
    let code = r#"
import asyncio
async def gen():
    for i in range(3):
        await asyncio.sleep(0)
        yield i
q = asyncio.Queue()
async def producer():
    for c in ["Paris", "Oslo"]:
        await q.put(c)
    await q.put(None)
async def consumer():
    out = []
    while (c := await q.get()) is not None:
        out.append((await weather(city=c))["temp_c"])
    return out
got = await asyncio.gather(producer(), consumer())
agen = [x async for x in gen()]
try:
    await asyncio.wait_for(asyncio.sleep(5), timeout=0.05)
    timed_out = False
except asyncio.TimeoutError:
    timed_out = True
async with asyncio.TaskGroup() as tg:
    a = tg.create_task(weather(city="A"))
    b = tg.create_task(weather(city="B"))
[got[1], agen, timed_out, a.result()["temp_c"] + b.result()["temp_c"]]
"#;
    let result = completed(python_with(code, tools).await);
    assert_eq!(result.result, json!([[21, 21], [0, 1, 2], true, 42]));
}

#[tokio::test]
async fn zoneinfo_has_the_time_zone_database() {
    let result = completed(
        python(
            r#"
from datetime import datetime, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones
summer = datetime(2026, 7, 1, 12, 0, tzinfo=timezone.utc)
try:
    ZoneInfo("Mars/Olympus_Mons")
    missing = "found"
except ZoneInfoNotFoundError:
    missing = "ZoneInfoNotFoundError"
[
    str(ZoneInfo("UTC")),
    summer.astimezone(ZoneInfo("Europe/Paris")).isoformat(),
    summer.astimezone(ZoneInfo("America/New_York")).utcoffset().total_seconds() / 3600,
    datetime(2026, 1, 15, tzinfo=ZoneInfo("Australia/Sydney")).tzname(),
    "Asia/Tokyo" in available_timezones(),
    missing,
]
"#,
        )
        .await,
    );
    assert_eq!(
        result.result,
        json!([
            "UTC",
            "2026-07-01T14:00:00+02:00",
            -4.0,
            "AEDT",
            true,
            "ZoneInfoNotFoundError"
        ])
    );
}
