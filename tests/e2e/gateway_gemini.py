"""End-to-end checks of the model gateway's Gemini endpoints
(`/v1beta/models/{model}:generateContent`, `:streamGenerateContent?alt=sse`) with the
official `google-genai` SDK as the client, unchanged but for `base_url`, and a stand-in
upstream in any of the four APIs: `standin_gemini.py` for Gemini, `standin_model.py` for
the others.

Usage: python3 gateway_gemini.py SCENARIO --cordon PATH/TO/cordon [--upstream-api API]
(or CORDON_BIN=PATH). Servers are started and stopped as in `gateway_anthropic.py`, whose
machinery this script uses.
"""

import argparse
import base64
import os
import signal

import httpx

from google import genai
from google.genai import errors, types

import gateway_anthropic as harness
from pages import BUY, DISPLAY, GO, serve_page
from standin_gemini import Fail, StandinGemini, call, response, text
from standin_model import StandinModel, reply, tool_use
from standin_model import text as anthropic_text

MODEL = "gemini-2.5-flash"
QUESTION = "What is the weather in Paris?"
SIGNATURE = b"\x00opaque-thought-state\xff"
WEATHER = types.FunctionDeclaration(
    name="get_weather", description="Current weather for a city",
    parameters=types.Schema(type="OBJECT", properties={"city": types.Schema(type="STRING")},
                            required=["city"]))


def client(cordon):
    return genai.Client(api_key="sk-test-key", http_options=types.HttpOptions(
        base_url=cordon.url, timeout=60_000, retry_options=types.HttpRetryOptions(attempts=1)))


def config():
    return types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[WEATHER])], max_output_tokens=300,
        temperature=0.2, system_instruction="Answer in one sentence.",
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True))


def signature_bytes(text):
    """A signature as JSON carries it: base64, standard or URL-safe (the SDK writes the
    latter), padded or not."""
    text = text.replace("-", "+").replace("_", "/")
    return base64.b64decode(text + "=" * (-len(text) % 4))


class Upstream:
    """The stand-in behind the gateway, scripted alike for every API: the model calls
    `get_weather` (with a thought and a signature where the API has them), then answers."""

    def __init__(self, api):
        self.api = api
        self.gemini = api == "gemini"
        self.model = (StandinGemini() if self.gemini else StandinModel()).start()
        self.url = self.model.url + ("" if self.gemini else harness.UPSTREAM_PATH[api])
        self.cordon_url = None  # the server under test, once started

    def script(self):
        if self.gemini:
            self.model.push(response(text("The user wants Paris.", thought=True),
                                     call("get_weather", {"city": "Paris"}, signature=SIGNATURE)),
                            response(text("It is sunny in Paris.")))
        else:
            self.model.push(reply(tool_use("get_weather", {"city": "Paris"}, id="call_paris")),
                            reply(anthropic_text("It is sunny in Paris.")))

    def check_answer_reached_it(self):
        """The second request carries the call (its signature with it) and its answer."""
        second = self.model.requests[1]
        if not self.gemini:
            assert "call_paris" in str(second.body) and "sunny" in str(second.body), second
            return
        model_parts = second.parts("model")
        assert model_parts[0] == {"text": "The user wants Paris.", "thought": True}, model_parts
        signed = model_parts[1]
        assert signature_bytes(signed["thoughtSignature"]) == SIGNATURE, signed
        # Gemini gave the call no id: none goes back to it.
        assert signed["functionCall"] == {"name": "get_weather", "args": {"city": "Paris"}}, signed
        answer = second.parts("user")[-1]["functionResponse"]
        assert answer == {"name": "get_weather", "response": {"weather": "sunny"}}, answer
        first = self.model.requests[0]
        assert first.body["systemInstruction"] == {"parts": [{"text": "Answer in one sentence."}]}
        assert first.body["generationConfig"]["maxOutputTokens"] == 300, first.body
        assert first.body["tools"][0]["functionDeclarations"][0]["name"] == "get_weather"
        assert first.model == MODEL, first.path
        assert first.key == "sk-test-key", first.headers

    def stop(self):
        self.model.stop()


def run(api, body):
    upstream = Upstream(api)
    try:
        with harness.gateway(api, standin=upstream.model, upstream_url=upstream.url) as (cordon, _):
            upstream.cordon_url = cordon.url
            upstream.script()
            body(client(cordon), upstream)
    finally:
        upstream.stop()


def answer_for(function_call):
    assert function_call.name == "get_weather", function_call
    assert function_call.args == {"city": "Paris"}, function_call
    return types.Part.from_function_response(name=function_call.name,
                                             response={"weather": "sunny"})


