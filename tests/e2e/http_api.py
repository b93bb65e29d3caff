"""End-to-end checks of `cordon serve` with a real HTTP client (httpx).

Usage: python3 http_api.py SCENARIO BASE_URL [ARGS...]
Each scenario asserts what the HTTP API promises and exits non-zero on the first failure.
Everything is bounded: every request and stream has a timeout.
"""

import base64
import contextlib
import json
import sys
import time

import httpx

from pages import BUY, DISPLAY, GO, NAME_FIELD, PASSWORD_FIELD, serve_page
from serve_http import check_error  # also imported from here by connect_alias.py

TIMEOUT = httpx.Timeout(30.0)


def client(base, token=None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=base, timeout=TIMEOUT, headers=headers)


@contextlib.contextmanager
def streamed_execution(http, sandbox, code):
    """Creates an execution whose response is its event stream: yields (id, events)."""
    with http.stream(
        "POST", f"/v1/sandboxes/{sandbox}/executions",
        json={"code": code}, headers={"Accept": "text/event-stream"},
    ) as response:
        assert response.status_code == 200, response.read()
        yield response.headers["cordon-execution-id"], sse_events(response)


def sse_events(response):
    """Yields (seq, type, data) from an SSE response, in order."""
    event, seq, data = None, None, []
    for line in response.iter_lines():
        if line == "":
            if event is not None:
                yield int(seq), event, json.loads("\n".join(data))
            event, seq, data = None, None, []
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                event = value
            elif field == "id":
                seq = value
            elif field == "data":
                data.append(value)


def create_sandbox(http, language="python", tools=(), stateful=False, limits=None):
    body = {"language": language, "tools": list(tools), "stateful": stateful}
    if limits:
        body["limits"] = limits
    response = http.post("/v1/sandboxes", json=body)
    assert response.status_code == 201, response.text
    created = response.json()
    assert created["id"].startswith("sbx_") and created["expires_at"].endswith("Z"), created
    return created["id"]


def start(http, sandbox, code):
    response = http.post(f"/v1/sandboxes/{sandbox}/executions", json={"code": code})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def read_all(http, execution, after=None):
    headers = {"Last-Event-ID": str(after)} if after is not None else {}
    with http.stream("GET", f"/v1/executions/{execution}/events", headers=headers) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        return list(sse_events(response))


def run_to_end(http, sandbox, code):
    execution = start(http, sandbox, code)
    events = read_all(http, execution)
    assert events[-1][1] == "execution.completed", events
    return execution, events


def scenario_basics(base):
    http = client(base)
    for language, code, stdout in [
        ("python", "print(1)\n6 * 7", "1\n"),
        ("javascript", "console.log(1); 6 * 7", "1\n"),
        ("js", "console.log(1); 6 * 7", "1\n"),
    ]:
        sandbox = create_sandbox(http, language)
        execution, events = run_to_end(http, sandbox, code)
        seqs = [seq for seq, _, _ in events]
        assert seqs == list(range(1, len(events) + 1)), seqs
        types = [kind for _, kind, _ in events]
        assert types[0] == "execution.started", types
        assert "output.delta" in types, types
        result = events[-1][2]
        assert result["status"] == "completed" and result["stdout"] == stdout, result
        assert result["result"] == 42, result
        info = http.get(f"/v1/executions/{execution}").json()
        assert info["status"] == "completed", info
        assert info["result"] == {k: v for k, v in result.items() if k != "type"}, info
        assert [e["seq"] for e in info["events"]] == seqs, info
        assert info["pending_tool_calls"] == [] and info["pending_approvals"] == [], info
        assert http.get(f"/v1/sandboxes/{sandbox}").json()["language"] in ("python", "javascript")
    # Errors and limits are results, not HTTP errors.
    sandbox = create_sandbox(http, "python", limits={"cpu_ms": 200})
    _, events = run_to_end(http, sandbox, "raise ValueError('bad')")
    assert events[-1][2]["status"] == "error" and events[-1][2]["error"]["type"] == "ValueError"
    _, events = run_to_end(http, sandbox, "while True: pass")
    assert events[-1][2]["status"] == "limit_exceeded" and events[-1][2]["limit"] == "cpu"
    # Stateful sandboxes keep variables, in both languages.
    for language, first, second in [("python", "x = 41", "x + 1"), ("javascript", "var x = 41", "x + 1")]:
        sandbox = create_sandbox(http, language, stateful=True)
        run_to_end(http, sandbox, first)
        _, events = run_to_end(http, sandbox, second)
        assert events[-1][2]["result"] == 42, events[-1]
    # Streaming response to the create request itself.
    sandbox = create_sandbox(http, "javascript")
    with streamed_execution(http, sandbox, "console.log('streamed')") as (execution, stream):
        events = list(stream)
    assert events[-1][2]["stdout"] == "streamed\n", events
    assert http.get(f"/v1/executions/{execution}").json()["status"] == "completed"
    # OpenAPI is generated and names the resources.
    doc = http.get("/openapi.json").json()
    assert "/v1/executions/{id}/events" in doc["paths"], list(doc["paths"])
    assert "ExecutionEvent" in doc["components"]["schemas"]
    # Delete: sandboxes go away, executions are cancelled and removed.
    assert http.delete(f"/v1/sandboxes/{sandbox}").status_code == 204
    check_error(http.get(f"/v1/sandboxes/{sandbox}"), 404, "not_found")
    check_error(http.post(f"/v1/sandboxes/{sandbox}/executions", json={"code": "1"}), 404, "not_found")
    assert http.delete(f"/v1/executions/{execution}").status_code == 204
    check_error(http.get(f"/v1/executions/{execution}"), 404, "not_found")
    # Cancel a running execution.
    sandbox = create_sandbox(http, "python")
    execution = start(http, sandbox, "while True: pass")
    assert http.post(f"/v1/executions/{execution}/cancel").status_code == 202
    events = read_all(http, execution)
    assert events[-1][2]["status"] == "cancelled", events[-1]


