"""End-to-end checks of `cordon mcp` with the official MCP Python SDK as the client.

Usage:
  python3 mcp_client.py stdio CORDON_BINARY TOOLS_FILE   # spawns `cordon mcp` itself
  python3 mcp_client.py http URL                          # a running `cordon mcp --http`
Exits non-zero on the first failed check; every call is bounded by a timeout.
"""

import sys

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters

CALL_TIMEOUT = 60


def text_of(result):
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


async def call(client, arguments, **kwargs):
    with anyio.fail_after(CALL_TIMEOUT):
        return await client.call_tool("execute_code", arguments, **kwargs)


async def basics(client):
    tools = await client.list_tools()
    names = [tool.name for tool in tools.tools]
    assert names == ["execute_code"], names
    schema = tools.tools[0].input_schema
    assert schema["required"] == ["code"], schema

    result = await call(client, {"code": "print('hello')\n6 * 7"})
    assert not result.is_error, result
    assert result.structured_content["status"] == "completed", result.structured_content
    assert result.structured_content["result"] == 42
    assert "hello" in text_of(result) and "42" in text_of(result), text_of(result)

    result = await call(client, {"language": "javascript", "code": "console.log('js'); [1, 2].length"})
    assert not result.is_error, result
    assert result.structured_content["stdout"] == "js\n" and result.structured_content["result"] == 2

    # Guest exceptions and limits are results with isError, never JSON-RPC errors.
    result = await call(client, {"code": "raise ValueError('nope')"})
    assert result.is_error and result.structured_content["error"]["type"] == "ValueError", result
    assert "ValueError" in text_of(result)
    result = await call(client, {"code": "b = bytearray(200 * 1024 * 1024)"})
    assert result.is_error and result.structured_content["limit"] == "memory", result.structured_content
    assert "limit exceeded: memory" in text_of(result), text_of(result)

    # Sessions keep variables, per session id.
    await call(client, {"code": "counter = 41", "session_id": "s1"})
    result = await call(client, {"code": "counter + 1", "session_id": "s1"})
    assert result.structured_content["result"] == 42, result.structured_content
    result = await call(client, {"code": "'counter' in globals()", "session_id": "s2"})
    assert result.structured_content["result"] is False, result.structured_content
    result = await call(client, {"language": "javascript", "code": "1", "session_id": "s1"})
    assert result.is_error and "session" in text_of(result), text_of(result)

    # Declared host tools are callable from the code.
    result = await call(client, {"code": "r = await get_weather(city='Oslo')\nr['temp_c']"})
    assert result.structured_content["result"] == 21, result.structured_content


async def progress_and_cancel(client):
    updates = []

    async def on_progress(progress, total, message):
        updates.append((progress, message))

    result = await call(
        client, {"code": "import time\ntime.sleep(2.5)\n'slept'"}, progress_callback=on_progress
    )
    assert result.structured_content["result"] == "slept", result.structured_content
    assert updates and "running for" in (updates[0][1] or ""), updates

    # Cancelling the call stops the execution: the session's next call, which waits for
    # the instance, then completes (the loop alone would run for minutes).
    await call(client, {"code": "marker = 1", "session_id": "loop"})
    with anyio.move_on_after(1.5):
        await client.call_tool("execute_code", {"code": "while True: pass", "session_id": "loop"})
        raise AssertionError("the infinite loop returned")
    result = await call(client, {"code": "'marker' in globals()", "session_id": "loop"})
    # A cancelled execution discards the instance, so the session starts afresh.
    assert result.structured_content["result"] is False, result.structured_content


APPROVAL_CODE = """
import tools
try:
    r = await transfer(amount=5)
except tools.ToolError as e:
    r = 'refused: ' + e.kind
r
"""


