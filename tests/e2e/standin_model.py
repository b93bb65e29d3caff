"""A stand-in model server that speaks the vendors' wire protocols over HTTP on 127.0.0.1.

There is no model in the tests: each test scripts the stand-in's turns and then asserts
what the gateway under test sent it. It answers

  POST /v1/messages                                Anthropic Messages (JSON, or SSE with
                                                   `event:` lines when `"stream": true`)
  POST /chat/completions, /v1/chat/completions     OpenAI Chat Completions (JSON, or chunks
                                                   ending with `data: [DONE]`)
  POST /responses, /v1/responses                   OpenAI Responses (JSON, or events with
                                                   `sequence_number`)

Usage (the tests run it on a thread, on an ephemeral port):

    with StandinModel() as model:                  # model.url = "http://127.0.0.1:PORT"
        model.push(reply(tool_use("get_weather", {"city": "Paris"}, id="toolu_1")))
        model.push(lambda request: reply(text(f"saw {len(request.body['messages'])}")))
        model.push(error(529, "overloaded_error", "busy"))
        ...                                        # drive the gateway
        model.requests[0].body["tool_choice"]      # what the upstream received

A turn is written once, in Anthropic's block vocabulary (`text`, `tool_use`), and encoded
for whichever API the request came in on: a `tool_use` becomes a Chat `tool_calls` entry or
a Responses `function_call` item with the same id as its call id. Streams split text and
tool arguments into several deltas (the partial JSON really arrives in pieces: each event
is written and flushed on its own, a little apart).

`python3 standin_model.py` runs a self-test: every shape the stand-in produces is parsed
by the official `anthropic` and `openai` SDKs and validated against their types.
"""

import collections
import contextlib
import http.server
import itertools
import json
import socket
import threading
import time

# --- turns -----------------------------------------------------------------------------

_ids = itertools.count(1)


def new_id(prefix):
    return f"{prefix}{next(_ids):06d}standin"


def text(value):
    return {"type": "text", "text": value}


def tool_use(name, input, id=None):
    """A tool call of the model. `input` is a dict (what the model meant to send)."""
    return {"type": "tool_use", "id": id or new_id("toolu_"), "name": name, "input": input}


class Reply:
    """One model turn: Anthropic-shaped content blocks, a stop reason, token counts."""

    def __init__(self, content, stop_reason=None, input_tokens=10, output_tokens=5, model=None,
                 hold=None):
        self.content = list(content)
        # A streamed turn waits after its first text piece until `hold` (a `Hold`) is
        # released: a client that sees that piece while the stand-in waits got it streamed.
        self.hold = hold
        if stop_reason is None:
            has_call = any(b["type"] == "tool_use" for b in self.content)
            stop_reason = "tool_use" if has_call else "end_turn"
        self.stop_reason = stop_reason
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.model = model

    def tool_uses(self):
        return [b for b in self.content if b["type"] == "tool_use"]


def reply(*blocks, **kwargs):
    """`reply(text("hi"))`, `reply(tool_use(...), tool_use(...))`, strings are text blocks."""
    return Reply([text(b) if isinstance(b, str) else b for b in blocks], **kwargs)


class Fail:
    """An HTTP error in the vendor's error shape. `kind` is Anthropic's error type
    (`invalid_request_error`, `rate_limit_error`, `overloaded_error`, `api_error` …);
    OpenAI-shaped upstreams carry it as `error.type`. With `in_stream=True` a streamed
    request gets `200` and an `error` event after `message_start` (Anthropic) instead."""

    def __init__(self, status, kind, message, in_stream=False):
        self.status, self.kind, self.message, self.in_stream = status, kind, message, in_stream


def error(status, kind, message="scripted upstream error", in_stream=False):
    return Fail(status, kind, message, in_stream)


class Hold:
    """A pause in a streamed turn, after its first text piece, until the client `release`s
    it (after seeing that piece). `released` says the client did, before the stand-in went
    on; `sent_before` counts the events sent before the pause, `sent_total` the events of
    the whole stream."""

    def __init__(self, patience=60.0):
        self.patience = patience
        self._event = threading.Event()
        self.released = None
        self.sent_before = None
        self.sent_total = None

    def release(self):
        self._event.set()

    def wait(self, sent):
        self.sent_before = sent
        self.released = self._event.wait(self.patience)


