"""A stand-in Gemini model server speaking the real REST wire protocol on 127.0.0.1.

There is no model in the tests: each test scripts the stand-in's responses and then asserts
what the gateway under test sent it. It answers

  POST /v1beta/models/{model}:generateContent              a GenerateContentResponse (JSON)
  POST /v1beta/models/{model}:streamGenerateContent?alt=sse the same response as SSE
                                                            `data:` chunks (no event names):
                                                            text cut in pieces, other parts
                                                            whole, the finish reason and
                                                            usage on the last chunk

and errors in Google's shape, `{"error": {"code", "message", "status"}}`. The key is read
from `x-goog-api-key` (or `?key=`).

Usage (the tests run it on a thread, on an ephemeral port):

    with StandinGemini() as model:                  # model.url = "http://127.0.0.1:PORT"
        model.push(response(call("get_weather", {"city": "Paris"}, signature=b"sig")))
        model.push(lambda request: response(text(f"saw {len(request.body['contents'])}")))
        model.push(Fail(429, "quota exhausted"))
        ...
        model.requests[0].body["tools"]             # what the upstream received

`python3 standin_gemini.py` runs a self-test: every shape the stand-in produces is parsed
by the official `google-genai` SDK's types.
"""

import base64
import collections
import http.server
import json
import threading
import time
import urllib.parse

STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
          404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}


def text(value, thought=False, signature=None):
    part = {"text": value}
    if thought:
        part["thought"] = True
    if signature is not None:
        part["thoughtSignature"] = base64.b64encode(signature).decode()
    return part


def call(name, args, signature=None, id=None):
    """A function call part (Gemini sends no id unless asked: `id` is for tests that want
    one); `signature` is the thought signature's bytes."""
    function_call = {"name": name, "args": args}
    if id is not None:
        function_call["id"] = id
    part = {"functionCall": function_call}
    if signature is not None:
        part["thoughtSignature"] = base64.b64encode(signature).decode()
    return part


def response(*parts, finish="STOP", prompt_tokens=12, output_tokens=6, model="gemini-standin"):
    return {
        "candidates": [{"content": {"role": "model", "parts": list(parts)},
                        "finishReason": finish, "index": 0}],
        "usageMetadata": {"promptTokenCount": prompt_tokens,
                          "candidatesTokenCount": output_tokens,
                          "totalTokenCount": prompt_tokens + output_tokens},
        "modelVersion": model,
        "responseId": f"standin-{time.monotonic_ns()}",
    }


class Fail:
    """An error answer in Google's shape."""

    def __init__(self, code, message):
        self.code = code
        self.message = message

    def body(self):
        return {"error": {"code": self.code, "message": self.message,
                          "status": STATUS.get(self.code, "UNKNOWN")}}


class Recorded:
    """One request the stand-in received."""

    def __init__(self, path, query, headers, raw):
        self.path = path
        self.query = query
        self.headers = headers
        try:
            self.body = json.loads(raw or b"null")
        except ValueError:
            self.body = None
        model_method = path.rsplit("/", 1)[-1]
        self.model, _, self.method = model_method.partition(":")
        self.key = headers.get("x-goog-api-key") or (query.get("key") or [None])[0]

    @property
    def stream(self):
        return self.method == "streamGenerateContent"

    def parts(self, role=None):
        """Every part of `contents`, or of the contents of `role`."""
        return [part for content in self.body.get("contents", [])
                if role is None or content.get("role") == role
                for part in content.get("parts", [])]

    def __repr__(self):
        return f"Recorded({self.path!r}, {json.dumps(self.body)[:400]})"


