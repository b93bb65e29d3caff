"""Validate the encoded snapshots against the official SDKs' types.

Run after `UPDATE_SNAPSHOTS=1 cargo test -p cordon-protocol --test all conversation`:
    pip install anthropic openai && python3 harness/protocol/tests/all/check_sdk_shapes.py
"""
import json
import os

from anthropic.types import Message, RawMessageStreamEvent
from anthropic.types.message_create_params import MessageCreateParamsStreaming
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming
from openai.types.responses import Response, ResponseStreamEvent
from openai.types.responses.response_create_params import ResponseCreateParamsStreaming
from pydantic import TypeAdapter

HERE = os.path.dirname(os.path.abspath(__file__))


def load(path):
    with open(os.path.join(HERE, path)) as f:
        return json.load(f)


CHECKS = [
    (MessageCreateParamsStreaming, "snapshots/chat_request_as_anthropic.json"),
    (MessageCreateParamsStreaming, "snapshots/responses_request_as_anthropic.json"),
    (CompletionCreateParamsStreaming, "snapshots/anthropic_request_as_chat.json"),
    (CompletionCreateParamsStreaming, "snapshots/responses_request_as_chat.json"),
    (ResponseCreateParamsStreaming, "snapshots/anthropic_request_as_responses.json"),
    (Message, "snapshots/chat_response_as_anthropic.json"),
    (Message, "snapshots/responses_response_as_anthropic.json"),
    (ChatCompletion, "snapshots/anthropic_response_as_chat.json"),
    (ChatCompletion, "snapshots/responses_response_as_chat.json"),
    (Response, "snapshots/anthropic_response_as_responses.json"),
]
for kind, path in CHECKS:
    TypeAdapter(kind).validate_python(load(path))
for kind, path in [
    (RawMessageStreamEvent, "snapshots/anthropic_stream.json"),
    (ChatCompletionChunk, "snapshots/chat_stream.json"),
    (ResponseStreamEvent, "snapshots/responses_stream.json"),
]:
    for _name, data in load(path):
        if data != "[DONE]":
            TypeAdapter(kind).validate_python(data)
print("all encoded shapes validate against the SDK types")