def _is_text_piece(name, data):
    """Whether an event carries a piece of text (where a `Hold` pauses)."""
    if name == "content_block_delta":
        return data.get("delta", {}).get("type") == "text_delta"
    if name == "response.output_text.delta":
        return True
    choices = data.get("choices") or [{}]
    return bool(choices[0].get("delta", {}).get("content"))


class Hang:
    """Answers nothing for `seconds` (then closes the connection): a slow or dead upstream."""

    def __init__(self, seconds):
        self.seconds = seconds


# --- requests as received ----------------------------------------------------------------

API_OF_PATH = {
    "/v1/messages": "anthropic",
    "/chat/completions": "openai-chat",
    "/v1/chat/completions": "openai-chat",
    "/responses": "openai-responses",
    "/v1/responses": "openai-responses",
}


class Recorded:
    """A request as the stand-in received it."""

    def __init__(self, method, path, headers, raw):
        self.method, self.path, self.headers, self.raw = method, path, headers, raw
        self.api = API_OF_PATH.get(path.split("?")[0])
        try:
            self.body = json.loads(raw) if raw else None
        except ValueError:
            self.body = None
        self.answered_with = None

    @property
    def stream(self):
        return bool(isinstance(self.body, dict) and self.body.get("stream"))

    def __repr__(self):
        return f"<{self.method} {self.path} {json.dumps(self.body)[:2000]}>"

    # Vendor-neutral views used by assertions ------------------------------------------

    def tool_results(self):
        """`[(call_id, text, is_error)]` of the tool results this request carries, in order."""
        body = self.body or {}
        found = []
        if self.api == "anthropic":
            for message in body.get("messages", []):
                if message.get("role") != "user" or isinstance(message.get("content"), str):
                    continue
                for block in message["content"]:
                    if block.get("type") == "tool_result":
                        found.append((block["tool_use_id"], _text_of(block.get("content")),
                                      bool(block.get("is_error"))))
        elif self.api == "openai-chat":
            for message in body.get("messages", []):
                if message.get("role") == "tool":
                    content = _text_of(message.get("content"))
                    found.append((message["tool_call_id"], content, content.startswith("Error")))
        elif self.api == "openai-responses":
            items = body.get("input", [])
            for item in items if isinstance(items, list) else []:
                if item.get("type") == "function_call_output":
                    content = _text_of(item.get("output"))
                    found.append((item["call_id"], content, content.startswith("Error")))
        return found

    def tool_names(self):
        """Names of the function tools offered to the model."""
        tools = (self.body or {}).get("tools") or []
        names = []
        for tool in tools:
            if self.api == "openai-chat" and "function" in tool:
                names.append(tool["function"]["name"])
            else:
                names.append(tool.get("name"))
        return names

    def all_text(self):
        """Everything the model would read, as one string (for 'is X in the context')."""
        return json.dumps(self.body)


def _text_of(content):
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if isinstance(part, dict):
            parts.append(part.get("text") or part.get("output") or "")
    return "".join(parts)


# --- encoders per API --------------------------------------------------------------------

def _split(value, pieces=3):
    """Splits a string into up to `pieces` non-empty chunks (at least one)."""
    if len(value) <= 1:
        return [value]
    size = max(1, -(-len(value) // pieces))
    return [value[i:i + size] for i in range(0, len(value), size)]


def anthropic_message(turn, model):
    return {
        "id": new_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": turn.model or model,
        "content": turn.content,
        "stop_reason": turn.stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": turn.input_tokens, "output_tokens": turn.output_tokens},
    }


def anthropic_events(turn, model, fail_in_stream=None):
    message = anthropic_message(turn, model)
    start = dict(message, content=[], stop_reason=None,
                 usage={"input_tokens": turn.input_tokens, "output_tokens": 1})
    yield "message_start", {"type": "message_start", "message": start}
    yield "ping", {"type": "ping"}
    if fail_in_stream is not None:
        yield "error", {"type": "error", "error": {"type": fail_in_stream.kind,
                                                   "message": fail_in_stream.message}}
        return
    for index, block in enumerate(turn.content):
        if block["type"] == "text":
            yield "content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": {"type": "text", "text": ""}}
            for piece in _split(block["text"]):
                yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                              "delta": {"type": "text_delta", "text": piece}}
        elif block["type"] == "tool_use":
            head = {k: v for k, v in block.items() if k != "input"}
            yield "content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": dict(head, input={})}
            arguments = json.dumps(block["input"])
            # Anthropic starts with an empty partial_json, then pieces of the object.
            for piece in [""] + _split(arguments, 4):
                yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                              "delta": {"type": "input_json_delta",
                                                        "partial_json": piece}}
        else:
            yield "content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": block}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield "message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": turn.stop_reason, "stop_sequence": None},
                            "usage": {"output_tokens": turn.output_tokens}}
    yield "message_stop", {"type": "message_stop"}