async def approvals(binary, tools_file):
    asked = []

    async def approve(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    async def decline(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="decline")

    for callback, expected in [(approve, {"ok": True}), (decline, "refused: denied")]:
        async with Client(server(binary, tools_file), mode="legacy", elicitation_callback=callback) as client:
            result = await call(client, {"code": APPROVAL_CODE})
            assert result.structured_content["result"] == expected, result.structured_content
    assert len(asked) == 2 and "transfer" in asked[0], asked

    # Without elicitation support the call is refused, and the result says why.
    async with Client(server(binary, tools_file), mode="legacy") as client:
        result = await call(client, {"code": APPROVAL_CODE})
        assert result.structured_content["result"] == "refused: denied", result.structured_content
        assert "elicitation" in text_of(result), text_of(result)


CONNECTED_CODE = """
import tools
total = (await calc.add(a=2, b=3))["result"]     # the server's structuredContent
rows = (await calc.table(rows=2000))["result"]   # stays in the sandbox
try:
    await calc.fail(reason="nope")
    failed = None
except tools.ToolError as e:
    failed = e.kind
try:
    await calc.add(a="two", b=3)                  # checked against the server's schema
    invalid = None
except tools.ToolError as e:
    invalid = e.kind
[total, len(rows), sum(r["square"] for r in rows), failed, invalid]
"""


async def connected(binary):
    """`--connect`: a real MCP server's tools callable from sandbox code."""
    here = __file__.rsplit("/", 1)[0]
    params = StdioServerParameters(
        command=binary, args=["mcp", "--connect", f"calc=python3 {here}/mcp_tools_server.py"]
    )
    async with Client(params, mode="legacy") as client:
        tools = await client.list_tools()
        assert "calc.add" in tools.tools[0].description, tools.tools[0].description
        result = await call(client, {"code": CONNECTED_CODE})
        assert not result.is_error, text_of(result)
        total, count, squares, failed, invalid = result.structured_content["result"]
        assert (total, count, failed, invalid) == (5, 2000, "tool_failed", "invalid_input"), result.structured_content
        assert squares == sum(i * i for i in range(2000))
        calls = result.structured_content["tool_calls"]
        assert [c["name"] for c in calls][:2] == ["calc.add", "calc.table"], calls


def server(binary, tools_file):
    return StdioServerParameters(
        command=binary,
        args=["mcp", "--tools", tools_file, "--cpu-ms", "60000", "--timeout-ms", "120000", "--memory-mb", "64"],
    )


async def main_stdio(binary, tools_file):
    for mode in ["legacy", "auto"]:
        async with Client(server(binary, tools_file), mode=mode) as client:
            assert client.protocol_version == "2025-11-25", client.protocol_version
            await basics(client)
            if mode == "legacy":
                await progress_and_cancel(client)
    await approvals(binary, tools_file)
    await connected(binary)


async def main_http(url):
    async with Client(url, mode="legacy") as client:
        tools = await client.list_tools()
        assert [tool.name for tool in tools.tools] == ["execute_code"]
        result = await call(client, {"code": "print('over http')\n1 + 1"})
        assert not result.is_error and result.structured_content["result"] == 2, result
        await call(client, {"code": "v = 'kept'", "session_id": "h"})
        result = await call(client, {"code": "v", "session_id": "h"})
        assert result.structured_content["result"] == "kept", result.structured_content
        result = await call(client, {"language": "js", "code": "throw new Error('boom')"})
        assert result.is_error and "boom" in text_of(result), text_of(result)
        # Another client (another MCP session) has its own session ids.
        async with Client(url, mode="legacy") as other:
            result = await call(other, {"code": "'v' in globals()", "session_id": "h"})
            assert result.structured_content["result"] is False, result.structured_content

    # Approvals become elicitation requests over HTTP too; `auto` negotiates 2025-11-25.
    async def approve(context, params):
        return types.ElicitResult(action="accept", content={"approve": True})

    async with Client(url, mode="auto", elicitation_callback=approve) as client:
        assert client.protocol_version == "2025-11-25", client.protocol_version
        result = await call(client, {"code": APPROVAL_CODE})
        assert result.structured_content["result"] == {"ok": True}, result.structured_content


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        anyio.run(main_stdio, sys.argv[2], sys.argv[3])
    else:
        anyio.run(main_http, sys.argv[2])
    print(f"ok mcp {sys.argv[1]}")
