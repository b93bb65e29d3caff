"""End-to-end checks of the session protocol (`PUT /session`, `POST /session/{id}`,
`GET /session/{id}`) with an SSE client (`httpx`), against `cordon serve --upstream` whose
upstream is the stand-in model server (`standin_model.py`).

Usage: python3 session_protocol.py SCENARIO --cordon PATH/TO/cordon [--upstream-api API]
(or CORDON_BIN=PATH). Servers are started and stopped as in `gateway_anthropic.py`.
"""

import contextlib
import json
import os
import tempfile
import time

import httpx

import gateway_anthropic as harness
from standin_model import reply, tool_use

TIMEOUT = 60.0
MODEL = "standin-session-1"
WEATHER = {"name": "get_weather", "description": "Current weather for a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                            "required": ["city"]}}
TIME = {"name": "get_time", "description": "Local time in a time zone",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string"}},
                       "required": ["tz"]}}


def read_stream(response):
    """The (event, data) pairs of an SSE response, read to its end."""
    assert response.status_code == 200, (response.status_code, response.read())
    assert response.headers["content-type"].startswith("text/event-stream"), response.headers
    events, name, data = [], None, []
    for line in response.iter_lines():
        if line == "":
            if name is not None or data:
                events.append((name, json.loads("\n".join(data)) if data else None))
            name, data = None, []
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())
    return events


def turn(http, method, path, body):
    """One turn: (session id header, events). The stream must end with turn_stop."""
    with http.stream(method, path, json=body) as response:
        events = read_stream(response)
        session = response.headers.get("x-session-id")
    assert events[0] == ("session", {"sessionId": session}), events
    assert events[-1][0] == "turn_stop", events
    return session, events


def streamed_text(events):
    """The text of a turn's `text_delta` events, joined."""
    return "".join(e["text"] for e in of(events, "text_delta"))


def parsed(text):
    try:
        return json.loads(text)
    except ValueError:
        return text


def of(events, name):
    return [data for event, data in events if event == name]


def expect_refusal(http, path, body, status, needle):
    response = http.post(path, json=body)
    assert response.status_code == status, (response.status_code, response.text)
    error = response.json()  # Cordon's error shape: {"type", "message"}
    assert error["type"] and needle in error["message"], error
    return error


@contextlib.contextmanager
def session_gateway(api, extra=(), db=None, standin=None):
    with tempfile.TemporaryDirectory() as directory:
        path = harness.tools_file(directory, [harness.ADD, harness.TRANSFER])
        with harness.gateway(api, extra=["--tools", path, *extra], standin=standin) as pair:
            yield pair


def scenario_parallel(api):
    """Two application-side tools, a trusted and a permission-required server tool in one
    turn, answered in one POST; a client restart resolved through GET; a server restart."""
    standin = harness.StandinModel().start()
    try:
        with tempfile.TemporaryDirectory() as keep:
            db = os.path.join(keep, "cordon.db")
            session = first_server(api, standin, db)
            second_server(api, standin, db, session)
    finally:
        standin.stop()


def first_server(api, standin, db):
    with tempfile.TemporaryDirectory() as directory:
        tools = harness.tools_file(directory, [harness.ADD, harness.TRANSFER])
        server = harness.Cordon(harness.ARGS.cordon, f"{api}={standin.url}" +
                                harness.UPSTREAM_PATH[api], ["--tools", tools], db=db)
        try:
            return parallel_turns(server, standin)
        finally:
            server.stop()