CHAT_FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length",
               "stop_sequence": "stop", "refusal": "content_filter"}


def chat_completion(turn, model):
    texts = "".join(b["text"] for b in turn.content if b["type"] == "text")
    calls = [{"id": b["id"], "type": "function",
              "function": {"name": b["name"], "arguments": json.dumps(b["input"])}}
             for b in turn.tool_uses()]
    message = {"role": "assistant", "content": texts or None, "refusal": None}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": new_id("chatcmpl-"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": turn.model or model,
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": CHAT_FINISH.get(turn.stop_reason, "stop")}],
        "usage": {"prompt_tokens": turn.input_tokens, "completion_tokens": turn.output_tokens,
                  "total_tokens": turn.input_tokens + turn.output_tokens},
    }


def chat_chunks(turn, model):
    head = {"id": new_id("chatcmpl-"), "object": "chat.completion.chunk",
            "created": int(time.time()), "model": turn.model or model}

    def chunk(delta, finish=None):
        return dict(head, choices=[{"index": 0, "delta": delta, "logprobs": None,
                                    "finish_reason": finish}])

    yield chunk({"role": "assistant", "content": ""})
    for block in turn.content:
        if block["type"] == "text":
            for piece in _split(block["text"]):
                yield chunk({"content": piece})
    for index, call in enumerate(turn.tool_uses()):
        yield chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                     "function": {"name": call["name"], "arguments": ""}}]})
        for piece in _split(json.dumps(call["input"]), 4):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, CHAT_FINISH.get(turn.stop_reason, "stop"))
    yield dict(head, choices=[], usage={
        "prompt_tokens": turn.input_tokens, "completion_tokens": turn.output_tokens,
        "total_tokens": turn.input_tokens + turn.output_tokens})


def _responses_items(turn):
    items = []
    for block in turn.content:
        if block["type"] == "text":
            items.append({"type": "message", "id": new_id("msg_"), "role": "assistant",
                          "status": "completed",
                          "content": [{"type": "output_text", "text": block["text"],
                                       "annotations": [], "logprobs": []}]})
        elif block["type"] == "tool_use":
            items.append({"type": "function_call", "id": new_id("fc_"),
                          "call_id": block["id"], "name": block["name"],
                          "arguments": json.dumps(block["input"]), "status": "completed"})
    return items


def responses_response(turn, model, request, items=None, status="completed"):
    body = request or {}
    incomplete = {"reason": "max_output_tokens"} if turn.stop_reason == "max_tokens" else None
    return {
        "id": new_id("resp_"),
        "object": "response",
        "created_at": int(time.time()),
        "status": "incomplete" if incomplete and status == "completed" else status,
        "model": turn.model or model,
        "output": _responses_items(turn) if items is None else items,
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools", []),
        "error": None,
        "incomplete_details": incomplete,
        "instructions": body.get("instructions"),
        "metadata": {},
        "temperature": None,
        "top_p": None,
        "usage": None if status != "completed" else {
            "input_tokens": turn.input_tokens,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": turn.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": turn.input_tokens + turn.output_tokens,
        },
    }


def responses_events(turn, model, request):
    final = responses_response(turn, model, request)
    seq = itertools.count(0)

    def event(kind, **fields):
        return kind, dict({"type": kind, "sequence_number": next(seq)}, **fields)

    shell = dict(final, status="in_progress", output=[], usage=None, incomplete_details=None)
    yield event("response.created", response=shell)
    yield event("response.in_progress", response=shell)
    for index, item in enumerate(final["output"]):
        if item["type"] == "message":
            part = item["content"][0]
            yield event("response.output_item.added", output_index=index,
                        item=dict(item, status="in_progress", content=[]))
            yield event("response.content_part.added", output_index=index, item_id=item["id"],
                        content_index=0, part=dict(part, text=""))
            for piece in _split(part["text"]):
                yield event("response.output_text.delta", output_index=index,
                            item_id=item["id"], content_index=0, delta=piece, logprobs=[])
            yield event("response.output_text.done", output_index=index, item_id=item["id"],
                        content_index=0, text=part["text"], logprobs=[])
            yield event("response.content_part.done", output_index=index, item_id=item["id"],
                        content_index=0, part=part)
        else:
            yield event("response.output_item.added", output_index=index,
                        item=dict(item, arguments="", status="in_progress"))
            for piece in _split(item["arguments"], 4):
                yield event("response.function_call_arguments.delta", output_index=index,
                            item_id=item["id"], delta=piece)
            yield event("response.function_call_arguments.done", output_index=index,
                        item_id=item["id"], name=item["name"], arguments=item["arguments"])
        yield event("response.output_item.done", output_index=index, item=item)
    kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
    yield event(kind, response=final)