def scenario_errors(base):
    http = client(base)
    post = lambda path, content, ctype="application/json": http.post(
        path, content=content, headers={"Content-Type": ctype}
    )
    check_error(post("/v1/sandboxes", b'{"language": "python",'), 400, "invalid_json")
    check_error(post("/v1/sandboxes", b'{"language": "python"}', "text/plain"), 415, "unsupported_media_type")
    check_error(http.post("/v1/sandboxes", content=b'{"language": "python"}'), 415, "unsupported_media_type")
    check_error(post("/v1/sandboxes", b"x" * (9 << 20)), 413, "payload_too_large")
    body = check_error(http.post("/v1/sandboxes", json={"language": "ruby"}), 422, "invalid_request")
    assert "language" in body["message"], body
    check_error(http.post("/v1/sandboxes", json={"langauge": "python"}), 422, "invalid_request")
    check_error(http.post("/v1/sandboxes", json={"language": "python", "limits": {"cpu": 1}}), 422, "invalid_request")
    check_error(http.post("/v1/sandboxes", json={"language": "python", "ttl_seconds": 0}), 422, "invalid_request")
    bad_tools = {"language": "python", "tools": [{"name": "1bad", "handler": {"kind": "static", "result": 1}}]}
    check_error(http.post("/v1/sandboxes", json=bad_tools), 422, "invalid_tools")
    check_error(http.post("/v1/sandboxes/sbx_nope/executions", json={"code": "1"}), 404, "not_found")
    sandbox = create_sandbox(http)
    check_error(http.post(f"/v1/sandboxes/{sandbox}/executions", json={}), 422, "invalid_request")
    check_error(http.post(f"/v1/sandboxes/{sandbox}/executions", json={"code": 5}), 422, "invalid_request")
    check_error(http.get("/v1/executions/exec_nope"), 404, "not_found")
    check_error(http.get("/v1/executions/exec_nope/events"), 404, "not_found")
    results = {"results": [{"call_id": "call_x", "output": 1}]}
    check_error(http.post("/v1/executions/exec_nope/tool_results", json=results), 404, "not_found")
    check_error(http.post("/v1/approvals/appr_nope", json={"decision": "approve"}), 404, "not_found")
    check_error(http.post("/v1/approvals/appr_nope", json={"decision": "maybe"}), 422, "invalid_request")
    check_error(http.get("/v1/nothing"), 404, "route_not_found")
    # Refused with its body unread: the answer says the connection closes, so the next
    # request goes on a new one instead of one the server is closing.
    refused = http.put("/v1/sandboxes", json={})
    check_error(refused, 405, "method_not_allowed")
    assert refused.headers.get("connection") == "close", refused.headers
    assert http.get("/v1/health").status_code == 200
    execution, _ = run_to_end(http, sandbox, "1")
    check_error(
        http.get(f"/v1/executions/{execution}/events", headers={"Last-Event-ID": "abc"}),
        400, "invalid_last_event_id",
    )
    check_error(http.get(f"/v1/executions/{execution}?after=-1"), 400, "invalid_query")
    check_error(http.post(f"/v1/executions/{execution}/tool_results", json=results), 409, "execution_finished")
    check_error(http.post(f"/v1/executions/{execution}/cancel"), 409, "execution_finished")
    check_error(http.post(f"/v1/executions/{execution}/tool_results", json={"results": []}), 422, "invalid_request")


