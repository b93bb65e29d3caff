"""End-to-end checks of the model gateway (`cordon serve --upstream …`) with the official
`anthropic` SDK as the client and the stand-in model server (`standin_model.py`) upstream.

Usage: python3 gateway_anthropic.py SCENARIO --cordon PATH/TO/cordon [--upstream-api API]
(or CORDON_BIN=PATH). The script starts the stand-in on 127.0.0.1 (ephemeral port), then a
`cordon serve --addr 127.0.0.1:0 --upstream API=URL` of its own, and stops that server on
every way out (normal end, assertion, exception, SIGTERM/SIGINT; and the kernel sends it
SIGTERM if this script is killed). Each scenario asserts what docs/gateway.md promises and
exits non-zero on the first failure. Every client call and process wait has a timeout.
`API` is `anthropic` (default), `openai-chat` or `openai-responses`: the client always
speaks Anthropic Messages, the upstream that API.

Long because it is a catalogue: 22 independent scenarios, one function each, over the one
harness above them (stand-in, server, SDK client); the OpenAI, Gemini, streaming and session
front doors have scripts of their own.
"""

import argparse
import asyncio
import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import anthropic
import httpx
from anthropic.types import Message

from pages import BUY, DISPLAY, GO, serve_page
from standin_model import Hang, StandinModel, error, free_port, reply, tool_use