def error_body(api, fail):
    if api == "anthropic":
        return {"type": "error", "error": {"type": fail.kind, "message": fail.message},
                "request_id": new_id("req_")}
    return {"error": {"message": fail.message, "type": fail.kind, "param": None,
                      "code": fail.kind}}


# --- the server ----------------------------------------------------------------------------

class StandinModel:
    """The stand-in model server. A context manager; `url` is its base URL.

    `push(turn, ...)` queues turns (a `Reply`, a `Fail`, a `Hang`, or a function of the
    `Recorded` request returning one); each request takes the next. `respond_with(fn)` sets
    the answer for when the queue is empty. Without either, a request is answered with a
    500 `api_error` saying no turn was scripted, and `unexpected` counts it.
    """

    def __init__(self, model="standin-1", event_delay=0.002):
        self.model = model
        self.event_delay = event_delay
        self.requests = []
        self.unexpected = []
        self._queue = collections.deque()
        self._default = None
        self._lock = threading.Lock()
        self._server = None
        self._thread = None

    # scripting
    def push(self, *turns):
        with self._lock:
            self._queue.extend(turns)
        return self

    def respond_with(self, fn):
        self._default = fn
        return self

    def pending(self):
        with self._lock:
            return len(self._queue)

    def reset(self):
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self.unexpected.clear()
            self._default = None

    def _next(self, request):
        with self._lock:
            self.requests.append(request)
            turn = self._queue.popleft() if self._queue else None
        if turn is None and self._default is not None:
            turn = self._default
        if turn is None:
            self.unexpected.append(request)
            return Fail(500, "api_error", "stand-in model: no turn was scripted for this request")
        if callable(turn) and not isinstance(turn, (Reply, Fail, Hang)):
            turn = turn(request)
        request.answered_with = turn
        return turn

    # lifecycle
    def start(self):
        handler = _make_handler(self)
        self._server = _Server(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="standin-model", daemon=True)
        self._thread.start()
        return self

    @property
    def port(self):
        return self._server.server_address[1]

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def stop(self):
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def _make_handler(standin):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):  # noqa: N802 (the stdlib's name)
            self._send_json(404, {"type": "error",
                                  "error": {"type": "not_found_error", "message": self.path}})

        def do_POST(self):  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            request = Recorded("POST", self.path, headers, raw)
            if request.api is None:
                standin.requests.append(request)
                self._send_json(404, {"type": "error", "error": {
                    "type": "not_found_error", "message": f"no route {self.path}"}})
                return
            if request.body is None:
                standin.requests.append(request)
                self._send_json(400, error_body(request.api, Fail(
                    400, "invalid_request_error", "body is not JSON")))
                return
            turn = standin._next(request)
            if isinstance(turn, Hang):
                time.sleep(turn.seconds)
                self.close_connection = True
                return
            if isinstance(turn, Fail) and not (turn.in_stream and request.stream):
                self._send_json(turn.status, error_body(request.api, turn),
                                {"request-id": new_id("req_")} if request.api == "anthropic"
                                else {"x-request-id": new_id("req_")})
                return
            model = request.body.get("model") or standin.model
            if request.api == "anthropic":
                if request.stream:
                    fail = turn if isinstance(turn, Fail) else None
                    base = Reply([]) if fail else turn
                    self._send_sse(anthropic_events(base, model, fail), named=True,
                                   hold=getattr(base, "hold", None))
                else:
                    self._send_json(200, anthropic_message(turn, model))
            elif request.api == "openai-chat":
                if request.stream:
                    events = (("", c) for c in chat_chunks(turn, model))
                    self._send_sse(events, named=False, done=True, hold=turn.hold)
                else:
                    self._send_json(200, chat_completion(turn, model))
            else:
                if request.stream:
                    self._send_sse(responses_events(turn, model, request.body), named=True,
                                   hold=turn.hold)
                else:
                    self._send_json(200, responses_response(turn, model, request.body))

        def _send_json(self, status, body, extra_headers=None):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (extra_headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _send_sse(self, events, named, done=False, hold=None):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            sent = 0
            if hold is not None:
                events = list(events)
                hold.sent_total = len(events) + (1 if done else 0)
            try:
                for name, data in events:
                    frame = (f"event: {name}\n" if named and name else "") + \
                        f"data: {json.dumps(data)}\n\n"
                    self._chunk(frame.encode())
                    sent += 1
                    if hold is not None and hold.sent_before is None and \
                            _is_text_piece(name, data):
                        hold.wait(sent)
                    if standin.event_delay:
                        time.sleep(standin.event_delay)
                if done:
                    self._chunk(b"data: [DONE]\n\n")
                self._chunk(b"")
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        def _chunk(self, data):
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    return Handler


def free_port():
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- self-test: the official SDKs read every shape ---------------------------------------

def _selftest():
    import anthropic
    import openai
    from anthropic.types import Message, RawMessageStreamEvent
    from openai.types.chat import ChatCompletion, ChatCompletionChunk
    from openai.types.responses import Response, ResponseStreamEvent
    from pydantic import TypeAdapter

    import httpx

    calls = [tool_use("get_weather", {"city": "Paris", "units": {"temp": "c"}}, id="toolu_a1"),
             tool_use("get_time", {"tz": "Europe/Paris"}, id="toolu_a2")]
    turn = reply("Let me check both.", *calls)
    final = reply("It is 21 C in Paris.")
    tools = [{"name": "get_weather", "input_schema": {"type": "object"}},
             {"name": "get_time", "input_schema": {"type": "object"}}]
    messages = [{"role": "user", "content": "weather and time in Paris?"}]

    with StandinModel() as model, httpx.Client(timeout=10) as http:
        # Anthropic, raw JSON and raw SSE against the SDK's types.
        model.push(turn, turn)
        body = {"model": "m", "max_tokens": 100, "messages": messages, "tools": tools}
        raw = http.post(f"{model.url}/v1/messages", json=body).json()
        assert Message.model_validate(raw).stop_reason == "tool_use"
        with http.stream("POST", f"{model.url}/v1/messages", json=dict(body, stream=True)) as r:
            events = list(_sse(r))
        names = [n for n, _ in events]
        assert names[0] == "message_start" and names[-1] == "message_stop", names
        for name, data in events:
            if name == "ping":  # sent by the real API, skipped by the SDK, not in its union
                continue
            assert TypeAdapter(RawMessageStreamEvent).validate_python(data).type == name
        partial = [d["delta"]["partial_json"] for _, d in events
                   if d.get("delta", {}).get("type") == "input_json_delta"]
        assert len(partial) >= 6 and all(p != json.dumps(calls[0]["input"]) for p in partial)

        # Anthropic through the SDK: create, stream, errors.
        client = anthropic.Anthropic(base_url=model.url, api_key="k", max_retries=0, timeout=10)
        model.push(turn, turn, final)
        message = client.messages.create(model="m", max_tokens=100, messages=messages,
                                         tools=tools)
        assert [b.type for b in message.content] == ["text", "tool_use", "tool_use"]
        assert message.content[1].input == calls[0]["input"]
        with client.messages.stream(model="m", max_tokens=100, messages=messages,
                                    tools=tools) as stream:
            streamed = stream.get_final_message()
        assert [b.input for b in streamed.content[1:]] == [c["input"] for c in calls]
        assert streamed.stop_reason == "tool_use"
        assert client.messages.create(model="m", max_tokens=10, messages=messages) \
            .content[0].text == "It is 21 C in Paris."
        for status, kind, exc in [(400, "invalid_request_error", anthropic.BadRequestError),
                                  (429, "rate_limit_error", anthropic.RateLimitError),
                                  (529, "overloaded_error", anthropic.InternalServerError)]:
            model.push(error(status, kind, "nope"))
            try:
                client.messages.create(model="m", max_tokens=10, messages=messages)
                raise AssertionError("no error raised")
            except exc as e:
                assert e.status_code == status and e.body["error"]["type"] == kind, e.body
        model.push(error(529, "overloaded_error", "busy", in_stream=True))
        try:
            with client.messages.stream(model="m", max_tokens=10, messages=messages) as s:
                s.get_final_message()
            raise AssertionError("no error raised")
        except anthropic.APIStatusError as e:
            assert "overloaded_error" in str(e), e
        assert len(model.requests) == 9 and model.requests[3].stream, model.requests
        assert model.requests[2].body["tools"][0]["name"] == "get_weather"

        # OpenAI Chat Completions.
        oai = openai.OpenAI(base_url=f"{model.url}/v1", api_key="k", max_retries=0, timeout=10)
        ftools = [{"type": "function", "function": {"name": t["name"],
                                                    "parameters": t["input_schema"]}}
                  for t in tools]
        model.push(turn, turn)
        completion = oai.chat.completions.create(model="m", messages=messages, tools=ftools)
        ChatCompletion.model_validate(completion.model_dump())
        got = completion.choices[0].message.tool_calls
        assert [(c.id, json.loads(c.function.arguments)) for c in got] == \
            [(c["id"], c["input"]) for c in calls]
        assert completion.choices[0].finish_reason == "tool_calls"
        chunks = list(oai.chat.completions.create(model="m", messages=messages, tools=ftools,
                                                  stream=True))
        arguments = {}
        for chunk in chunks:
            ChatCompletionChunk.model_validate(chunk.model_dump())
            for choice in chunk.choices:
                for call in choice.delta.tool_calls or []:
                    arguments[call.index] = arguments.get(call.index, "") + \
                        (call.function.arguments or "")
        assert [json.loads(arguments[i]) for i in (0, 1)] == [c["input"] for c in calls]
        model.push(error(400, "invalid_request_error", "bad"))
        try:
            oai.chat.completions.create(model="m", messages=messages)
            raise AssertionError("no error raised")
        except openai.BadRequestError as e:
            assert e.status_code == 400 and e.type == "invalid_request_error"
        model.push(final)
        with http.stream("POST", f"{model.url}/chat/completions",
                         json={"model": "m", "messages": messages, "stream": True}) as r:
            lines = [line for line in r.iter_lines() if line]
        assert lines[-1] == "data: [DONE]", lines

        # OpenAI Responses.
        rtools = [{"type": "function", "name": t["name"], "parameters": t["input_schema"],
                   "strict": False} for t in tools]
        model.reset()
        model.push(turn, turn, reply("done", stop_reason="max_tokens"))
        response = oai.responses.create(model="m", input="weather?", tools=rtools)
        Response.model_validate(response.model_dump())
        got = [(i.call_id, json.loads(i.arguments)) for i in response.output
               if i.type == "function_call"]
        assert got == [(c["id"], c["input"]) for c in calls], got
        events = list(oai.responses.create(model="m", input="weather?", tools=rtools,
                                           stream=True))
        seqs = [e.sequence_number for e in events]
        assert seqs == list(range(len(events))), seqs
        for e in events:
            TypeAdapter(ResponseStreamEvent).validate_python(e.model_dump())
        assert events[-1].type == "response.completed"
        deltas = [e for e in events if e.type == "response.function_call_arguments.delta"]
        assert len(deltas) >= 4, deltas
        incomplete = oai.responses.create(model="m", input="x")
        assert incomplete.status == "incomplete", incomplete
        model.push(error(429, "rate_limit_error", "slow down"))
        try:
            oai.responses.create(model="m", input="x")
            raise AssertionError("no error raised")
        except openai.RateLimitError as e:
            assert e.status_code == 429
        assert [r.api for r in model.requests] == ["openai-responses"] * 4

        # Recorded views.
        model.reset()
        model.push(final, final, final)
        http.post(f"{model.url}/v1/messages", json={"model": "m", "max_tokens": 5, "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [calls[0]]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_a1",
                                          "content": "21", "is_error": True}]}]})
        http.post(f"{model.url}/v1/chat/completions", json={"model": "m", "messages": [
            {"role": "tool", "tool_call_id": "toolu_a1", "content": "21"}]})
        http.post(f"{model.url}/responses", json={"model": "m", "input": [
            {"type": "function_call_output", "call_id": "toolu_a1", "output": "21"}]})
        assert [r.tool_results() for r in model.requests] == [
            [("toolu_a1", "21", True)], [("toolu_a1", "21", False)],
            [("toolu_a1", "21", False)]], [r.tool_results() for r in model.requests]
        assert http.post(f"{model.url}/v1/messages", json={}).status_code == 500
        assert len(model.unexpected) == 1
    print("stand-in model: every shape validates against the anthropic and openai SDK types")


def _sse(response):
    name, data = None, []
    for line in response.iter_lines():
        if line == "":
            if data:
                yield name, json.loads("\n".join(data))
            name, data = None, []
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())


if __name__ == "__main__":
    _selftest()