def scenario_function_calling(api):
    """generate_content: a function call, answered by name, then the answer."""

    def body(gemini, upstream):
        first = gemini.models.generate_content(model=MODEL, contents=QUESTION, config=config())
        assert first.candidates[0].finish_reason == types.FinishReason.STOP, first
        [function_call] = first.function_calls
        assert function_call.id, first  # Cordon names every call
        assert first.usage_metadata.prompt_token_count > 0, first.usage_metadata
        model_content = first.candidates[0].content
        if upstream.gemini:
            # A Gemini client gets Gemini's thought and signature as they came.
            signed = [p for p in model_content.parts if p.function_call][0]
            assert signed.thought_signature == SIGNATURE, model_content
        contents = [types.Content(role="user", parts=[types.Part(text=QUESTION)]),
                    model_content,
                    types.Content(role="user", parts=[answer_for(function_call)])]
        second = gemini.models.generate_content(model=MODEL, contents=contents, config=config())
        assert second.text == "It is sunny in Paris.", second
        upstream.check_answer_reached_it()

    run(api, body)


def scenario_streaming(api):
    """generate_content_stream: the call and the answer arrive as SSE chunks."""

    def body(gemini, upstream):
        parts, finish = [], None
        for chunk in gemini.models.generate_content_stream(model=MODEL, contents=QUESTION,
                                                           config=config()):
            candidate = chunk.candidates[0]
            parts.extend(candidate.content.parts or [] if candidate.content else [])
            finish = candidate.finish_reason or finish
        assert finish == types.FinishReason.STOP, finish
        calls = [p.function_call for p in parts if p.function_call]
        assert len(calls) == 1, parts
        contents = [types.Content(role="user", parts=[types.Part(text=QUESTION)]),
                    types.Content(role="model", parts=parts),
                    types.Content(role="user", parts=[answer_for(calls[0])])]
        pieces = [chunk.text for chunk in gemini.models.generate_content_stream(
            model=MODEL, contents=contents, config=config()) if chunk.text]
        assert "".join(pieces) == "It is sunny in Paris.", pieces
        if upstream.gemini:
            streamed = upstream.model.requests[0]
            assert streamed.stream and streamed.query.get("alt") == ["sse"], streamed.path
        upstream.check_answer_reached_it()

    run(api, body)


def scenario_errors(api):
    """Errors reach the SDK in Google's shape, with their status."""

    def body(gemini, upstream):
        # A malformed conversation: refused before the upstream is asked.
        bad = [types.Content(role="robot", parts=[types.Part(text="hi")])]
        try:
            gemini.models.generate_content(model=MODEL, contents=bad)
            raise AssertionError("a `robot` role was taken")
        except errors.ClientError as e:
            assert e.code == 400 and e.status == "INVALID_ARGUMENT", (e.code, e.status)
            assert "robot" in e.message, e.message
        assert not upstream.model.requests, upstream.model.requests
        if upstream.gemini:
            # The upstream's own error keeps its status.
            upstream.model._queue.clear()
            upstream.model.push(Fail(429, "quota exhausted"))
            try:
                gemini.models.generate_content(model=MODEL, contents=QUESTION)
                raise AssertionError("the upstream's 429 was not passed on")
            except errors.ClientError as e:
                assert e.code == 429 and e.status == "RESOURCE_EXHAUSTED", (e.code, e.status)
                assert "quota exhausted" in e.message, e.message
            # A key in `?key=` (Google's other way to send it) is the client's key too.
            upstream.model.push(response(text("keyed")))
            with httpx.Client(base_url=upstream.cordon_url, timeout=60) as http:
                keyed = http.post(f"/v1beta/models/{MODEL}:generateContent?key=query-key",
                                  json={"contents": [{"parts": [{"text": "hi"}]}]})
            assert keyed.status_code == 200, keyed.text
            assert keyed.json()["candidates"][0]["content"]["parts"] == [{"text": "keyed"}]
            assert upstream.model.requests[-1].key == "query-key", upstream.model.requests[-1]

    run(api, body)


