"""End-to-end checks of the model gateway's OpenAI endpoints (`/v1/chat/completions`,
`/v1/responses`) with the official `openai` SDK as the client, unchanged but for `base_url`,
and the stand-in model server (`standin_model.py`) upstream in any of the three APIs.

Usage: python3 gateway_openai.py SCENARIO --cordon PATH/TO/cordon [--upstream-api API]
(or CORDON_BIN=PATH). Servers are started and stopped as in `gateway_anthropic.py`, whose
machinery this script uses. Every response body is validated against the SDK's own types.
"""

import json

import httpx
import openai
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

import gateway_anthropic as harness
from standin_model import reply, tool_use

TIMEOUT = 60.0
MODEL = "gpt-standin-1"
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Local time in a time zone",
    "parameters": {"type": "object", "properties": {"tz": {"type": "string"}},
                   "required": ["tz"]}}}


def responses_tool(chat_tool):
    """A Chat Completions function tool in the Responses API's flat shape."""
    function = chat_tool["function"]
    return {"type": "function", "name": function["name"],
            "description": function["description"], "parameters": function["parameters"],
            "strict": False}


def client(cordon):
    return openai.OpenAI(base_url=cordon.url + "/v1", api_key="sk-test-key", max_retries=0,
                         timeout=TIMEOUT)


def check_conversation_header(headers):
    conversation = headers.get("x-cordon-conversation-id")
    assert conversation and conversation.startswith("conv_"), dict(headers)
    return conversation


def expect_openai_error(status, call):
    """The call fails with `status` and an OpenAI-shaped error body."""
    try:
        call()
    except openai.APIStatusError as e:
        assert e.status_code == status, (e.status_code, e.body)
        assert isinstance(e.body, dict), e.body
        # The SDK hands over the `error` object of `{"error": {...}}`.
        message = e.body.get("message") or e.body.get("error", {}).get("message")
        assert isinstance(message, str) and message, e.body
        return message
    raise AssertionError(f"expected {status}, got a response")


def sse_events(response):
    """(event name, data) pairs of an SSE body, `[DONE]` kept as a string."""
    events, name, data = [], "", []
    for line in response.text.splitlines():
        if not line:
            if data:
                joined = "\n".join(data)
                events.append((name, joined if joined == "[DONE]" else json.loads(joined)))
            name, data = "", []
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
    return events


# --- Chat Completions ----------------------------------------------------------------------