TIMEOUT = 60.0
MODEL = "claude-standin-1"
WEATHER = {"name": "get_weather", "description": "Current weather for a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                            "required": ["city"]}}
TIME = {"name": "get_time", "description": "Local time in a time zone",
        "input_schema": {"type": "object", "properties": {"tz": {"type": "string"}},
                         "required": ["tz"]}}
UPSTREAM_PATH = {"anthropic": "", "openai-chat": "/v1", "openai-responses": "/v1"}


# --- the server under test ---------------------------------------------------------------

_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    """In the child before exec: SIGTERM when this script dies, however it dies."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


class Cordon:
    """A `cordon serve` process with the gateway pointed at an upstream."""

    def __init__(self, binary, upstream, extra=(), db=None):
        self.dir = tempfile.TemporaryDirectory(prefix="cordon-gateway-")
        self.db = db or os.path.join(self.dir.name, "cordon.db")
        args = [binary, "serve", "--addr", "127.0.0.1:0", "--db", self.db,
                "--upstream", upstream, *extra]
        self.args = args
        self.process = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            preexec_fn=_die_with_parent)
        _LIVE.append(self)
        self.url = None
        self.log = []
        found = threading.Event()

        def drain():
            for raw in self.process.stderr:
                line = raw.decode(errors="replace").rstrip("\n")
                self.log.append(line)
                print(f"[cordon] {line}", file=sys.stderr, flush=True)
                if self.url is None and "listening on http://" in line:
                    self.url = line[line.index("http://"):].split()[0].rstrip("/")
                    found.set()
            found.set()

        threading.Thread(target=drain, daemon=True).start()
        if not found.wait(120) or self.url is None:
            self.stop()
            raise AssertionError(f"cordon serve printed no address: {args}\n" +
                                 "\n".join(self.log[-20:]))

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()  # SIGTERM: the server stops the Chromium it started
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        if self in _LIVE:
            _LIVE.remove(self)
        self.dir.cleanup()

    def client(self, **kwargs):
        return anthropic.Anthropic(base_url=self.url, api_key="sk-test-key", max_retries=0,
                                   timeout=TIMEOUT, **kwargs)

    def async_client(self):
        return anthropic.AsyncAnthropic(base_url=self.url, api_key="sk-test-key",
                                        max_retries=0, timeout=TIMEOUT)

    def http(self):
        return httpx.Client(base_url=self.url, timeout=TIMEOUT)


_LIVE = []


def _stop_all():
    for server in list(_LIVE):
        with contextlib.suppress(Exception):
            server.stop()


def _on_signal(signum, _frame):
    _stop_all()
    sys.exit(128 + signum)


@contextlib.contextmanager
def gateway(api="anthropic", extra=(), standin=None, upstream_url=None):
    """Yields (cordon, standin): a fresh stand-in model and a server pointed at it."""
    own = standin is None
    model = StandinModel().start() if own else standin
    url = upstream_url or model.url + UPSTREAM_PATH[api]
    server = None
    try:
        server = Cordon(ARGS.cordon, f"{api}={url}", extra)
        yield server, model
    finally:
        if server is not None:
            server.stop()
        if own:
            model.stop()


def tools_file(directory, tools):
    path = os.path.join(directory, "tools.json")
    with open(path, "w") as f:
        json.dump({"tools": tools}, f)
    return path


# --- helpers -------------------------------------------------------------------------------

def create(client, **params):
    """messages.create through the raw response: (parsed Message, raw JSON, headers).
    The raw JSON is validated against the SDK's own `Message` type."""
    params.setdefault("model", MODEL)
    params.setdefault("max_tokens", 1024)
    raw = client.messages.with_raw_response.create(**params)
    body = json.loads(raw.http_response.text)
    Message.model_validate(body)
    check_conversation_header(raw.headers)
    return raw.parse(), body, raw.headers


def check_conversation_header(headers):
    conversation = headers.get("x-cordon-conversation-id")
    assert conversation and conversation.startswith("conv_"), dict(headers)
    return conversation


def blocks(message, kind):
    return [b for b in message.content if b.type == kind]


def as_params(content):
    """Response content blocks as request params (what a client sends back)."""
    return [b.model_dump(exclude_none=True) for b in content]


def results_for(message, outputs, errors=()):
    """A user message answering every tool_use of `message`: {id: output}."""
    content = []
    for block in blocks(message, "tool_use"):
        entry = {"type": "tool_result", "tool_use_id": block.id,
                 "content": json.dumps(outputs[block.id])}
        if block.id in errors:
            entry["is_error"] = True
        content.append(entry)
    return {"role": "user", "content": content}


def expect_error(status, error_type, call, exc=anthropic.APIStatusError):
    try:
        call()
    except exc as e:
        assert e.status_code == status, (e.status_code, e.body)
        assert isinstance(e.body, dict) and e.body.get("type") == "error", e.body
        assert e.body["error"]["type"] == error_type, e.body
        assert isinstance(e.body["error"]["message"], str) and e.body["error"]["message"]
        return e
    raise AssertionError(f"expected {status} {error_type}, got a response")


def upstream_tool_choice(request):
    """The tool choice the upstream received, in a vendor-neutral form:
    (kind, name or None, parallel allowed)."""
    body = request.body
    if request.api == "anthropic":
        choice = body.get("tool_choice") or {"type": "auto"}
        return (choice["type"], choice.get("name"), not choice.get("disable_parallel_tool_use"))
    choice = body.get("tool_choice", "auto")
    parallel = body.get("parallel_tool_calls", True) is not False
    if isinstance(choice, str):
        kind = {"required": "any"}.get(choice, choice)
        return (kind, None, parallel)
    name = choice["function"]["name"] if "function" in choice else choice["name"]
    return ("tool", name, parallel)


# --- client tools ----------------------------------------------------------------------------

def parallel_round_trip(client, model, streamed):
    """One parallel round trip: the model calls two client tools, the client answers both."""
    first = len(model.requests)
    tag = "s" if streamed else "j"  # a model's call ids are unique across conversations
    one, two = f"toolu_par_{tag}1", f"toolu_par_{tag}2"
    calls = [tool_use("get_weather", {"city": "Paris"}, id=one),
             tool_use("get_time", {"tz": "Europe/Paris"}, id=two)]
    model.push(reply("Let me check both.", *calls),
               reply("Paris: 21 C, 14:05."))
    question = {"role": "user", "content": "Weather and time in Paris?"}
    params = dict(model=MODEL, max_tokens=1024, tools=[WEATHER, TIME], messages=[question])
    if streamed:
        with client.messages.stream(**params) as stream:
            conversation = check_conversation_header(stream.response.headers)
            kinds = [event.type for event in stream]
            message = stream.get_final_message()
        assert kinds[0] == "message_start" and kinds[-1] == "message_stop", kinds
        assert "text" in kinds and kinds.count("input_json") >= 2, kinds
        assert kinds.count("content_block_stop") == 3, kinds
    else:
        message, body, headers = create(client, **params)
        conversation = check_conversation_header(headers)
        assert body["role"] == "assistant" and body["type"] == "message", body
    assert message.stop_reason == "tool_use", message
    uses = blocks(message, "tool_use")
    assert [(u.id, u.name, u.input) for u in uses] == \
        [(c["id"], c["name"], c["input"]) for c in calls], message
    assert blocks(message, "text")[0].text == "Let me check both.", message

    seen = model.requests[first]
    assert seen.tool_names() == ["get_weather", "get_time"], seen
    assert seen.stream == streamed, "the upstream streams when the client streams"
    assert json.dumps(seen.body).count("Weather and time in Paris?") == 1, seen

    outputs = {one: {"temp_c": 21}, two: {"time": "14:05"}}
    follow = dict(params, messages=[question,
                                    {"role": "assistant", "content": as_params(message.content)},
                                    results_for(message, outputs)])
    if streamed:
        with client.messages.stream(**follow) as stream:
            again = check_conversation_header(stream.response.headers)
            final = stream.get_final_message()
    else:
        final, _, headers = create(client, **follow)
        again = check_conversation_header(headers)
    # The answer to a tool_use id the gateway handed out continues that conversation.
    assert again == conversation, (again, conversation)
    assert final.stop_reason == "end_turn", final
    assert [b.type for b in final.content] == ["text"], final
    assert final.content[0].text == "Paris: 21 C, 14:05.", final
    assert len(model.requests) == first + 2, model.requests
    results = model.requests[first + 1].tool_results()
    assert [(i, json.loads(t), e) for i, t, e in results] == [
        (one, {"temp_c": 21}, False), (two, {"time": "14:05"}, False)
    ], results


def scenario_parallel_client_tools(api):
    with gateway(api) as (cordon, model):
        client = cordon.client()
        parallel_round_trip(client, model, streamed=False)
        parallel_round_trip(client, model, streamed=True)
        expected_path = {"anthropic": "/v1/messages", "openai-chat": "/v1/chat/completions",
                         "openai-responses": "/v1/responses"}[api]
        assert {r.path for r in model.requests} == {expected_path}, model.requests
        assert model.unexpected == []


def scenario_is_error(api):
    with gateway(api) as (cordon, model):
        client = cordon.client()
        model.push(reply(tool_use("get_weather", {"city": "Atlantis"}, id="toolu_err_1")),
                   reply("Atlantis is not a city I can look up."))
        question = {"role": "user", "content": "Weather in Atlantis?"}
        message, _, _ = create(client, tools=[WEATHER], messages=[question])
        assert message.stop_reason == "tool_use", message
        final, _, _ = create(client, tools=[WEATHER], messages=[
            question, {"role": "assistant", "content": as_params(message.content)},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_err_1",
                                          "content": "no such city: Atlantis",
                                          "is_error": True}]}])
        assert final.content[0].text.startswith("Atlantis"), final
        results = model.requests[1].tool_results()
        assert len(results) == 1 and results[0][0] == "toolu_err_1", results
        assert results[0][2] is True and "no such city: Atlantis" in results[0][1], results
        if api == "anthropic":
            block = model.requests[1].body["messages"][-1]["content"][0]
            assert block["is_error"] is True, block