def grid(point):
    """A point of the 1024x640 model display on Gemini's 0-999 grid."""
    width, height = (int(n) for n in DISPLAY.split("x"))
    return {"x": point[0] * 1000 // width, "y": point[1] * 1000 // height}


def response_parts(request):
    """The function responses of the last user content of a recorded request."""
    return [p["functionResponse"] for p in request.parts("user") if "functionResponse" in p]


def scenario_computer(api):
    """Gemini computer use on a bound Cordon computer showing a real page: the upstream is
    offered `computerUse`, its `click_at` runs in Chromium, the function response carries
    the page's URL and the screenshot; a `safety_decision` waits for the client's approval
    and then carries `safety_acknowledgement`."""
    assert api == "gemini", "Gemini computer use needs a Gemini upstream"
    model = StandinGemini().start()
    try:
        with serve_page() as page, harness.gateway(
                "gemini", extra=harness.BROWSER_FLAGS, standin=model,
                upstream_url=model.url) as (cordon, _):
            origin = page.rsplit("/", 1)[0]
            http = cordon.http()
            opened = http.post("/v1/computers", json={"url": page, "display": DISPLAY,
                                                      "allow_origins": [origin]})
            assert opened.status_code == 201, opened.text
            computer = opened.json()["id"]

            # A Gemini client declares Gemini's tool; Cordon runs the model's click inline.
            model.push(response(text("Clicking Go."), call("click_at", grid(GO))),
                       response(text("The page says clicked.")))
            gemini = genai.Client(api_key="sk-test-key", http_options=types.HttpOptions(
                base_url=cordon.url, timeout=60_000, headers={"x-cordon-computer": computer},
                retry_options=types.HttpRetryOptions(attempts=1)))
            tool = types.Tool(computer_use=types.ComputerUse(
                environment=types.Environment.ENVIRONMENT_BROWSER))
            answer = gemini.models.generate_content(
                model=MODEL, contents="Press Go.",
                config=types.GenerateContentConfig(tools=[tool]))
            assert answer.text == "The page says clicked.", answer
            assert not answer.function_calls, answer
            first, second = model.requests[0], model.requests[1]
            assert {"computerUse": {"environment": "ENVIRONMENT_BROWSER"}} in \
                first.body["tools"], first.body["tools"]
            [clicked] = response_parts(second)
            assert clicked["name"] == "click_at", clicked
            assert clicked["response"] == {"url": page + "#clicked"}, clicked
            [image] = clicked["parts"]
            assert image["inlineData"]["mimeType"] == "image/png", image
            assert base64.b64decode(image["inlineData"]["data"])[:4] == b"\x89PNG"
            assert http.get(f"/v1/computers/{computer}").json()["current_url"] == \
                page + "#clicked"

            # The model asks to buy with a safety decision: the gates ask the client first.
            risky = dict(grid(BUY), safety_decision={
                "decision": "require_confirmation", "explanation": "This buys something."})
            model.push(response(call("click_at", risky)), response(text("Bought.")))
            client = cordon.client()
            question = {"role": "user", "content": "Buy it."}
            tools = [harness.COMPUTER_TOOL]
            message, body, _ = harness.create(client, tools=tools, messages=[question],
                                              extra_headers={"x-cordon-computer": computer})
            assert message.stop_reason == "tool_use", body
            [asked] = harness.blocks(message, "tool_use")
            assert asked.name == "click_at", body
            assert http.get(f"/v1/computers/{computer}").json()["current_url"] == \
                page + "#clicked", "nothing runs before the approval"
            final, body, _ = harness.create(client, tools=tools, messages=[
                question, {"role": "assistant", "content": harness.as_params(message.content)},
                {"role": "user", "content": [{"type": "cordon_approval",
                                              "tool_use_id": asked.id, "granted": True}]}],
                extra_headers={"x-cordon-computer": computer})
            assert final.content[-1].text == "Bought.", body
            assert http.get(f"/v1/computers/{computer}").json()["current_url"] == \
                page + "#bought"
            [bought] = response_parts(model.requests[-1])
            assert bought["response"] == {"url": page + "#bought",
                                          "safety_acknowledgement": "true"}, bought
            assert http.delete(f"/v1/computers/{computer}").status_code == 204
    finally:
        model.stop()


SCENARIOS = {name[len("scenario_"):]: fn for name, fn in globals().items()
             if name.startswith("scenario_")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--cordon", default=os.environ.get("CORDON_BIN"))
    parser.add_argument("--upstream-api", default="gemini",
                        choices=["gemini", "anthropic", "openai-chat", "openai-responses"])
    harness.ARGS = parser.parse_args()
    if not harness.ARGS.cordon:
        parser.error("--cordon PATH (or CORDON_BIN) is required")
    signal.signal(signal.SIGTERM, harness._on_signal)
    signal.signal(signal.SIGINT, harness._on_signal)
    try:
        SCENARIOS[harness.ARGS.scenario](harness.ARGS.upstream_api)
    finally:
        harness._stop_all()
    print(f"ok {harness.ARGS.scenario} ({harness.ARGS.upstream_api})")


if __name__ == "__main__":
    main()