def parallel_turns(server, model):
    http = httpx.Client(base_url=server.url, timeout=TIMEOUT)
    model.push(reply("On it.",
                     tool_use("get_weather", {"city": "Paris"}, id="call_w"),
                     tool_use("get_time", {"tz": "Europe/Paris"}, id="call_t"),
                     tool_use("add", {"a": 2, "b": 3}, id="call_add"),
                     tool_use("transfer", {"amount": 10}, id="call_tr")))
    session, events = turn(http, "PUT", "/session", {
        "model": MODEL, "system": "You plan trips.", "tools": [WEATHER, TIME],
        "messages": [{"role": "user", "content": "Plan my trip"}]})
    assert session and session.startswith("sess_"), session
    # The model's text arrives as it streams, piece by piece.
    assert len(of(events, "text_delta")) > 1, events
    assert streamed_text(events) == "On it.", events
    calls = of(events, "tool_call")
    assert [(c["toolCallId"], c["kind"]) for c in calls] == [
        ("call_w", "application"), ("call_t", "application"), ("call_add", "server"),
        ("call_tr", "permission")], calls
    assert calls[0]["input"] == {"city": "Paris"} and calls[0]["name"] == "get_weather", calls
    results = of(events, "tool_result")
    assert [(r["toolCallId"], json.loads(r["content"]), r["isError"]) for r in results] == [
        ("call_add", {"sum": 5}, False)], results
    assert events[-1] == ("turn_stop", {"stopReason": "tool_use"}), events
    first = model.requests[-1]
    assert first.tool_names()[:2] == ["get_weather", "get_time"], first
    assert {"add", "transfer", "code_execution"} <= set(first.tool_names()), first
    assert "You plan trips." in first.all_text(), first

    # The client restarts: everything it needs is in GET /session/{id}.
    restarted = httpx.Client(base_url=server.url, timeout=TIMEOUT)
    state = restarted.get(f"/session/{session}").json()
    assert [(p["toolCallId"], p["kind"]) for p in state["pending"]] == [
        ("call_w", "application"), ("call_t", "application"), ("call_tr", "permission")], state
    assert state["messages"][0] == {"role": "user", "content": "Plan my trip"}, state
    assert [c.get("toolCallId") for c in state["messages"][1]["content"]] == [
        None, "call_w", "call_t", "call_add", "call_tr"], state
    # The trusted call's result, already produced, is there as the stream showed it.
    assert state["messages"][2:] == [{"role": "tool", **results[0]}], state
    assert state["running"] is False, state

    # Answers that leave a call open, name an unknown call, answer twice, or answer a
    # permission with a result: refused, nothing applied.
    path = f"/session/{session}"
    weather = {"role": "tool", "toolCallId": "call_w", "content": json.dumps({"temp_c": 21})}
    clock = {"role": "tool", "toolCallId": "call_t", "content": "14:05"}
    grant = {"role": "tool_permission", "toolCallId": "call_tr", "granted": True}
    expect_refusal(restarted, path, {"messages": [weather, clock]}, 400, "call_tr")
    expect_refusal(restarted, path, {"messages": [weather, clock, grant, {
        "role": "tool", "toolCallId": "call_nobody_made", "content": "x"}]}, 400,
        "call_nobody_made")
    expect_refusal(restarted, path, {"messages": [weather, weather, clock, grant]}, 409,
                   "more than once")
    expect_refusal(restarted, path, {"messages": [weather, clock, {
        "role": "tool", "toolCallId": "call_tr", "content": "yes"}]}, 400, "tool_permission")
    assert len(model.requests) == 1, "no refused request reached the model"
    assert restarted.get(path).json()["pending"] == state["pending"]

    # All four answered in one POST.
    model.push(reply("Booked: 21 C in Paris at 14:05, 5, TX-991."))
    again, events = turn(restarted, "POST", path, {"messages": [weather, clock, grant]})
    assert again == session, (again, session)
    results = of(events, "tool_result")
    assert [(r["toolCallId"], json.loads(r["content"])) for r in results] == [
        ("call_tr", {"ok": True, "ref": "TX-991"})], results
    assert streamed_text(events) == "Booked: 21 C in Paris at 14:05, 5, TX-991.", events
    assert events[-1] == ("turn_stop", {"stopReason": "end_turn"}), events
    seen = model.requests[-1].tool_results()
    assert {i: parsed(t) for i, t, _ in seen} == {
        "call_add": {"sum": 5}, "call_w": {"temp_c": 21}, "call_t": "14:05",
        "call_tr": {"ok": True, "ref": "TX-991"}}, seen

    # A denied permission: the model is told, with the reason.
    model.push(reply(tool_use("transfer", {"amount": 99}, id="call_tr2")),
               reply("Understood, no transfer."))
    _, events = turn(restarted, "POST", path, {"messages": [
        {"role": "user", "content": "Transfer 99 more"}]})
    assert events[-1] == ("turn_stop", {"stopReason": "tool_use"}), events
    _, events = turn(restarted, "POST", path, {"messages": [
        {"role": "tool_permission", "toolCallId": "call_tr2", "granted": False,
         "reason": "too much"}]})
    denied = of(events, "tool_result")
    assert denied == [{"toolCallId": "call_tr2", "content": "the user denied this call: too much",
                       "isError": True}], denied
    told = {i: t for i, t, _ in model.requests[-1].tool_results()}
    assert "the user denied this call: too much" in told["call_tr2"], told
    return session