CLIENT_TOOLS = [
    {"name": "lookup", "input_schema": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
     "handler": {"kind": "client"}},
]

SUSPENDING_CODE = """
import asyncio
print("before")
a, b = await asyncio.gather(lookup(key="a"), lookup(key="b"))
print("after", a, b)
a["v"] + b["v"]
"""


def wait_for(events_iter, kind):
    seen = []
    for event in events_iter:
        seen.append(event)
        if event[1] == kind:
            return seen
    raise AssertionError(f"stream ended before {kind}: {seen}")


def scenario_client_tool(base):
    http = client(base)
    for language, code in [
        ("python", SUSPENDING_CODE),
        ("javascript", 'console.log("before");\nconst [a, b] = await Promise.all([lookup({key: "a"}), lookup({key: "b"})]);\nconsole.log("after", a.v, b.v);\na.v + b.v'),
    ]:
        sandbox = create_sandbox(http, language, tools=CLIENT_TOOLS)
        with streamed_execution(http, sandbox, code) as (execution, stream):
            seen = wait_for(stream, "execution.awaiting")
            calls = [data for _, kind, data in seen if kind == "tool.call"]
            assert [c["locus"] for c in calls] == ["client", "client"], calls
            assert all(c["caller"]["execution_id"] == execution for c in calls), calls
            pending = seen[-1][2]["pending"]
            assert pending == [c["id"] for c in calls], (pending, calls)
            info = http.get(f"/v1/executions/{execution}").json()
            assert info["status"] == "running", info
            assert [p["id"] for p in info["pending_tool_calls"]] == pending, info
            by_key = {c["input"]["key"]: c["id"] for c in calls}
            url = f"/v1/executions/{execution}/tool_results"
            # Unknown and repeated ids reject the whole request.
            check_error(http.post(url, json={"results": [{"call_id": "call_nope", "output": 1}]}), 404, "unknown_call")
            twice = [{"call_id": by_key["a"], "output": {"v": 1}}] * 2
            check_error(http.post(url, json={"results": twice}), 422, "duplicate_call")
            # Results in two requests; the execution resumes after the second.
            accepted = http.post(url, json={"results": [{"call_id": by_key["a"], "output": {"v": 40}}]})
            assert accepted.status_code == 200, accepted.text
            assert accepted.json()["pending"] == [by_key["b"]], accepted.json()
            check_error(http.post(url, json={"results": [{"call_id": by_key["a"], "output": 1}]}), 409, "already_answered")
            accepted = http.post(url, json={"results": [{"call_id": by_key["b"], "output": {"v": 2}, "is_error": False}]})
            assert accepted.status_code == 200, accepted.text
            rest = list(stream)
        result = rest[-1][2]
        assert result["status"] == "completed", result
        assert result["result"] == 42, result
        assert result["stdout"].startswith("before\nafter"), result
        assert [c["locus"] for c in result["tool_calls"]] == ["client", "client"], result