def scenario_tool_choice(api):
    with gateway(api) as (cordon, model):
        client = cordon.client()
        cases = [
            ({"type": "auto"}, ("auto", None, True)),
            ({"type": "any"}, ("any", None, True)),
            ({"type": "tool", "name": "get_time"}, ("tool", "get_time", True)),
            ({"type": "none"}, ("none", None, True)),
            ({"type": "auto", "disable_parallel_tool_use": True}, ("auto", None, False)),
            ({"type": "any", "disable_parallel_tool_use": True}, ("any", None, False)),
        ]
        for choice, _ in cases:
            model.push(reply("ok"))
            create(client, tools=[WEATHER, TIME], tool_choice=choice,
                   messages=[{"role": "user", "content": "hi"}])
        seen = [upstream_tool_choice(r) for r in model.requests]
        assert seen == [want for _, want in cases], seen
        if api == "anthropic":
            # Anthropic upstream: the client's own object, unchanged.
            assert [r.body["tool_choice"] for r in model.requests] == [c for c, _ in cases]
        elif api == "openai-chat":
            assert model.requests[1].body["tool_choice"] == "required"
            assert model.requests[2].body["tool_choice"] == \
                {"type": "function", "function": {"name": "get_time"}}
            assert model.requests[4].body["parallel_tool_calls"] is False
        else:
            assert model.requests[1].body["tool_choice"] == "required"
            assert model.requests[2].body["tool_choice"] == {"type": "function",
                                                              "name": "get_time"}
            assert model.requests[4].body["parallel_tool_calls"] is False


def _history_with_calls(*ids):
    return [
        {"role": "user", "content": "Weather in Paris and Oslo?"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": i, "name": "get_weather", "input": {"city": "Paris"}}
            for i in ids]},
    ]


def scenario_pairing_errors(api):
    """Unknown and missing tool_use_id: 400 before anything runs, the upstream sees nothing."""
    with gateway(api) as (cordon, model):
        client = cordon.client()
        unknown = _history_with_calls("toolu_known") + [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_unknown", "content": "21"}]}]
        e = expect_error(400, "invalid_request_error", lambda: client.messages.create(
            model=MODEL, max_tokens=100, tools=[WEATHER], messages=unknown),
            anthropic.BadRequestError)
        assert "toolu_unknown" in e.body["error"]["message"], e.body
        missing = _history_with_calls("toolu_a", "toolu_b") + [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_a", "content": "21"}]}]
        e = expect_error(400, "invalid_request_error", lambda: client.messages.create(
            model=MODEL, max_tokens=100, tools=[WEATHER], messages=missing),
            anthropic.BadRequestError)
        assert "toolu_b" in e.body["error"]["message"], e.body
        # Streamed requests are refused the same way, before any event.
        e = expect_error(400, "invalid_request_error", lambda: client.messages.stream(
            model=MODEL, max_tokens=100, tools=[WEATHER], messages=missing).__enter__(),
            anthropic.BadRequestError)
        assert model.requests == [], model.requests


def scenario_upstream_error(api):
    """The upstream's status and error type reach the client in Anthropic's error shape."""
    with gateway(api) as (cordon, model):
        client = cordon.client()
        messages = [{"role": "user", "content": "hi"}]
        for status, kind, exc in [
            (429, "rate_limit_error", anthropic.RateLimitError),
            (529, "overloaded_error", anthropic.InternalServerError),
            (400, "invalid_request_error", anthropic.BadRequestError),
            (401, "authentication_error", anthropic.AuthenticationError),
            (500, "api_error", anthropic.InternalServerError),
        ]:
            before = len(model.requests)
            model.push(error(status, kind, f"upstream says {kind}"))
            e = expect_error(status, kind, lambda: client.messages.create(
                model=MODEL, max_tokens=100, messages=messages), exc)
            assert len(model.requests) == before + 1, model.requests
            assert f"upstream says {kind}" in e.body["error"]["message"], e.body
            check_conversation_header(e.response.headers)
        model.push(error(529, "overloaded_error", "busy"))
        expect_error(529, "overloaded_error", lambda: client.messages.stream(
            model=MODEL, max_tokens=100, messages=messages).__enter__())
        # The gateway still works afterwards.
        model.push(reply("fine"))
        message, _, _ = create(client, messages=messages)
        assert message.content[0].text == "fine"


def scenario_upstream_down(api):
    """Nothing listens at the upstream's address: 502 in Anthropic's error shape."""
    dead = f"http://127.0.0.1:{free_port()}" + UPSTREAM_PATH[api]
    with gateway(api, upstream_url=dead) as (cordon, _model):
        client = cordon.client()
        try:
            client.messages.create(model=MODEL, max_tokens=100,
                                   messages=[{"role": "user", "content": "hi"}])
            raise AssertionError("no error")
        except anthropic.APIStatusError as e:
            assert e.status_code == 502, (e.status_code, e.body)
            assert e.body["type"] == "error" and e.body["error"]["type"], e.body
            assert e.body["error"]["message"], e.body


def scenario_upstream_timeout(api):
    """An upstream slower than --upstream-timeout: 504 in Anthropic's error shape."""
    with gateway(api, extra=["--upstream-timeout", "1s"]) as (cordon, model):
        client = cordon.client()
        model.push(Hang(8))  # answers nothing, then closes: a 502 if the gateway waited
        e = expect_error(504, "api_error", lambda: client.messages.create(
            model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "hi"}]))
        check_conversation_header(e.response.headers)
        assert len(model.requests) == 1, model.requests