def chat_round_trip(cordon, model, streamed):
    """The model calls two client tools; the client answers both with `tool` messages."""
    openai_client = client(cordon)
    first = len(model.requests)
    tag = "s" if streamed else "j"
    one, two = f"call_chat_{tag}1", f"call_chat_{tag}2"
    model.push(reply("Checking both.", tool_use("get_weather", {"city": "Paris"}, id=one),
                     tool_use("get_time", {"tz": "Europe/Paris"}, id=two)),
               reply("Paris: 21 C at 14:05."))
    question = {"role": "user", "content": "Weather and time in Paris?"}
    params = dict(model=MODEL, tools=[WEATHER, TIME], messages=[question])
    if streamed:
        stream = openai_client.chat.completions.create(stream=True, **params)
        text, calls, finish, chunk_ids = "", {}, None, set()
        for chunk in stream:
            chunk_ids.add(chunk.id)
            choice = chunk.choices[0] if chunk.choices else None
            if choice is None:
                continue
            text += choice.delta.content or ""
            for delta in choice.delta.tool_calls or []:
                entry = calls.setdefault(delta.index, {"id": None, "name": "", "arguments": ""})
                entry["id"] = delta.id or entry["id"]
                if delta.function:
                    entry["name"] += delta.function.name or ""
                    entry["arguments"] += delta.function.arguments or ""
            finish = choice.finish_reason or finish
        assert len(chunk_ids) == 1, chunk_ids
        assert finish == "tool_calls", finish
        assert text == "Checking both.", text
        tool_calls = [{"id": c["id"], "type": "function",
                       "function": {"name": c["name"], "arguments": c["arguments"]}}
                      for _, c in sorted(calls.items())]
        assistant = {"role": "assistant", "content": text, "tool_calls": tool_calls}
    else:
        raw = openai_client.chat.completions.with_raw_response.create(**params)
        check_conversation_header(raw.headers)
        body = json.loads(raw.http_response.text)
        ChatCompletion.model_validate(body)
        completion = raw.parse()
        assert completion.object == "chat.completion", body
        assert completion.id.startswith("chatcmpl-"), body
        choice = completion.choices[0]
        assert choice.finish_reason == "tool_calls", body
        assert choice.message.content == "Checking both.", body
        tool_calls = [c.model_dump(exclude_none=True) for c in choice.message.tool_calls]
        assistant = choice.message.model_dump(exclude_none=True)
    assert [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in tool_calls] == [(one, "get_weather", {"city": "Paris"}),
                                     (two, "get_time", {"tz": "Europe/Paris"})], tool_calls
    seen = model.requests[first]
    assert seen.tool_names() == ["get_weather", "get_time"], seen
    assert seen.stream == streamed, "the upstream streams when the client streams"

    follow = dict(params, messages=[
        question, assistant,
        {"role": "tool", "tool_call_id": one, "content": json.dumps({"temp_c": 21})},
        {"role": "tool", "tool_call_id": two, "content": json.dumps({"time": "14:05"})},
    ])
    if streamed:
        text = "".join(chunk.choices[0].delta.content or ""
                       for chunk in openai_client.chat.completions.create(stream=True, **follow)
                       if chunk.choices)
    else:
        final = openai_client.chat.completions.create(**follow)
        assert final.choices[0].finish_reason == "stop", final
        text = final.choices[0].message.content
    assert text == "Paris: 21 C at 14:05.", text
    results = model.requests[first + 1].tool_results()
    assert [(i, json.loads(t)) for i, t, _ in results] == [
        (one, {"temp_c": 21}), (two, {"time": "14:05"})], results


def scenario_chat_tools(api):
    with harness.gateway(api) as (cordon, model):
        chat_round_trip(cordon, model, streamed=False)
        chat_round_trip(cordon, model, streamed=True)
        assert model.unexpected == []


def scenario_chat_tool_choice(api):
    """`tool_choice` and `parallel_tool_calls` of a Chat client reach the upstream."""
    with harness.gateway(api) as (cordon, model):
        openai_client = client(cordon)
        for choice, expected in [("required", "any"), ("none", "none"),
                                 ({"type": "function", "function": {"name": "get_time"}},
                                  "tool")]:
            model.push(reply("ok"))
            openai_client.chat.completions.create(
                model=MODEL, tools=[WEATHER, TIME], tool_choice=choice,
                parallel_tool_calls=False,
                messages=[{"role": "user", "content": "hi"}])
            kind, name, parallel = harness.upstream_tool_choice(model.requests[-1])
            assert kind == expected, (choice, kind, model.requests[-1])
            if expected == "tool":
                assert name == "get_time", model.requests[-1]
            if expected != "none":
                assert parallel is False, model.requests[-1]