def second_server(api, standin, db, session):
    """The same database under a new process: the session is still there."""
    server = harness.Cordon(harness.ARGS.cordon,
                            f"{api}={standin.url}" + harness.UPSTREAM_PATH[api], [], db=db)
    try:
        http = httpx.Client(base_url=server.url, timeout=TIMEOUT)
        state = http.get(f"/session/{session}").json()
        assert state["pending"] == [], state
        assert state["messages"][0]["content"] == "Plan my trip", state
        answered = [m["toolCallId"] for m in state["messages"] if m["role"] == "tool"]
        assert answered == ["call_add", "call_w", "call_t", "call_tr", "call_tr2"], state
        standin.push(reply("Still here."))
        _, events = turn(http, "POST", f"/session/{session}", {"messages": [
            {"role": "user", "content": "Are you there?"}]})
        assert streamed_text(events) == "Still here.", events
        # The model read the whole history, kept by the server.
        assert "Plan my trip" in standin.requests[-1].all_text()
        missing = http.get("/session/sess_nobody")
        assert missing.status_code == 404, missing.text
        assert http.delete(f"/session/{session}").status_code == 204
        assert http.get(f"/session/{session}").status_code == 404
    finally:
        server.stop()


def scenario_code_and_errors(api):
    """Code execution is a trusted tool with REPL state per session; bad bodies are 400s;
    an upstream failure ends the turn with turn_stop error and the session can retry."""
    with session_gateway(api) as (server, model):
        http = httpx.Client(base_url=server.url, timeout=TIMEOUT)
        model.push(reply(tool_use("code_execution", {"code": "x = 6 * 7\nprint(x)"},
                                  id="call_c1")),
                   reply("42."))
        session, events = turn(http, "PUT", "/session", {
            "model": MODEL, "messages": [{"role": "user", "content": "6*7?"}]})
        results = of(events, "tool_result")
        assert len(results) == 1 and "42" in results[0]["content"], events
        assert events[-1] == ("turn_stop", {"stopReason": "end_turn"}), events
        model.push(reply(tool_use("code_execution", {"code": "print(x + 1)"}, id="call_c2")),
                   reply("43."))
        _, events = turn(http, "POST", f"/session/{session}", {"messages": [
            {"role": "user", "content": "and plus one?"}]})
        assert "43" in of(events, "tool_result")[0]["content"], events

        for body, needle in [({"messages": []}, "nothing to do"),
                             ({"messages": [{"role": "robot", "content": "x"}]}, "unknown role"),
                             ({"messages": "hi"}, "`messages`")]:
            expect_refusal(http, f"/session/{session}", body, 400, needle)
        bad = http.put("/session", content=b"{nope", headers={"content-type": "application/json"})
        assert bad.status_code == 400, bad.text
        nobody = http.post("/session/sess_nobody", json={"messages": [
            {"role": "user", "content": "hi"}]})
        assert nobody.status_code == 404, nobody.text

        model.push(harness.error(529, "overloaded_error", "busy upstream"))
        _, events = turn(http, "POST", f"/session/{session}", {"messages": [
            {"role": "user", "content": "once more"}]})
        assert events[-1][1]["stopReason"] == "error", events
        assert "busy upstream" in events[-1][1]["message"], events
        model.push(reply("Back."))
        _, events = turn(http, "POST", f"/session/{session}", {"messages": []})
        assert streamed_text(events) == "Back.", events


def scenario_expiry(api):
    """A session idle past --session-ttl is gone (410), and says how to go on."""
    with session_gateway(api, extra=["--session-ttl", "1s"]) as (server, model):
        http = httpx.Client(base_url=server.url, timeout=TIMEOUT)
        model.push(reply("hi"))
        session, _ = turn(http, "PUT", "/session", {
            "model": MODEL, "messages": [{"role": "user", "content": "hello"}]})
        time.sleep(1.6)
        expired = http.get(f"/session/{session}")
        assert expired.status_code == 410, expired.text
        assert expired.json()["type"] == "session_expired", expired.text
        assert "PUT /session" in expired.json()["message"], expired.text


SCENARIOS = {name[len("scenario_"):]: fn for name, fn in globals().items()
             if name.startswith("scenario_")}


if __name__ == "__main__":
    harness.run_scenarios(SCENARIOS, __doc__)