def chunks(answer):
    """A response as `streamGenerateContent` chunks: each text part cut in three pieces (its
    signature on the last), other parts whole, the finish reason and usage on a last
    chunk of their own."""
    def head(parts):
        return {"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}],
                "modelVersion": answer["modelVersion"], "responseId": answer["responseId"]}

    out = []
    for part in answer["candidates"][0]["content"]["parts"]:
        if "text" in part and len(part["text"]) >= 3:
            value, third = part["text"], len(part["text"]) // 3
            pieces = [value[:third], value[third:2 * third], value[2 * third:]]
            for i, piece in enumerate(pieces):
                chunk = {k: v for k, v in part.items() if k != "thoughtSignature" or i == 2}
                chunk["text"] = piece
                out.append(head([chunk]))
        else:
            out.append(head([part]))
    last = head([])
    last["candidates"][0]["finishReason"] = answer["candidates"][0]["finishReason"]
    last["usageMetadata"] = answer["usageMetadata"]
    out.append(last)
    return out


class StandinGemini:
    """The stand-in Gemini server. A context manager; `url` is its base URL (the SDK's
    `base_url`)."""

    def __init__(self, event_delay=0.002):
        self.event_delay = event_delay
        self.requests = []
        self._queue = collections.deque()
        self._lock = threading.Lock()
        self._server = None

    def push(self, *answers):
        with self._lock:
            self._queue.extend(answers)
        return self

    def _next(self, request):
        with self._lock:
            self.requests.append(request)
            answer = self._queue.popleft() if self._queue else None
        if answer is None:
            return Fail(500, "stand-in Gemini: no response was scripted for this request")
        if callable(answer):
            answer = answer(request)
        return answer

    def start(self):
        self._server = _Server(("127.0.0.1", 0), _make_handler(self))
        threading.Thread(target=self._server.serve_forever, name="standin-gemini",
                         daemon=True).start()
        return self

    @property
    def url(self):
        return f"http://127.0.0.1:{self._server.server_address[1]}"

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

        def do_POST(self):  # noqa: N802 (the stdlib's name)
            url = urllib.parse.urlsplit(self.path)
            query = urllib.parse.parse_qs(url.query)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            request = Recorded(url.path, query, headers, raw)
            known = url.path.startswith("/v1beta/models/") and request.method in (
                "generateContent", "streamGenerateContent")
            if not known:
                standin.requests.append(request)
                self._send_json(404, Fail(404, f"no route {url.path}").body())
                return
            if request.body is None:
                standin.requests.append(request)
                self._send_json(400, Fail(400, "the body is not JSON").body())
                return
            if request.stream and query.get("alt") != ["sse"]:
                standin.requests.append(request)
                self._send_json(400, Fail(400, "the stand-in streams with alt=sse only").body())
                return
            answer = standin._next(request)
            if isinstance(answer, Fail):
                self._send_json(answer.code, answer.body())
            elif request.stream:
                self._send_sse(chunks(answer))
            else:
                self._send_json(200, answer)

        def _send_json(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _send_sse(self, events):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for data in events:
                    self._chunk(f"data: {json.dumps(data)}\r\n\r\n".encode())
                    if standin.event_delay:
                        time.sleep(standin.event_delay)
                self._chunk(b"")
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        def _chunk(self, data):
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    return Handler


def _selftest():
    """Every shape the stand-in writes parses as the SDK's own types."""
    from google.genai import types

    answer = response(text("Planning.", thought=True), text("Looking."),
                      call("get_weather", {"city": "Oslo"}, signature=b"\x01sig"),
                      call("get_time", {"tz": "CET"}))
    parsed = types.GenerateContentResponse.model_validate(answer)
    parts = parsed.candidates[0].content.parts
    assert parts[2].thought_signature == b"\x01sig", parts[2]
    assert parts[3].function_call.name == "get_time"
    for chunk in chunks(answer):
        types.GenerateContentResponse.model_validate(chunk)
    error = types.GenerateContentResponse.model_validate(response(text("x"), finish="SAFETY"))
    assert error.candidates[0].finish_reason == types.FinishReason.SAFETY
    print("ok standin_gemini shapes")


if __name__ == "__main__":
    _selftest()