def scenario_chat_errors(api):
    """Bad pairing, bad JSON and bad upstreams come back in OpenAI's error shape."""
    with harness.gateway(api) as (cordon, model):
        openai_client = client(cordon)
        assistant = {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_known", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]}
        question = {"role": "user", "content": "Oslo?"}
        unknown = expect_openai_error(400, lambda: openai_client.chat.completions.create(
            model=MODEL, tools=[WEATHER], messages=[
                question, assistant,
                {"role": "tool", "tool_call_id": "call_known", "content": "1"},
                {"role": "tool", "tool_call_id": "call_nobody_made", "content": "2"}]))
        assert "call_nobody_made" in unknown, unknown
        missing = expect_openai_error(400, lambda: openai_client.chat.completions.create(
            model=MODEL, tools=[WEATHER],
            messages=[question, assistant, {"role": "user", "content": "well?"}]))
        assert "call_known" in missing, missing
        response = httpx.post(cordon.url + "/v1/chat/completions", content=b"{not json",
                              headers={"content-type": "application/json"}, timeout=TIMEOUT)
        assert response.status_code == 400, response.text
        assert set(response.json()["error"]) >= {"message", "type"}, response.text
        check_conversation_header(response.headers)
        assert model.requests == [], "nothing reached the model"
        model.push(harness.error(429, "rate_limit_error", "slow down"))
        message = expect_openai_error(429, lambda: openai_client.chat.completions.create(
            model=MODEL, messages=[question]))
        assert "slow down" in message, message


def scenario_chat_server_tools(api):
    """Operator tools run inline for a Chat client too: it sees only the final answer."""
    with harness.server_tools_gateway(api, [harness.ADD]) as (cordon, model):
        model.push(reply(tool_use("add", {"a": 2, "b": 3}, id="call_add_1")),
                   reply("2 + 3 = 5."))
        completion = client(cordon).chat.completions.create(
            model=MODEL, tools=[WEATHER], messages=[{"role": "user", "content": "2+3?"}])
        choice = completion.choices[0]
        assert choice.message.content == "2 + 3 = 5." and not choice.message.tool_calls, choice
        assert choice.finish_reason == "stop", choice
        assert model.requests[0].tool_names() == ["get_weather", "add"], model.requests[0]
        results = model.requests[1].tool_results()
        assert [(i, json.loads(t)) for i, t, _ in results] == [("call_add_1", {"sum": 5})], \
            results


# --- Responses -----------------------------------------------------------------------------

def responses_round_trip(cordon, model, streamed):
    """Two function calls come back as `function_call` items; the client sends the whole
    conversation back with `function_call_output` items paired by `call_id`."""
    openai_client = client(cordon)
    first = len(model.requests)
    tag = "s" if streamed else "j"
    one, two = f"call_resp_{tag}1", f"call_resp_{tag}2"
    model.push(reply("Checking both.", tool_use("get_weather", {"city": "Paris"}, id=one),
                     tool_use("get_time", {"tz": "Europe/Paris"}, id=two)),
               reply("Paris: 21 C at 14:05."))
    question = {"role": "user", "content": "Weather and time in Paris?"}
    tools = [responses_tool(WEATHER), responses_tool(TIME)]
    params = dict(model=MODEL, tools=tools, input=[question])
    if streamed:
        kinds, response = [], None
        for event in openai_client.responses.create(stream=True, **params):
            kinds.append(event.type)
            if event.type == "response.completed":
                response = event.response
        assert kinds[0] == "response.created" and kinds[-1] == "response.completed", kinds
        assert "response.output_item.added" in kinds, kinds
        assert "response.function_call_arguments.delta" in kinds, kinds
        assert "response.output_text.delta" in kinds, kinds
        assert response is not None, kinds
    else:
        raw = openai_client.responses.with_raw_response.create(**params)
        check_conversation_header(raw.headers)
        body = json.loads(raw.http_response.text)
        Response.model_validate(body)
        response = raw.parse()
        assert response.object == "response" and response.status == "completed", body
        assert response.id.startswith("resp_"), body
    calls = [item for item in response.output if item.type == "function_call"]
    assert [(c.call_id, c.name, json.loads(c.arguments)) for c in calls] == [
        (one, "get_weather", {"city": "Paris"}), (two, "get_time", {"tz": "Europe/Paris"})
    ], response.output
    assert response.output_text == "Checking both.", response.output
    seen = model.requests[first]
    assert seen.tool_names() == ["get_weather", "get_time"], seen
    assert seen.stream == streamed, "the upstream streams when the client streams"

    history = [question] + [item.model_dump(exclude_none=True) for item in response.output]
    history += [{"type": "function_call_output", "call_id": one, "output": '{"temp_c": 21}'},
                {"type": "function_call_output", "call_id": two, "output": '{"time": "14:05"}'}]
    follow = dict(params, input=history)
    if streamed:
        # The SDK's own stream helper, as a client would use it.
        with openai_client.responses.stream(**follow) as stream:
            deltas = [event.delta for event in stream
                      if event.type == "response.output_text.delta"]
            final = stream.get_final_response()
        assert "".join(deltas) == "Paris: 21 C at 14:05.", deltas
    else:
        final = openai_client.responses.create(**follow)
    assert final.output_text == "Paris: 21 C at 14:05.", final
    results = model.requests[first + 1].tool_results()
    assert [(i, json.loads(t)) for i, t, _ in results] == [
        (one, {"temp_c": 21}), (two, {"time": "14:05"})], results


def scenario_responses_tools(api):
    with harness.gateway(api) as (cordon, model):
        responses_round_trip(cordon, model, streamed=False)
        responses_round_trip(cordon, model, streamed=True)
        assert model.unexpected == []


def scenario_responses_previous_response_id(api):
    """`previous_response_id` continues a conversation Cordon kept: the client sends only
    what is new, the upstream still reads everything."""
    with harness.gateway(api) as (cordon, model):
        openai_client = client(cordon)
        tools = [responses_tool(WEATHER)]
        model.push(reply(tool_use("get_weather", {"city": "Oslo"}, id="call_prev_1")),
                   reply("Oslo: 3 C."), reply("Tomorrow too."))
        first = openai_client.responses.create(model=MODEL, tools=tools,
                                               input="Weather in Oslo?")
        call = next(item for item in first.output if item.type == "function_call")
        second = openai_client.responses.create(
            model=MODEL, tools=tools, previous_response_id=first.id,
            input=[{"type": "function_call_output", "call_id": call.call_id,
                    "output": '{"temp_c": 3}'}])
        assert second.output_text == "Oslo: 3 C.", second
        assert second.id != first.id and second.id.startswith("resp_"), second.id
        seen = model.requests[1]
        assert "Weather in Oslo?" in seen.all_text(), seen
        assert [i for i, _, _ in seen.tool_results()] == ["call_prev_1"], seen
        third = openai_client.responses.create(
            model=MODEL, tools=tools, previous_response_id=second.id, input="And tomorrow?")
        assert third.output_text == "Tomorrow too.", third
        text = model.requests[2].all_text()
        for piece in ["Weather in Oslo?", "call_prev_1", "Oslo: 3 C.", "And tomorrow?"]:
            assert piece in text, (piece, text)
        # `store: false` keeps nothing to continue from.
        model.push(reply("not kept"))
        unkept = openai_client.responses.create(model=MODEL, input="hi", store=False)
        message = expect_openai_error(400, lambda: openai_client.responses.create(
            model=MODEL, previous_response_id=unkept.id, input="again"))
        assert unkept.id in message, message
        assert len(model.requests) == 4, model.requests


GATHER = ("import asyncio\n"
          "r = await asyncio.gather(get_weather(city='Paris'), get_weather(city='Oslo'))\n"
          "print('got', r[0]['temp'], r[1])")


def scenario_responses_ptc(api):
    """Programmatic tool calling for a Responses client: `code_interpreter` runs in Cordon's
    sandbox; tools with `allowed_callers: ["programmatic"]` are functions of the program,
    whose calls come back as `function_call` items with `caller: {"type": "program"}`."""
    with harness.gateway(api) as (cordon, model):
        openai_client = client(cordon)
        weather = dict(responses_tool(WEATHER), allowed_callers=["programmatic"])
        tools = [{"type": "code_interpreter", "container": {"type": "auto"}}, weather]
        model.push(reply(tool_use("code_execution", {"code": GATHER}, id="toolu_prog")),
                   reply("Paris is warmer."))
        question = {"role": "user", "content": "Compare Paris and Oslo"}
        raw = openai_client.responses.with_raw_response.create(model=MODEL, tools=tools,
                                                               input=[question])
        body = json.loads(raw.http_response.text)
        Response.model_validate(body)
        first = raw.parse()
        # The model was offered the code tool only: get_weather is the program's.
        assert model.requests[0].tool_names() == ["code_execution"], model.requests[0]
        kinds = [item.type for item in first.output]
        assert kinds == ["code_interpreter_call", "function_call", "function_call"], body
        code_call = first.output[0]
        assert code_call.status == "in_progress" and code_call.code == GATHER, body
        assert code_call.container_id.startswith("container_"), body
        calls = first.output[1:]
        assert [json.loads(c.arguments)["city"] for c in calls] == ["Paris", "Oslo"], body
        for raw_call in body["output"][1:]:
            assert raw_call["caller"] == {"type": "program", "caller_id": code_call.id}, raw_call

        history = [question] + [item.model_dump(exclude_none=True) for item in first.output]
        history += [
            {"type": "function_call_output", "call_id": calls[0].call_id, "output": '{"temp": 21}'},
            {"type": "function_call_output", "call_id": calls[1].call_id, "output": "cold"}]
        final = openai_client.responses.create(model=MODEL, tools=tools, input=history)
        kinds = [item.type for item in final.output]
        assert kinds == ["code_interpreter_call", "message"], final
        done = final.output[0]
        assert done.id == code_call.id and done.status == "completed", done
        assert done.outputs[0].logs == "got 21 cold\n", done
        assert final.output_text == "Paris is warmer.", final
        # The model read the program's output, never the intermediate results.
        seen = model.requests[1].all_text()
        assert "got 21 cold" in seen and calls[0].call_id not in seen, seen


PROGRAM = ("const [a, b] = await Promise.all([get_weather({city: 'Paris'}), "
           "get_weather({city: 'Oslo'})]);\nconsole.log('got', a.temp, b);")


def scenario_responses_ptc_javascript(api):
    """Programmatic tool calling with JavaScript programs: `programmatic_tool_calling` runs
    in Cordon's QuickJS guest; the program's calls are `function_call` items with
    `caller: {"type": "program", "caller_id"}`, its end a `program_output` item."""
    with harness.gateway(api) as (cordon, model):
        openai_client = client(cordon)
        weather = dict(responses_tool(WEATHER), allowed_callers=["programmatic"])
        tools = [{"type": "programmatic_tool_calling"}, weather]
        model.push(reply(tool_use("programmatic_tool_calling", {"code": PROGRAM}, id="toolu_js")),
                   reply("Paris is warmer."))
        question = {"role": "user", "content": "Compare Paris and Oslo"}
        raw = openai_client.responses.with_raw_response.create(model=MODEL, tools=tools,
                                                               input=[question])
        body = json.loads(raw.http_response.text)
        Response.model_validate(body)
        first = raw.parse()
        assert model.requests[0].tool_names() == ["programmatic_tool_calling"], model.requests[0]
        kinds = [item.type for item in first.output]
        assert kinds == ["program", "function_call", "function_call"], body
        program = first.output[0]
        assert program.code == PROGRAM and program.fingerprint.startswith("container_"), body
        calls = first.output[1:]
        assert [json.loads(c.arguments)["city"] for c in calls] == ["Paris", "Oslo"], body
        for call in calls:
            assert call.caller.type == "program", call
            assert call.caller.caller_id == program.call_id, call

        history = [question] + [item.model_dump(exclude_none=True) for item in first.output]
        history += [
            {"type": "function_call_output", "call_id": calls[0].call_id, "output": '{"temp": 21}'},
            {"type": "function_call_output", "call_id": calls[1].call_id, "output": "cold"}]
        final = openai_client.responses.create(model=MODEL, tools=tools, input=history)
        kinds = [item.type for item in final.output]
        assert kinds == ["program_output", "message"], final
        done = final.output[0]
        assert done.call_id == program.call_id and done.status == "completed", done
        assert done.result == "got 21 cold\n", done
        assert final.output_text == "Paris is warmer.", final
        seen = model.requests[1].all_text()
        assert "got 21 cold" in seen and calls[0].call_id not in seen, seen


def scenario_responses_errors(api):
    """Outputs that pair with no call, calls without output, `previous_response_id`:
    400s in OpenAI's shape before anything runs."""
    with harness.gateway(api) as (cordon, model):
        openai_client = client(cordon)
        tools = [responses_tool(WEATHER)]
        question = {"role": "user", "content": "Oslo?"}
        call = {"type": "function_call", "call_id": "call_known", "name": "get_weather",
                "arguments": "{\"city\": \"Oslo\"}"}
        unknown = expect_openai_error(400, lambda: openai_client.responses.create(
            model=MODEL, tools=tools, input=[
                question, call,
                {"type": "function_call_output", "call_id": "call_known", "output": "1"},
                {"type": "function_call_output", "call_id": "call_nobody_made",
                 "output": "2"}]))
        assert "call_nobody_made" in unknown, unknown
        missing = expect_openai_error(400, lambda: openai_client.responses.create(
            model=MODEL, tools=tools, input=[question, call]))
        assert "call_known" in missing, missing
        previous = expect_openai_error(400, lambda: openai_client.responses.create(
            model=MODEL, previous_response_id="resp_earlier", input="and then?"))
        assert "previous_response_id" in previous, previous
        assert model.requests == [], "nothing reached the model"


# --- hosted tools --------------------------------------------------------------------------

def scenario_hosted_tools(api):
    """A vendor's hosted tool reaches an upstream of its own API as it came; to any other
    upstream it is a 400 in the client's error shape naming it, and nothing is sent."""
    search = {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}
    web = {"type": "web_search"}
    question = [{"role": "user", "content": "News about Oslo?"}]
    with harness.gateway(api) as (cordon, model):
        messages_client = cordon.client()
        if api == "anthropic":
            model.push(reply("Searched."))
            message, _, _ = harness.create(messages_client, tools=[harness.WEATHER, search],
                                           messages=question)
            assert message.content[0].text == "Searched.", message
            assert model.requests[-1].body["tools"][1] == search, model.requests[-1]
        else:
            refused = harness.expect_error(400, "invalid_request_error", lambda: harness.create(
                messages_client, tools=[harness.WEATHER, search], messages=question))
            text = refused.body["error"]["message"]
            assert "`web_search_20250305`" in text and "Cordon does not run it" in text, text
            assert model.requests == [], "nothing reached the model"
            model.push(reply("Hello without search."))
            message, _, _ = harness.create(messages_client, tools=[harness.WEATHER],
                                           messages=question)
            assert message.content[0].text == "Hello without search.", message
        sent = len(model.requests)
        responses_client = client(cordon)
        tools = [responses_tool(WEATHER), web]
        if api == "openai-responses":
            model.push(reply("Found."))
            response = responses_client.responses.create(model=MODEL, tools=tools,
                                                         input="News?")
            assert response.output_text == "Found.", response
            assert web in model.requests[-1].body["tools"], model.requests[-1]
        else:
            text = expect_openai_error(400, lambda: responses_client.responses.create(
                model=MODEL, tools=tools, input="News?"))
            assert "tools[1]: tool type `web_search`" in text, text
            assert len(model.requests) == sent, "nothing reached the model"
        assert model.unexpected == []


SCENARIOS = {name[len("scenario_"):]: fn for name, fn in globals().items()
             if name.startswith("scenario_")}


if __name__ == "__main__":
    harness.run_scenarios(SCENARIOS, __doc__)