def scenario_error_headers(api):
    """Every response carries x-cordon-conversation-id, error responses too."""
    with gateway(api) as (cordon, model):
        http = cordon.http()
        model.push(error(429, "rate_limit_error", "slow"))
        response = http.post("/v1/messages", json={
            "model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]})
        assert response.status_code == 429, response.text
        check_conversation_header(response.headers)
        unknown = _history_with_calls("toolu_known") + [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_unknown", "content": "21"}]}]
        response = http.post("/v1/messages", json={
            "model": MODEL, "max_tokens": 10, "tools": [WEATHER], "messages": unknown})
        assert response.status_code == 400, response.text
        check_conversation_header(response.headers)
        assert len(model.requests) == 1, model.requests


def scenario_error_headers_bad_body(api):
    """A body that is not JSON: 400 invalid_request_error, with a conversation id too."""
    with gateway(api) as (cordon, model):
        response = cordon.http().post("/v1/messages", content=b"{not json",
                                      headers={"content-type": "application/json"})
        assert response.status_code == 400, response.text
        assert response.json()["error"]["type"] == "invalid_request_error", response.text
        assert model.requests == [], model.requests
        check_conversation_header(response.headers)


def scenario_credentials(api):
    """The client's key is forwarded in the upstream's header; --upstream-key-env replaces it."""
    header = {"anthropic": "x-api-key"}.get(api, "authorization")
    value = {"anthropic": "{}"}.get(api, "Bearer {}")
    with gateway(api) as (cordon, model):
        model.push(reply("ok"))
        create(cordon.client(), messages=[{"role": "user", "content": "hi"}])
        assert model.requests[0].headers.get(header) == value.format("sk-test-key"), \
            model.requests[0].headers
    os.environ["STANDIN_UPSTREAM_KEY"] = "sk-operator-key"
    with gateway(api, extra=["--upstream-key-env", "STANDIN_UPSTREAM_KEY"]) as (cordon, model):
        model.push(reply("ok"))
        create(cordon.client(), messages=[{"role": "user", "content": "hi"}])
        seen = model.requests[0].headers
        assert seen.get(header) == value.format("sk-operator-key"), seen
        assert "sk-test-key" not in json.dumps(seen), seen
        if api == "anthropic":
            assert seen.get("anthropic-version") == "2023-06-01", seen


# --- server tools ------------------------------------------------------------------------

ADD = {"name": "add", "description": "Adds two numbers",
       "input_schema": {"type": "object",
                        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                        "required": ["a", "b"], "additionalProperties": False},
       "handler": {"kind": "command", "timeout_ms": 10000, "argv": [
           sys.executable, "-c",
           "import json,sys; d=json.load(sys.stdin); print(json.dumps({'sum': d['a'] + d['b']}))"]}}
STOCK = {"name": "stock", "description": "Items in stock",
         "input_schema": {"type": "object", "properties": {"sku": {"type": "string"}}},
         "handler": {"kind": "static", "result": {"in_stock": 3}}}
TRANSFER = {"name": "transfer", "description": "Moves money", "policy": "ask",
            "input_schema": {"type": "object", "properties": {"amount": {"type": "number"}}},
            "handler": {"kind": "static", "result": {"ok": True, "ref": "TX-991"}}}
PING = {"name": "ping", "description": "Answers pong",
        "input_schema": {"type": "object"},
        "handler": {"kind": "static", "result": "pong"}}


@contextlib.contextmanager
def server_tools_gateway(api, tools, extra=()):
    with tempfile.TemporaryDirectory() as directory:
        path = tools_file(directory, tools)
        with gateway(api, extra=["--tools", path, *extra]) as pair:
            yield pair


def scenario_server_tool_inline(api):
    """Operator tools run inline: the client sees only the final answer."""
    with server_tools_gateway(api, [ADD, STOCK]) as (cordon, model):
        client = cordon.client()
        model.push(reply("Adding.", tool_use("add", {"a": 2, "b": 3}, id="toolu_add_1")),
                   reply(tool_use("stock", {"sku": "X1"}, id="toolu_stock_1")),
                   reply("2 + 3 = 5, and 3 in stock."))
        for streamed in (False, True):
            params = dict(model=MODEL, max_tokens=1024, tools=[WEATHER],
                          messages=[{"role": "user", "content": "2+3? stock of X1?"}])
            if streamed:
                model.push(reply("Adding.", tool_use("add", {"a": 2, "b": 3},
                                                     id="toolu_add_2")),
                           reply("2 + 3 = 5."))
                with client.messages.stream(**params) as stream:
                    check_conversation_header(stream.response.headers)
                    kinds = [event.type for event in stream]
                    message = stream.get_final_message()
                assert kinds[0] == "message_start" and kinds[-1] == "message_stop", kinds
                assert message.content[-1].text == "2 + 3 = 5.", message
            else:
                message, body, _ = create(client, **params)
                assert message.content[-1].text == "2 + 3 = 5, and 3 in stock.", message
            assert message.stop_reason == "end_turn", message
            types = [b.type for b in message.content]
            assert "tool_use" not in types and "tool_result" not in types, message
        first, second, third = model.requests[:3]
        names = first.tool_names()
        assert {"add", "stock", "get_weather"} <= set(names), names
        results = second.tool_results()
        assert [(i, json.loads(t), e) for i, t, e in results] == \
            [("toolu_add_1", {"sum": 5}, False)], results
        results = third.tool_results()
        assert [(i, json.loads(t), e) for i, t, e in results][-1] == \
            ("toolu_stock_1", {"in_stock": 3}, False), results
        assert json.loads(model.requests[4].tool_results()[0][1]) == {"sum": 5}
        assert len(model.requests) == 5 and model.unexpected == []


def scenario_ask_approval(api):
    """An `ask` server tool: the client approves or denies with a cordon_approval block."""
    with server_tools_gateway(api, [TRANSFER]) as (cordon, model):
        client = cordon.client()
        question = {"role": "user", "content": "Send 10 to Bob."}
        for granted in (True, False):
            call_id = f"toolu_tx_{'yes' if granted else 'no'}"
            model.push(reply("Transferring.", tool_use("transfer", {"amount": 10}, id=call_id)),
                       reply("Done." if granted else "Not sent."))
            message, _, _ = create(client, messages=[question])
            assert message.stop_reason == "tool_use", message
            uses = blocks(message, "tool_use")
            assert [(u.id, u.name, u.input) for u in uses] == \
                [(call_id, "transfer", {"amount": 10})], message
            before = len(model.requests)
            approval = {"type": "cordon_approval", "tool_use_id": call_id, "granted": granted}
            if not granted:
                approval["reason"] = "Bob is not a known payee"
            final, _, _ = create(client, messages=[
                question, {"role": "assistant", "content": as_params(message.content)},
                {"role": "user", "content": [approval]}])
            assert final.stop_reason == "end_turn", final
            assert final.content[-1].text == ("Done." if granted else "Not sent."), final
            assert len(model.requests) == before + 1, model.requests
            results = model.requests[-1].tool_results()
            assert len(results) == 1 and results[0][0] == call_id, results
            call, output, is_error = results[0]
            if granted:
                assert not is_error and json.loads(output) == {"ok": True, "ref": "TX-991"}
            else:
                assert is_error and "denied" in output.lower(), results
                assert "Bob is not a known payee" in output, results
                assert "TX-991" not in model.requests[-1].all_text()


def scenario_validation_retry(api):
    """Input that fails the tool's schema goes back to the model as is_error; it retries."""
    with server_tools_gateway(api, [ADD]) as (cordon, model):
        client = cordon.client()
        model.push(reply(tool_use("add", {"a": "two", "b": 3}, id="toolu_bad_1")),
                   reply(tool_use("add", {"a": 2, "b": 3}, id="toolu_good_1")),
                   reply("5"))
        message, _, _ = create(client, messages=[{"role": "user", "content": "2+3"}])
        assert [b.type for b in message.content] == ["text"], message
        assert message.content[0].text == "5" and message.stop_reason == "end_turn", message
        bad = model.requests[1].tool_results()
        assert len(bad) == 1 and bad[0][0] == "toolu_bad_1" and bad[0][2] is True, bad
        assert "sum" not in bad[0][1], bad
        good = model.requests[2].tool_results()
        assert good[-1][0] == "toolu_good_1" and good[-1][2] is False, good
        assert json.loads(good[-1][1]) == {"sum": 5}, good
        assert len(model.requests) == 3


def scenario_loop_cap(api):
    """`--max-tool-rounds 3`: three model turns, then a text block about the limit."""
    with server_tools_gateway(api, [PING], ["--max-tool-rounds", "3"]) as (cordon, model):
        client = cordon.client()
        counter = iter(range(1000))
        model.respond_with(lambda _r: reply(tool_use("ping", {}, id=f"toolu_ping_{next(counter)}")))
        message, _, headers = create(client, messages=[{"role": "user", "content": "ping forever"}])
        assert len(model.requests) == 3, model.requests
        assert message.stop_reason == "end_turn", message
        assert message.content[-1].type == "text", message
        assert "limit" in message.content[-1].text.lower(), message
        assert headers.get("x-cordon-stop") == "max_tool_rounds", dict(headers)
        assert "tool_use" not in [b.type for b in message.content], message


# --- programmatic tool calling -------------------------------------------------------------

CODE_TOOL = {"type": "code_execution_20250825", "name": "code_execution"}


def ptc_weather(callers=("code_execution_20250825",)):
    return dict(WEATHER, allowed_callers=list(callers))


GATHER = """import asyncio
reports = await asyncio.gather(get_weather(city="Paris"), get_weather(city="Oslo"))
print("warmest:", max(r["temp_c"] for r in reports))
"""


def code_call_id(request):
    """The id of the last `code_execution` call in the model turns the upstream got back:
    its result must answer exactly that id."""
    body, ids = request.body, []
    if request.api == "anthropic":
        ids = [b["id"] for m in body["messages"] if m["role"] == "assistant"
               and isinstance(m["content"], list) for b in m["content"]
               if b.get("type") == "tool_use" and b.get("name") == "code_execution"]
    elif request.api == "openai-chat":
        ids = [c["id"] for m in body["messages"] for c in m.get("tool_calls") or []
               if c["function"]["name"] == "code_execution"]
    else:
        ids = [i["call_id"] for i in body["input"] if isinstance(i, dict)
               and i.get("type") == "function_call" and i.get("name") == "code_execution"]
    assert ids, request
    return ids[-1]


def _start_ptc(client, model, code, call_id, tools=None, messages=None):
    model.push(reply("I'll write a program.", tool_use("code_execution", {"code": code},
                                                          id=call_id)))
    messages = messages or [{"role": "user", "content": "Which is warmer, Paris or Oslo?"}]
    message, body, _ = create(client, tools=tools or [CODE_TOOL, ptc_weather()],
                              messages=messages)
    return message, body, messages


def scenario_ptc_batch(api):
    """A program's asyncio.gather of two client calls reaches the client as one batch."""
    with gateway(api) as (cordon, model):
        client = cordon.client()
        message, body, messages = _start_ptc(client, model, GATHER, "toolu_code_1")
        offered = model.requests[0]
        assert "code_execution" in offered.tool_names(), offered
        assert "get_weather" not in offered.tool_names(), "allowed_callers without direct"
        code_tool = [t for t in offered.body["tools"]
                     if (t.get("name") or t.get("function", {}).get("name")) == "code_execution"]
        assert "code" in json.dumps(code_tool), code_tool

        assert message.stop_reason == "tool_use", body
        servers = blocks(message, "server_tool_use")
        assert len(servers) == 1, body
        server = servers[0]
        assert server.id.startswith("srvtoolu_") and server.name == "code_execution", server
        assert server.input == {"code": GATHER}, server
        uses = blocks(message, "tool_use")
        assert sorted(u.input["city"] for u in uses) == ["Oslo", "Paris"], body
        for use in uses:
            assert use.name == "get_weather", use
            assert use.caller.type == "code_execution_20250825", use
            assert use.caller.tool_id == server.id, use
        container = body.get("container") or {}
        assert container.get("id", "").startswith("container_"), body
        assert message.container.expires_at is not None, body

        temps = {"Paris": 21, "Oslo": 9}
        outputs = {u.id: {"temp_c": temps[u.input["city"]],
                          "note": f"SECRET_{u.input['city'].upper()}"} for u in uses}
        model.push(reply("Paris is warmer (21 C)."))
        final, final_body, _ = create(client, tools=[CODE_TOOL, ptc_weather()],
                                      container=container["id"], messages=[
                                          *messages,
                                          {"role": "assistant",
                                           "content": as_params(message.content)},
                                          results_for(message, outputs)])
        assert len(model.requests) == 2, model.requests
        resumed = model.requests[1]
        results = resumed.tool_results()
        assert [r[0] for r in results] == [code_call_id(resumed)], results
        assert "warmest: 21" in results[0][1], results
        # Intermediate results stay out of the model's context unless printed.
        assert "SECRET_PARIS" not in resumed.all_text(), resumed
        assert "SECRET_OSLO" not in resumed.all_text(), resumed

        assert final.stop_reason == "end_turn", final_body
        assert final.content[-1].type == "text", final_body
        assert final.content[-1].text == "Paris is warmer (21 C).", final_body
        done = blocks(final, "code_execution_tool_result")
        assert len(done) == 1 and done[0].tool_use_id == server.id, final_body
        result = done[0].content
        assert result.type == "code_execution_result", final_body
        assert "warmest: 21" in result.stdout and result.return_code == 0, final_body
        assert final_body.get("container", {}).get("id") == container["id"], final_body


def scenario_ptc_asyncio_gather_client(api):
    """The same batch answered from an async client that runs its tools with gather."""
    with gateway(api) as (cordon, model):
        async def main():
            client = cordon.async_client()
            model.push(reply(tool_use("code_execution", {"code": GATHER}, id="toolu_code_a")))
            messages = [{"role": "user", "content": "Warmer?"}]
            raw = await client.messages.with_raw_response.create(
                model=MODEL, max_tokens=100, tools=[CODE_TOOL, ptc_weather()],
                messages=messages)
            message = await raw.parse()
            uses = blocks(message, "tool_use")
            assert len(uses) == 2, message

            async def run_tool(use):
                await asyncio.sleep(0.01)
                return {"type": "tool_result", "tool_use_id": use.id,
                        "content": json.dumps({"temp_c": len(use.input["city"])})}

            answers = await asyncio.gather(*[run_tool(u) for u in uses])
            model.push(reply("ok"))
            final = await client.messages.create(
                model=MODEL, max_tokens=100, tools=[CODE_TOOL, ptc_weather()],
                container=message.container.id, messages=[
                    *messages, {"role": "assistant", "content": as_params(message.content)},
                    {"role": "user", "content": list(answers)}])
            assert final.stop_reason == "end_turn", final
            results = model.requests[1].tool_results()
            assert [r[0] for r in results] == [code_call_id(model.requests[1])], results
            assert "warmest: 5" in results[0][1], results
            await client.close()

        asyncio.run(asyncio.wait_for(main(), TIMEOUT * 2))


def scenario_ptc_container_errors(api):
    """An unknown container is a 400 before anything runs; so is a container that expired."""
    with gateway(api) as (cordon, model):
        client = cordon.client()
        history = [
            {"role": "user", "content": "Warmer?"},
            {"role": "assistant", "content": [
                {"type": "server_tool_use", "id": "srvtoolu_gone", "name": "code_execution",
                 "input": {"code": GATHER}},
                {"type": "tool_use", "id": "toolu_gone_1", "name": "get_weather",
                 "input": {"city": "Paris"},
                 "caller": {"type": "code_execution_20250825", "tool_id": "srvtoolu_gone"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_gone_1",
                                          "content": "{\"temp_c\": 1}"}]}]
        expect_error(400, "invalid_request_error", lambda: client.messages.create(
            model=MODEL, max_tokens=100, tools=[CODE_TOOL, ptc_weather()],
            container="container_doesnotexist", messages=history), anthropic.BadRequestError)
        assert model.requests == [], model.requests
    with gateway(api, extra=["--container-ttl", "1s"]) as (cordon, model):
        client = cordon.client()
        message, body, messages = _start_ptc(client, model, GATHER, "toolu_code_exp")
        container = body["container"]["id"]
        time.sleep(3)  # idle longer than --container-ttl
        outputs = {u.id: {"temp_c": 1} for u in blocks(message, "tool_use")}
        e = expect_error(400, "invalid_request_error", lambda: client.messages.create(
            model=MODEL, max_tokens=100, tools=[CODE_TOOL, ptc_weather()],
            container=container, messages=[
                *messages, {"role": "assistant", "content": as_params(message.content)},
                results_for(message, outputs)]), anthropic.BadRequestError)
        assert container in e.body["error"]["message"] or "expired" in \
            e.body["error"]["message"], e.body
        assert len(model.requests) == 1, model.requests


def scenario_ptc_repl_state(api):
    """Variables of one program are there for the next program in the same container."""
    with gateway(api) as (cordon, model):
        client = cordon.client()
        code = 'counter = 40\nr = await get_weather(city="Paris")\nprint("first", r["temp_c"])'
        message, body, messages = _start_ptc(client, model, code, "toolu_repl_1")
        container = body["container"]["id"]
        model.push(reply("Stored."))
        messages = [*messages, {"role": "assistant", "content": as_params(message.content)},
                    results_for(message, {blocks(message, "tool_use")[0].id: {"temp_c": 2}})]
        final, _, _ = create(client, tools=[CODE_TOOL, ptc_weather()], container=container,
                             messages=messages)
        results = model.requests[1].tool_results()
        assert [r[0] for r in results] == [code_call_id(model.requests[1])], results
        assert "first 2" in results[0][1], results
        model.push(reply(tool_use("code_execution", {"code": "print(counter + 2)"},
                                  id="toolu_repl_2")),
                   reply("42"))
        messages = [*messages, {"role": "assistant", "content": as_params(final.content)},
                    {"role": "user", "content": "Add two to the counter."}]
        again, again_body, _ = create(client, tools=[CODE_TOOL, ptc_weather()],
                                      container=container, messages=messages)
        assert again.content[-1].text == "42", again_body
        results = model.requests[3].tool_results()
        assert results[-1][0] == code_call_id(model.requests[3]), results
        assert results[-1][1].split("stdout:")[-1].strip().startswith("42"), results
        assert not results[-1][2], results


# --- computer use --------------------------------------------------------------------------

# As root Chromium's own sandbox cannot run; the operator opts out explicitly (README).
BROWSER_FLAGS = ["--no-browser-sandbox"] if os.geteuid() == 0 else []

COMPUTER_TOOL = {"type": "computer_20251124", "name": "computer",
                 "display_width_px": 1024, "display_height_px": 640}


def _image_blocks(request):
    """Images the upstream got with tool results, in its own shape: Anthropic `image`
    blocks in a tool_result, Chat `image_url` parts in the user message after the tool
    messages (Chat tool messages are text only), Responses `input_image` parts."""
    body, found = request.body, []
    if request.api == "anthropic":
        for message in body.get("messages", []):
            for block in message["content"] if isinstance(message.get("content"), list) else []:
                if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
                    found += [b for b in block["content"] if b.get("type") == "image"]
    elif request.api == "openai-chat":
        messages = body.get("messages", [])
        for before, message in zip(messages, messages[1:]):
            if before.get("role") == "tool" and message.get("role") == "user" and \
                    isinstance(message.get("content"), list):
                found += [p for p in message["content"] if p.get("type") == "image_url"]
    else:
        for item in body.get("input", []):
            if isinstance(item, dict) and item.get("type") == "function_call_output" and \
                    isinstance(item.get("output"), list):
                found += [p for p in item["output"] if p.get("type") == "input_image"]
    return found


def scenario_computer(api):
    """A computer tool run by Cordon on a local page: click, screenshot to the model, gate."""
    with serve_page() as page, gateway(api, extra=BROWSER_FLAGS) as (cordon, model):
        origin = page.rsplit("/", 1)[0]
        http = cordon.http()
        opened = http.post("/v1/computers", json={"url": page, "display": DISPLAY,
                                                  "allow_origins": [origin]})
        assert opened.status_code == 201, opened.text
        computer = opened.json()["id"]
        client = cordon.client()
        model.push(reply("Clicking Go.", tool_use("computer", {"action": "left_click",
                                                               "coordinate": GO},
                                                  id="toolu_cmp_1")),
                   reply("The page says clicked."))
        message, body, headers = create(
            client, tools=[COMPUTER_TOOL], messages=[{"role": "user", "content": "Press Go."}],
            extra_headers={"x-cordon-computer": computer})
        assert headers.get("x-cordon-computer") == computer, dict(headers)
        assert message.stop_reason == "end_turn", body
        assert message.content[-1].text == "The page says clicked.", body
        assert "tool_use" not in [b.type for b in message.content], body
        seen = model.requests[1]
        results = seen.tool_results()
        assert results and results[-1][0] == "toolu_cmp_1", seen
        assert _image_blocks(seen), "the screenshot goes back to the model as an image"
        assert http.get(f"/v1/computers/{computer}").json()["current_url"] == page + "#clicked"

        # A gate asks before "Buy now": the response ends with the call, the client approves.
        model.push(reply(tool_use("computer", {"action": "left_click", "coordinate": BUY},
                                  id="toolu_cmp_buy")),
                   reply("Bought."))
        question = {"role": "user", "content": "Buy it."}
        message, body, _ = create(client, tools=[COMPUTER_TOOL], messages=[question],
                                  extra_headers={"x-cordon-computer": computer})
        assert message.stop_reason == "tool_use", body
        assert [u.id for u in blocks(message, "tool_use")] == ["toolu_cmp_buy"], body
        assert http.get(f"/v1/computers/{computer}").json()["current_url"] == page + "#clicked"
        final, body, _ = create(client, tools=[COMPUTER_TOOL], messages=[
            question, {"role": "assistant", "content": as_params(message.content)},
            {"role": "user", "content": [{"type": "cordon_approval",
                                          "tool_use_id": "toolu_cmp_buy", "granted": True}]}],
            extra_headers={"x-cordon-computer": computer})
        assert final.content[-1].text == "Bought.", body
        assert http.get(f"/v1/computers/{computer}").json()["current_url"] == page + "#bought"
        assert http.delete(f"/v1/computers/{computer}").status_code == 204

        # Without the header the computer tool is a client tool as usual.
        model.push(reply(tool_use("computer", {"action": "screenshot"}, id="toolu_cmp_c")))
        message, body, headers = create(client, tools=[COMPUTER_TOOL],
                                        messages=[{"role": "user", "content": "Look."}])
        assert message.stop_reason == "tool_use", body
        assert blocks(message, "tool_use")[0].input == {"action": "screenshot"}, body


def scenario_computer_toolsets(api):
    """`computer_toolset_20260801` and `browser_toolset_20260801` bound to a Cordon computer
    act on a real page; an action the client disabled is refused to the model and runs
    nothing."""
    with serve_page() as page, gateway(api, extra=BROWSER_FLAGS) as (cordon, model):
        origin = page.rsplit("/", 1)[0]
        http = cordon.http()
        opened = http.post("/v1/computers", json={"url": page, "display": DISPLAY,
                                                  "allow_origins": [origin]})
        assert opened.status_code == 201, opened.text
        computer = opened.json()["id"]
        client = cordon.client()
        url = lambda: http.get(f"/v1/computers/{computer}").json()["current_url"]  # noqa: E731

        computer_toolset = {"type": "computer_toolset_20260801", "name": "computer",
                            "configs": {"double_click": {"enabled": False}}}
        model.push(reply(tool_use("computer", {"action": "double_click", "coordinate": BUY},
                                  id="toolu_ts_off"),
                         tool_use("computer", {"action": "left_click", "coordinate": GO},
                                  id="toolu_ts_go")),
                   reply("Clicked Go; double click is off."))
        message, body, _ = create(client, tools=[computer_toolset],
                                  messages=[{"role": "user", "content": "Press Go."}],
                                  extra_headers={"x-cordon-computer": computer})
        assert message.content[-1].text == "Clicked Go; double click is off.", body
        assert url() == page + "#clicked", "only the enabled click ran"
        results = {r[0]: r for r in model.requests[1].tool_results()}
        assert results["toolu_ts_off"][2], "the disabled action is an error to the model"
        assert not results["toolu_ts_go"][2], results

        browser_toolset = {"type": "browser_toolset_20260801",
                           "configs": {"left_click": {"enabled": True}}}
        model.push(reply({"type": "tool_use", "id": "toolu_bt_nav", "name": "navigate",
                          "input": {"url": page}, "toolset_name": "browser"},
                         {"type": "tool_use", "id": "toolu_bt_click", "name": "left_click",
                          "input": {"target": {"type": "coordinate", "x": GO[0], "y": GO[1]}},
                          "toolset_name": "browser"}),
                   reply("Back on the page and clicked."))
        message, body, _ = create(client, tools=[browser_toolset],
                                  messages=[{"role": "user", "content": "Go back, press Go."}],
                                  extra_headers={"x-cordon-computer": computer})
        assert message.content[-1].text == "Back on the page and clicked.", body
        assert url() == page + "#clicked", url()
        results = {r[0]: r for r in model.requests[-1].tool_results()}
        assert not results["toolu_bt_nav"][2] and not results["toolu_bt_click"][2], results
        assert http.delete(f"/v1/computers/{computer}").status_code == 204


def scenario_computer_url(api):
    """`x-cordon-computer: <URL>` opens a new computer; the response names it."""
    with serve_page() as page, gateway(api, extra=BROWSER_FLAGS) as (cordon, model):
        client = cordon.client()
        model.push(reply(tool_use("computer", {"action": "left_click", "coordinate": GO},
                                  id="toolu_u_1")),
                   reply("done"))
        message, body, headers = create(client, tools=[COMPUTER_TOOL],
                                        messages=[{"role": "user", "content": "Press Go."}],
                                        extra_headers={"x-cordon-computer": page})
        computer = headers.get("x-cordon-computer", "")
        assert computer.startswith("cmp_"), dict(headers)
        assert message.content[-1].text == "done", body
        info = cordon.http().get(f"/v1/computers/{computer}").json()
        assert info["current_url"] == page + "#clicked", info


# --- conversations -------------------------------------------------------------------------

def scenario_conversations(api):
    """GET /v1/conversations/{id} shows the request, every model turn, tool calls and
    results with their ids, and timings."""
    with server_tools_gateway(api, [ADD]) as (cordon, model):
        client = cordon.client()
        model.push(reply(tool_use("add", {"a": 20, "b": 22}, id="toolu_conv_add")),
                   reply(tool_use("get_weather", {"city": "Rome"}, id="toolu_conv_w")),
                   reply("42, and Rome is sunny."))
        question = {"role": "user", "content": "20+22 please, and Rome's weather"}
        message, _, headers = create(client, tools=[WEATHER], messages=[question])
        conversation = check_conversation_header(headers)
        final, _, headers = create(client, tools=[WEATHER], messages=[
            question, {"role": "assistant", "content": as_params(message.content)},
            results_for(message, {"toolu_conv_w": {"sky": "sunny"}})])
        assert check_conversation_header(headers) == conversation
        http = cordon.http()
        record = http.get(f"/v1/conversations/{conversation}")
        assert record.status_code == 200, record.text
        assert record.headers["content-type"].startswith("application/json"), record.headers
        data = record.json()
        assert data["id"] == conversation, data
        assert data["upstream"].startswith(api + "="), data
        entries = data["entries"]
        assert [e["seq"] for e in entries] == list(range(1, len(entries) + 1)), entries
        kinds = [e["kind"] for e in entries]
        assert kinds.count("request") == 2 and kinds.count("response") == 2, kinds
        assert kinds.count("model_turn") == 3, kinds
        assert kinds[0] == "request" and kinds[-1] == "response", kinds
        assert "20+22 please" in json.dumps(entries[0]["data"]), entries[0]
        turns = [e for e in entries if e["kind"] == "model_turn"]
        assert all(isinstance(t["duration_ms"], (int, float)) for t in turns), turns
        assert [t["round"] for t in turns[:2]] == [1, 2], turns
        calls = {e["call_id"]: e for e in entries if e["kind"] == "tool_call"}
        assert calls["toolu_conv_add"]["data"]["name"] == "add", calls
        assert calls["toolu_conv_add"]["data"]["input"] == {"a": 20, "b": 22}, calls
        assert calls["toolu_conv_add"]["data"]["runs"] == "server", calls
        assert calls["toolu_conv_w"]["data"]["runs"] == "client", calls
        results = {e["call_id"]: e for e in entries if e["kind"] == "tool_result"}
        add = results["toolu_conv_add"]
        assert add["data"]["is_error"] is False and "42" in json.dumps(add["data"]["content"])
        assert isinstance(add["duration_ms"], (int, float)), add
        assert "sunny" in json.dumps(results["toolu_conv_w"]["data"]), results
        responses = [e for e in entries if e["kind"] == "response"]
        assert [r["data"]["stop_reason"] for r in responses] == ["tool_use", "end_turn"]
        assert all(r["data"]["status"] == 200 for r in responses), responses
        missing = http.get("/v1/conversations/conv_doesnotexist")
        assert missing.status_code == 404, missing.text


SCENARIOS = {name[len("scenario_"):]: fn for name, fn in globals().items()
             if name.startswith("scenario_")}


def run_scenarios(scenarios, doc):
    """The command line of the gateway's e2e scripts: SCENARIO --cordon PATH
    [--upstream-api API]; runs the scenario, stopping every server it started on any way
    out."""
    global ARGS
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("scenario", choices=sorted(scenarios))
    parser.add_argument("--cordon", default=os.environ.get("CORDON_BIN"),
                        help="path of the cordon binary (or CORDON_BIN)")
    parser.add_argument("--upstream-api", default="anthropic",
                        choices=["anthropic", "openai-chat", "openai-responses"])
    ARGS = parser.parse_args()
    if not ARGS.cordon:
        parser.error("--cordon PATH (or CORDON_BIN) is required")
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    try:
        scenarios[ARGS.scenario](ARGS.upstream_api)
    finally:
        _stop_all()
    print(f"ok {ARGS.scenario} ({ARGS.upstream_api})")


ARGS = None

if __name__ == "__main__":
    run_scenarios(SCENARIOS, __doc__)
