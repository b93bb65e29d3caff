"""End-to-end checks of the gateway's streamed replies with the official SDKs streaming:
`anthropic` `messages.stream`, `openai` Chat Completions and Responses with `stream=True`,
through `cordon serve --upstream` against the stand-in model (`standin_model.py`) in any
of the three APIs.

Each streamed turn of the stand-in holds after its first text piece until the client,
having read that piece, releases it: the piece reached the client while the stand-in still
had the rest of its stream to send, so the gateway streamed it (a buffering gateway would
show it only after the stand-in gave up waiting, and `released` would be false).

Usage: python3 gateway_streaming.py SCENARIO --cordon PATH/TO/cordon [--upstream-api API]
"""

import json

import openai

import gateway_anthropic as harness
from gateway_openai import WEATHER, client as openai_client, responses_tool
from standin_model import Hold, reply, tool_use

MODEL = "standin-stream-1"
TEXT = "Streaming, one piece at a time, through the gateway."
QUESTION = [{"role": "user", "content": "Weather in Paris?"}]


def check_hold(hold):
    """The client released the stand-in after its first piece, before its last event."""
    assert hold.released is True, "the first piece reached the client only after the stream"
    assert hold.sent_before < hold.sent_total, (hold.sent_before, hold.sent_total)


def turn_with_hold():
    hold = Hold()
    turn = reply(TEXT, tool_use("get_weather", {"city": "Paris", "units": "metric"},
                                id="toolu_stream_1"), hold=hold)
    return hold, turn


def scenario_anthropic_messages_stream(api):
    with harness.gateway(api) as (cordon, model):
        hold, turn = turn_with_hold()
        model.push(turn)
        client = cordon.client()
        pieces, json_pieces = [], []
        with client.messages.stream(model=MODEL, max_tokens=256, tools=[harness.WEATHER],
                                    messages=QUESTION) as stream:
            harness.check_conversation_header(stream.response.headers)
            for event in stream:
                if event.type == "text":
                    pieces.append(event.text)
                    if hold.released is None:
                        # The stand-in is waiting: its stream is not over.
                        hold.release()
                elif event.type == "input_json":
                    json_pieces.append(event.partial_json)
            message = stream.get_final_message()
        check_hold(hold)
        assert "".join(pieces) == TEXT, pieces
        calls = [b for b in message.content if b.type == "tool_use"]
        assert [(c.id, c.name, c.input) for c in calls] == \
            [("toolu_stream_1", "get_weather", {"city": "Paris", "units": "metric"})], message
        assert json.loads("".join(json_pieces)) == {"city": "Paris", "units": "metric"}
        assert message.stop_reason == "tool_use", message
        assert model.requests[0].stream, "the upstream was asked for a stream"
        assert model.unexpected == []


def scenario_chat_completions_stream(api):
    with harness.gateway(api) as (cordon, model):
        hold, turn = turn_with_hold()
        model.push(turn)
        client = openai_client(cordon)
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL, messages=QUESTION, tools=[WEATHER], stream=True,
            stream_options={"include_usage": True})
        harness.check_conversation_header(raw.headers)
        pieces, arguments, names, finish, usage = [], {}, {}, None, None
        for chunk in raw.parse():
            if chunk.usage is not None:
                usage = chunk.usage
            if not chunk.choices:
                continue
            choice = chunk.choices[0]
            if choice.delta.content:
                pieces.append(choice.delta.content)
                if hold.released is None:
                    hold.release()
            for call in choice.delta.tool_calls or []:
                if call.function and call.function.name:
                    names[call.index] = (call.id, call.function.name)
                arguments[call.index] = arguments.get(call.index, "") + \
                    ((call.function and call.function.arguments) or "")
            finish = choice.finish_reason or finish
        check_hold(hold)
        assert "".join(pieces) == TEXT, pieces
        assert names == {0: ("toolu_stream_1", "get_weather")}, names
        assert json.loads(arguments[0]) == {"city": "Paris", "units": "metric"}, arguments
        assert finish == "tool_calls", finish
        assert usage is not None and usage.prompt_tokens == 10, usage
        assert model.unexpected == []


def scenario_responses_stream(api):
    with harness.gateway(api) as (cordon, model):
        hold, turn = turn_with_hold()
        model.push(turn)
        client = openai_client(cordon)
        raw = client.responses.with_raw_response.create(
            model=MODEL, input="Weather in Paris?", tools=[responses_tool(WEATHER)],
            stream=True)
        harness.check_conversation_header(raw.headers)
        pieces, arguments, kinds, completed = [], "", [], None
        for event in raw.parse():
            kinds.append(event.type)
            if event.type == "response.output_text.delta":
                pieces.append(event.delta)
                if hold.released is None:
                    hold.release()
            elif event.type == "response.function_call_arguments.delta":
                arguments += event.delta
            elif event.type == "response.completed":
                completed = event.response
        check_hold(hold)
        assert kinds[0] == "response.created" and kinds[-1] == "response.completed", kinds
        assert "".join(pieces) == TEXT, pieces
        assert json.loads(arguments) == {"city": "Paris", "units": "metric"}, arguments
        assert completed.output_text == TEXT, completed
        calls = [item for item in completed.output if item.type == "function_call"]
        assert [(c.call_id, c.name) for c in calls] == [("toolu_stream_1", "get_weather")]
        assert model.unexpected == []


def scenario_upstream_failure_before_the_first_byte_keeps_its_status(api):
    """A stream that fails before anything reached the client is an HTTP error, as a
    whole reply's would be."""
    with harness.gateway(api) as (cordon, model):
        model.push(harness.error(529, "overloaded_error", "busy"))
        client = cordon.client()
        try:
            with client.messages.stream(model=MODEL, max_tokens=64, messages=QUESTION) as s:
                s.get_final_message()
        except Exception as e:  # noqa: BLE001 (the SDK's status error, whatever its class)
            status = getattr(e, "status_code", None)
            assert status == 529, (type(e), status, e)
        else:
            raise AssertionError("a failed upstream streamed a reply")
        assert not isinstance(model.requests[0].body, type(None))


SCENARIOS = {name[len("scenario_"):]: fn for name, fn in globals().items()
             if name.startswith("scenario_")}


if __name__ == "__main__":
    assert openai  # the SDK the scenarios drive
    harness.run_scenarios(SCENARIOS, __doc__)