def scenario_resume(base):
    """Disconnects mid-execution and reconnects with Last-Event-ID: no loss, no duplicates."""
    http = client(base)
    sandbox = create_sandbox(http, "python", tools=CLIENT_TOOLS)
    code = "for i in range(5):\n    print('line', i)\nr = await lookup(key='k')\nfor i in range(5):\n    print('more', i)\nr"
    execution = start(http, sandbox, code)
    first = []
    with http.stream("GET", f"/v1/executions/{execution}/events") as response:
        for event in sse_events(response):
            first.append(event)
            if event[1] == "tool.call":
                break  # hang up mid-execution
    call_id = first[-1][2]["id"]
    last = first[-1][0]
    # Results posted while nobody listens are not lost.
    response = http.post(f"/v1/executions/{execution}/tool_results", json={"results": [{"call_id": call_id, "output": "v"}]})
    assert response.status_code == 200, response.text
    rest = read_all(http, execution, after=last)
    seqs = [seq for seq, _, _ in first + rest]
    assert seqs == list(range(1, len(seqs) + 1)), seqs
    assert rest[-1][2]["status"] == "completed" and rest[-1][2]["result"] == "v", rest[-1]
    info = http.get(f"/v1/executions/{execution}").json()
    assert [(e["seq"], e["type"]) for e in info["events"]] == [(s, k) for s, k, _ in first + rest]
    # Resuming from the middle again gives exactly the tail, and `?after=` works too.
    middle = seqs[len(seqs) // 2]
    assert [s for s, _, _ in read_all(http, execution, after=middle)] == seqs[middle:]
    with http.stream("GET", f"/v1/executions/{execution}/events?after={middle}") as response:
        assert [s for s, _, _ in sse_events(response)] == seqs[middle:]
    assert read_all(http, execution, after=seqs[-1]) == []


def scenario_approval(base):
    http = client(base)
    tools = [{"name": "transfer", "policy": "ask", "handler": {"kind": "static", "result": {"ok": True}}}]
    for language, code in [
        ("python", "import tools\ntry:\n    r = await transfer(amount=5)\nexcept tools.ToolError as e:\n    r = 'refused: ' + e.kind\nr"),
        ("javascript", "let r;\ntry { r = await transfer({amount: 5}); } catch (e) { r = 'refused: ' + e.kind; }\nr"),
    ]:
        for decision, expected in [("approve", {"ok": True}), ("deny", "refused: denied")]:
            sandbox = create_sandbox(http, language, tools=tools)
            with streamed_execution(http, sandbox, code) as (execution, stream):
                seen = wait_for(stream, "approval.required")
                approval = seen[-1][2]
                assert approval["tool"] == "transfer" and approval["input"] == {"amount": 5}, approval
                info = http.get(f"/v1/executions/{execution}").json()
                assert [a["approval_id"] for a in info["pending_approvals"]] == [approval["approval_id"]], info
                url = f"/v1/approvals/{approval['approval_id']}"
                decided = http.post(url, json={"decision": decision})
                assert decided.status_code == 200, decided.text
                assert decided.json()["execution_id"] == execution, decided.json()
                check_error(http.post(url, json={"decision": decision}), 409, "approval_decided")
                rest = list(stream)
            result = rest[-1][2]
            assert result["status"] == "completed", result
            assert result["result"] == expected, (decision, result)


def scenario_auth(base, token):
    anonymous = client(base)
    body = check_error(anonymous.post("/v1/sandboxes", json={"language": "python"}), 401, "unauthorized")
    assert "Bearer" in body["message"], body
    check_error(client(base, "wrong").get("/openapi.json"), 401, "unauthorized")
    http = client(base, token)
    sandbox = create_sandbox(http)
    _, events = run_to_end(http, sandbox, "1 + 1")
    assert events[-1][2]["result"] == 2


def scenario_before_kill(base, state_file):
    """Leaves one finished and one suspended execution, then records their ids."""
    http = client(base)
    sandbox = create_sandbox(http, "python", tools=CLIENT_TOOLS, stateful=True)
    done, _ = run_to_end(http, sandbox, "print('kept')\n'done'")
    execution = start(http, sandbox, "print('started')\nawait lookup(key='never')")
    with http.stream("GET", f"/v1/executions/{execution}/events") as response:
        wait_for(sse_events(response), "execution.awaiting")
    # A computer session that is open, with a step waiting for approval.
    with serve_page() as page:
        computer = open_computer(http, page)
        assert act(http, computer, [click(GO)])["status"] == "ok"
        approval = act(http, computer, [click(BUY)])["pending_approval"]["approval_id"]
    with open(state_file, "w") as out:
        json.dump({"sandbox": sandbox, "done": done, "suspended": execution,
                   "computer": computer, "page": page, "approval": approval}, out)


def scenario_after_restart(base, state_file):
    with open(state_file) as source:
        state = json.load(source)
    http = client(base)
    done = http.get(f"/v1/executions/{state['done']}").json()
    assert done["status"] == "completed" and done["result"]["result"] == "done", done
    assert done["result"]["stdout"] == "kept\n", done
    info = http.get(f"/v1/executions/{state['suspended']}").json()
    assert info["status"] == "interrupted", info
    assert info["pending_tool_calls"] == [], info
    result = info["result"]
    assert result["status"] == "interrupted" and result["stdout"] == "started\n", result
    assert "server running this execution stopped" in result["error"]["message"], result
    types = [e["type"] for e in info["events"]]
    assert types[0] == "execution.started" and types[-1] == "execution.completed", types
    assert "execution.awaiting" in types, types
    # The stream replays the whole log and ends.
    events = read_all(http, state["suspended"])
    assert [s for s, _, _ in events] == [e["seq"] for e in info["events"]]
    url = f"/v1/executions/{state['suspended']}/tool_results"
    check_error(http.post(url, json={"results": [{"call_id": "call_x", "output": 1}]}), 409, "execution_finished")
    sandbox = http.get(f"/v1/sandboxes/{state['sandbox']}").json()
    # Live (busy, so never paused) when the server died: interrupted, saying why.
    assert sandbox["state"] == "interrupted" and "before pausing it" in sandbox["reason"], sandbox
    check_error(http.post(f"/v1/sandboxes/{state['sandbox']}/executions", json={"code": "1"}), 410, "sandbox_interrupted")
    # The computer session reports that it is over, and why; its history is intact.
    computer = state["computer"]
    info = http.get(f"/v1/computers/{computer}").json()
    assert info["state"] == "interrupted" and "server stopped" in info["reason"], info
    assert info["steps"] == 3 and info["pending_approval"] is None, info
    assert info["current_url"] == state["page"] + "#clicked", info
    body = check_error(http.post(f"/v1/computers/{computer}/actions", json={"actions": [click(GO)]}), 410, "computer_interrupted")
    assert "server stopped" in body["message"], body
    check_error(http.post(f"/v1/approvals/{state['approval']}", json={"decision": "approve"}), 409, "approval_expired")
    steps = http.get(f"/v1/computers/{computer}/trajectory").json()["steps"]
    assert [s["status"] for s in steps] == ["ok", "ok", "approval_required"], steps
    image = http.get(steps[1]["screenshot"]["url"])
    assert image.status_code == 200 and image.content.startswith(PNG_MAGIC)
    # The restarted server works.
    fresh = create_sandbox(http)
    _, events = run_to_end(http, fresh, "1")
    assert events[-1][2]["status"] == "completed"


def scenario_connected(base):
    """`cordon serve --connect calc=…`: every sandbox can call the server's tools."""
    http = client(base)
    for language, code in [
        ("python", "r = await calc.add(a=40, b=2)\nr['result']"),
        ("javascript", "(await calc.add({a: 40, b: 2})).result"),
    ]:
        sandbox = create_sandbox(http, language)
        _, events = run_to_end(http, sandbox, code)
        result = events[-1][2]
        assert result["status"] == "completed" and result["result"] == 42, result
        calls = [data for _, kind, data in events if kind == "tool.call"]
        assert calls[0]["name"] == "calc.add" and calls[0]["locus"] == "host", calls
    # A declared tool may not take a connected tool's name.
    clash = {"language": "python", "tools": [{"name": "calc.add", "handler": {"kind": "static", "result": 1}}]}
    check_error(http.post("/v1/sandboxes", json=clash), 422, "invalid_tools")


# --- computer use ---------------------------------------------------------------------

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def open_computer(http, url, **extra):
    response = http.post("/v1/computers", json={"url": url, "display": DISPLAY, **extra})
    assert response.status_code == 201, response.text
    created = response.json()
    assert created["id"].startswith("cmp_"), created
    assert response.headers["location"] == f"/v1/computers/{created['id']}"
    assert created["display"] == {"width": 1024, "height": 640}, created
    assert created["viewport"] == {"width": 1280, "height": 800}, created
    shot = created["screenshot"]
    assert (shot["media_type"], shot["width"], shot["height"]) == ("image/png", 1024, 640), shot
    assert base64.b64decode(shot["data"]).startswith(PNG_MAGIC)
    assert created["current_url"] == url, created
    return created["id"]


def act(http, computer, actions, status=200, **extra):
    response = http.post(f"/v1/computers/{computer}/actions", json={"actions": actions, **extra})
    assert response.status_code == status, response.text
    return response.json()


def click(x_y):
    return {"action": "left_click", "coordinate": x_y}


def scenario_computers(base):
    http = client(base)
    with serve_page() as page:
        # Bad set-ups are 4xx with a type, before any browser starts.
        check_error(http.post("/v1/computers", json={}), 422, "invalid_request")
        check_error(http.post("/v1/computers", json={"url": page, "dpr": 3}), 422, "invalid_request")
        check_error(http.post("/v1/computers", json={"url": page, "display": "huge"}), 422, "invalid_request")
        check_error(http.post("/v1/computers", json={"url": page, "colour": "red"}), 422, "invalid_request")
        blocked = {"url": page, "allow_origins": ["https://example.com"]}
        check_error(http.post("/v1/computers", json=blocked), 422, "url_blocked")
        check_error(http.post("/v1/computers/cmp_nope/actions", json={"actions": [click(GO)]}), 404, "not_found")
        check_error(http.get("/v1/computers/cmp_nope"), 404, "not_found")
        check_error(http.get("/v1/computers/cmp_nope/trajectory"), 404, "not_found")
        check_error(http.delete("/v1/computers/cmp_nope"), 404, "not_found")

        idle = open_computer(http, page, ttl_seconds=1)  # checked at the end
        computer = open_computer(http, page)
        info = http.get(f"/v1/computers/{computer}").json()
        assert info["state"] == "live" and info["steps"] == 1 and info["pending_approval"] is None, info

        # A click at a known model-display position hits the button (coordinates scale
        # from 1024x640 to the 1280x800 viewport); the vendor's call id comes back.
        step = act(http, computer, [click(GO)], call_id="toolu_01")
        assert step["status"] == "ok" and step["call_id"] == "toolu_01", step
        assert step["current_url"] == page + "#clicked", step
        assert step["screenshot"]["width"] == 1024 and step["error"] is None, step
        assert base64.b64decode(step["screenshot"]["data"]).startswith(PNG_MAGIC)

        # A page shown scaled down may be drawn at the display's scale and read it as its
        # devicePixelRatio; `exact_dpr` keeps it at `dpr` exactly.
        for extra in [{}, {"exact_dpr": True}]:
            body = {"url": page.replace("/page", "/dpr"), "display": DISPLAY, **extra}
            response = http.post("/v1/computers", json=body)
            assert response.status_code == 201, response.text
            opened = response.json()
            ratio = opened["current_url"].rpartition("#dpr=")[2]
            if extra:
                assert ratio == "1", opened["current_url"]
            else:
                assert 0.79 < float(ratio) <= 1, opened["current_url"]
            for _ in range(2):  # closed, then gone with its history
                assert http.delete(f"/v1/computers/{opened['id']}").status_code == 204
        check_error(http.post("/v1/computers", json={"url": page, "exact_dpr": "yes"}), 422, "invalid_request")

        # Model mistakes are steps with status `error`, never HTTP errors.
        step = act(http, computer, [{"action": "fly"}], call_id="toolu_02")
        assert step["status"] == "error" and step["step"] is None, step
        assert "unknown action `fly`" in step["error"] and step["call_id"] == "toolu_02", step
        step = act(http, computer, [click([2000, 10])])
        assert step["status"] == "error" and "outside the screen" in step["error"], step
        assert step["screenshot"] is None, step
        check_error(http.post(f"/v1/computers/{computer}/actions", json={"actions": []}), 422, "invalid_request")
        check_error(http.post(f"/v1/computers/{computer}/actions", json={"format": "cobol", "actions": [click(GO)]}), 422, "invalid_request")

        # OpenAI's batched form: every action runs, then one screenshot.
        step = act(
            http, computer,
            [{"type": "move", "x": 10, "y": 10}, {"type": "click", "x": GO[0], "y": GO[1], "button": "left"}],
            format="openai", call_id="call_batch",
        )
        assert step["status"] == "ok" and step["call_id"] == "call_batch", step
        # Gemini's 0-999 grid reaches the same button.
        step = act(http, computer, [{"name": "click_at", "args": {"x": 156, "y": 187}}], format="gemini")
        assert step["status"] == "ok", step

        # An `ask` rule (the default rules ask before "Buy now"): the step waits, the
        # client decides with POST /v1/approvals/{id}, the answer carries the step.
        step = act(http, computer, [click(BUY)], call_id="toolu_buy")
        assert step["status"] == "approval_required", step
        approval = step["pending_approval"]
        assert approval["rule"] == "high-impact-button" and approval["action"] == "click", approval
        assert "Buy now" in approval["element"], approval
        assert http.get(f"/v1/computers/{computer}").json()["pending_approval"] == approval
        pending = check_error(
            http.post(f"/v1/computers/{computer}/actions", json={"actions": [click(GO)]}),
            409, "approval_pending",
        )
        assert approval["approval_id"] in pending["message"], pending
        decided = http.post(f"/v1/approvals/{approval['approval_id']}", json={"decision": "approve"})
        assert decided.status_code == 200, decided.text
        decided = decided.json()
        assert decided["computer_id"] == computer and "execution_id" not in decided, decided
        assert decided["step"]["status"] == "ok", decided
        assert decided["step"]["resolves"] == approval["approval_id"], decided
        assert decided["step"]["call_id"] == "toolu_buy", decided
        assert decided["step"]["current_url"] == page + "#bought", decided
        check_error(http.post(f"/v1/approvals/{approval['approval_id']}", json={"decision": "deny"}), 409, "approval_decided")
        # Denied: nothing runs, the model gets the refusal.
        act(http, computer, [click(GO)])
        step = act(http, computer, [click(BUY)])
        denied = http.post(f"/v1/approvals/{step['pending_approval']['approval_id']}", json={"decision": "deny"}).json()
        assert denied["step"]["status"] == "denied" and "declined" in denied["step"]["error"], denied
        assert http.get(f"/v1/computers/{computer}").json()["current_url"] == page + "#clicked"

        # The trajectory: every step the server ran, with screenshots to fetch.
        trajectory = http.get(f"/v1/computers/{computer}/trajectory").json()
        steps = trajectory["steps"]
        assert [s["step"] for s in steps] == list(range(1, len(steps) + 1)), steps
        statuses = [s["status"] for s in steps]
        assert statuses[:3] == ["ok", "ok", "error"], statuses
        assert statuses.count("approval_required") == 2 and statuses[-1] == "denied", statuses
        assert steps[1]["call"]["actions"][0]["kind"] == "click", steps[1]
        assert steps[1]["screen_ops"], steps[1]
        shot = steps[1]["screenshot"]
        image = http.get(shot["url"])
        assert image.status_code == 200 and image.headers["content-type"] == "image/png", image
        assert image.content.startswith(PNG_MAGIC)
        assert [s["step"] for s in http.get(f"/v1/computers/{computer}/trajectory?after=3").json()["steps"]] == [s["step"] for s in steps[3:]]
        check_error(http.get(f"/v1/computers/{computer}/trajectory?after=x"), 400, "invalid_query")
        check_error(http.get(f"/v1/computers/{computer}/trajectory/3/screenshot"), 404, "not_found")
        check_error(http.get(f"/v1/computers/{computer}/trajectory/x/screenshot"), 400, "invalid_path")

        # DELETE closes the session; its history stays until a second DELETE.
        assert http.delete(f"/v1/computers/{computer}").status_code == 204
        info = http.get(f"/v1/computers/{computer}").json()
        assert info["state"] == "closed" and info["reason"], info
        check_error(http.post(f"/v1/computers/{computer}/actions", json={"actions": [click(GO)]}), 410, "computer_closed")
        assert len(http.get(f"/v1/computers/{computer}/trajectory").json()["steps"]) == len(steps)
        assert http.delete(f"/v1/computers/{computer}").status_code == 204
        check_error(http.get(f"/v1/computers/{computer}"), 404, "not_found")
        check_error(http.get(shot["url"]), 404, "not_found")

        # Rules come with the session: `[]` allows everything.
        free = open_computer(http, page, rules=[])
        assert act(http, free, [click(BUY)])["status"] == "ok"
        assert http.delete(f"/v1/computers/{free}").status_code == 204

        # A session idle beyond its ttl is closed by the server, and says so.
        deadline = time.monotonic() + 20
        while http.get(f"/v1/computers/{idle}").json()["state"] == "live" and time.monotonic() < deadline:
            time.sleep(0.5)
        info = http.get(f"/v1/computers/{idle}").json()
        assert info["state"] == "expired" and "ttl" in info["reason"], info
        check_error(http.post(f"/v1/computers/{idle}/actions", json={"actions": [click(GO)]}), 410, "computer_expired")
    doc = http.get("/openapi.json").json()
    for path in ["/v1/computers", "/v1/computers/{id}/actions", "/v1/computers/{id}/trajectory"]:
        assert path in doc["paths"], list(doc["paths"])


def scenario_secrets(base, secret, name):
    """Text typed into a password field is `[redacted]` in the trajectory the API returns;
    a text field's text is kept. (The caller checks the files on disk.)"""
    http = client(base)
    with serve_page() as page:
        login = page.replace("/page", "/login")
        computer = open_computer(http, login, rules=[])
        assert act(http, computer, [click(NAME_FIELD)])["status"] == "ok"
        assert act(http, computer, [{"action": "type", "text": name}])["status"] == "ok"
        assert act(http, computer, [click(PASSWORD_FIELD)])["status"] == "ok"
        step = act(http, computer, [{"action": "type", "text": secret}], call_id="toolu_pw")
        assert step["status"] == "ok", step
        assert secret not in json.dumps(step), step
        trajectory = http.get(f"/v1/computers/{computer}/trajectory")
        assert trajectory.status_code == 200, trajectory.text
        assert secret not in trajectory.text, trajectory.text
        steps = trajectory.json()["steps"]
        typed = [s for s in steps if s["call"]["actions"][0]["kind"] == "type"]
        assert [s["call"]["actions"][0]["text"] for s in typed] == [name, "[redacted]"], typed
        assert [s.get("redacted_actions", []) for s in typed] == [[], [0]], typed
        assert all(secret not in json.dumps(op) for op in typed[1]["screen_ops"]), typed[1]
        # Left open: the caller reads the store and the trajectory directory while the
        # server still runs, then again after it stops.


def scenario_no_browser(base):
    """A server without Chromium serves sandboxes and says how to get computer use."""
    http = client(base)
    body = check_error(http.post("/v1/computers", json={"url": "http://127.0.0.1:9/"}), 503, "browser_unavailable")
    assert "apt-get install" in body["message"] and "--chromium" in body["message"], body
    sandbox = create_sandbox(http)
    _, events = run_to_end(http, sandbox, "1 + 1")
    assert events[-1][2]["result"] == 2


def scenario_retention(base):
    """`--retain 2s`: what ended goes (with its trajectory); what runs or is open stays."""
    http = client(base)
    sandbox = create_sandbox(http)
    finished, _ = run_to_end(http, sandbox, "1")
    with serve_page() as page:
        closed = open_computer(http, page)
        assert http.delete(f"/v1/computers/{closed}").status_code == 204
        live = open_computer(http, page)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            gone = [
                http.get(f"/v1/executions/{finished}").status_code,
                http.get(f"/v1/computers/{closed}").status_code,
            ]
            if gone == [404, 404]:
                break
            time.sleep(0.5)
        assert gone == [404, 404], gone
        assert http.get(f"/v1/computers/{live}").json()["state"] == "live"
        assert act(http, live, [click(GO)])["status"] == "ok"


SCENARIOS = {
    "connected": scenario_connected,
    "basics": scenario_basics,
    "errors": scenario_errors,
    "client_tool": scenario_client_tool,
    "resume": scenario_resume,
    "approval": scenario_approval,
    "auth": scenario_auth,
    "before_kill": scenario_before_kill,
    "after_restart": scenario_after_restart,
    "computers": scenario_computers,
    "no_browser": scenario_no_browser,
    "secrets": scenario_secrets,
    "retention": scenario_retention,
}

if __name__ == "__main__":
    SCENARIOS[sys.argv[1]](*sys.argv[2:])
    print(f"ok {sys.argv[1]}")
