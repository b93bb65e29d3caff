"""End-to-end checks of `cordon mcp` with the official MCP Python SDK as the client.

Usage:
  python3 mcp_client.py stdio CORDON_BINARY TOOLS_FILE   # spawns `cordon mcp` itself
  python3 mcp_client.py http URL PAGE_PORT                # a running `cordon mcp --http
                                                          # --allow-origin http://127.0.0.1:PAGE_PORT`
Exits non-zero on the first failed check; every call is bounded by a timeout.
"""

import base64
import json
import os
import shutil
import socket
import sys
import tempfile

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters

from pages import BUY, DISPLAY, GO, serve_page

CALL_TIMEOUT = 60


def text_of(result):
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


async def call(client, arguments, **kwargs):
    with anyio.fail_after(CALL_TIMEOUT):
        return await client.call_tool("execute_code", arguments, **kwargs)


async def tool(client, name, arguments):
    with anyio.fail_after(CALL_TIMEOUT):
        return await client.call_tool(name, arguments)


TOOLS = ["execute_code", "computer_open", "computer", "computer_close"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def image_of(result):
    images = [block for block in result.content if getattr(block, "type", "") == "image"]
    assert len(images) == 1, result.content
    assert images[0].mime_type == "image/png", images[0]
    data = base64.b64decode(images[0].data)
    assert data.startswith(PNG_MAGIC)
    return data


def elicitation_answers():
    """(asked, approve, decline): elicitation callbacks that accept or decline every
    request, and the list of the messages they were asked with."""
    asked = []

    async def approve(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    async def decline(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="decline")

    return asked, approve, decline


async def open_page(client, page):
    result = await tool(client, "computer_open", {"url": page, "display": DISPLAY})
    assert not result.is_error, text_of(result)
    image_of(result)
    computer = result.structured_content["id"]
    assert f"id: {computer}" in text_of(result), text_of(result)
    assert result.structured_content["display"] == {"width": 1024, "height": 640}, result.structured_content
    assert result.structured_content["current_url"] == page, result.structured_content
    return computer


async def computers(client):
    """computer_open / computer / computer_close with a real browser on a local page."""
    with serve_page() as page:
        computer = await open_page(client, page)
        result = await tool(client, "computer", {"id": computer, "action": "left_click", "coordinate": GO})
        assert not result.is_error, text_of(result)
        image_of(result)
        assert f"current_url: {page}#clicked" in text_of(result), text_of(result)
        assert result.structured_content["status"] == "ok", result.structured_content
        assert "data" not in result.structured_content["screenshot"], result.structured_content
        # The nested form works too.
        result = await tool(client, "computer", {"id": computer, "action": {"action": "screenshot"}})
        assert not result.is_error, text_of(result)
        # What the model can fix is an isError result, not a JSON-RPC error.
        for arguments, needle in [
            ({"id": computer, "action": "fly"}, "unknown action `fly`"),
            ({"id": computer, "action": "left_click", "coordinate": [5000, 5]}, "outside the screen"),
            ({"id": computer, "action": "left_click", "coordinate": "here"}, "coordinate"),
            ({"id": "cmp_nope", "action": "screenshot"}, "no open browser"),
            ({"action": "screenshot"}, "`id` is required"),
        ]:
            result = await tool(client, "computer", arguments)
            assert result.is_error and needle in text_of(result), (arguments, text_of(result))
        result = await tool(client, "computer_open", {"url": page, "dpr": 3})
        assert result.is_error and "dpr" in text_of(result), text_of(result)
        result = await tool(client, "computer_open", {"url": page, "rules": []})
        assert result.is_error, text_of(result)
        # `exact_dpr` keeps the page's devicePixelRatio at `dpr` (the page writes it into
        # its URL fragment).
        dpr_page = page.replace("/page", "/dpr")
        result = await tool(client, "computer_open", {"url": dpr_page, "display": DISPLAY, "exact_dpr": True})
        assert not result.is_error, text_of(result)
        assert result.structured_content["current_url"] == dpr_page + "#dpr=1", result.structured_content
        await tool(client, "computer_close", {"id": result.structured_content["id"]})
        result = await tool(client, "computer_close", {"id": computer})
        assert not result.is_error and "closed" in text_of(result), text_of(result)
        result = await tool(client, "computer", {"id": computer, "action": "screenshot"})
        assert result.is_error and "no open browser" in text_of(result), text_of(result)


async def computer_approvals(binary, tools_file):
    """`ask` rules on computer actions: elicitation when the client supports it."""
    asked, approve, decline = elicitation_answers()

    with serve_page() as page:
        buy = {"action": "left_click", "coordinate": BUY}
        async with Client(server(binary, tools_file), mode="legacy", elicitation_callback=approve) as client:
            computer = await open_page(client, page)
            result = await tool(client, "computer", {"id": computer, **buy})
            assert not result.is_error, text_of(result)
            assert f"current_url: {page}#bought" in text_of(result), text_of(result)
            assert result.structured_content["resolves"], result.structured_content
        async with Client(server(binary, tools_file), mode="legacy", elicitation_callback=decline) as client:
            computer = await open_page(client, page)
            result = await tool(client, "computer", {"id": computer, **buy})
            assert result.is_error and "status: denied" in text_of(result), text_of(result)
            assert f"current_url: {page}\n" in text_of(result) + "\n", text_of(result)
        assert len(asked) == 2 and "Buy now" in asked[0] and "high-impact-button" in asked[0], asked
        # Without elicitation nobody can be asked: refused, and the result says why.
        async with Client(server(binary, tools_file), mode="legacy") as client:
            computer = await open_page(client, page)
            result = await tool(client, "computer", {"id": computer, **buy})
            assert result.is_error and "[refused]" in text_of(result), text_of(result)
            assert "elicitation" in text_of(result), text_of(result)

        # A call cancelled while the user is asked denies the step: the session is not left
        # waiting for a decision these tools cannot make.
        async def never(context, params):
            await anyio.sleep_forever()

        async with Client(server(binary, tools_file), mode="legacy", elicitation_callback=never) as client:
            computer = await open_page(client, page)
            with anyio.move_on_after(5) as scope:
                await client.call_tool("computer", {"id": computer, **buy})
            assert scope.cancelled_caught, "the elicitation was answered"
            # The denial runs as soon as the call is dropped; give it a moment to land.
            for _ in range(50):
                result = await tool(client, "computer", {"id": computer, "action": "screenshot"})
                if not result.is_error:
                    break
                assert "waits for approval" in text_of(result), text_of(result)
                await anyio.sleep(0.1)
            assert not result.is_error, text_of(result)
            assert f"current_url: {page}\n" in text_of(result) + "\n", text_of(result)


async def basics(client):
    tools = await client.list_tools()
    names = [tool.name for tool in tools.tools]
    assert names == TOOLS, names
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
    asked, approve, decline = elicitation_answers()

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


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def page_origin():
    return f"http://127.0.0.1:{os.environ['CORDON_E2E_PAGE_PORT']}"


def server(binary, tools_file, *extra, operator_allows_page=True):
    """`cordon mcp` on stdio. The test page is on loopback, a private network: the operator
    names its origin (`--allow-origin`, which also spares computer_open the new-origin
    question); CI runs as root, so Chromium's sandbox is opted out of explicitly."""
    allow = ["--allow-origin", page_origin()] if operator_allows_page else ["--allow-private-network"]
    return StdioServerParameters(
        command=binary,
        args=["mcp", "--tools", tools_file, "--cpu-ms", "60000", "--timeout-ms", "120000", "--memory-mb", "128",
              "--no-browser-sandbox", *allow, *extra],
    )


async def open_gate(binary, tools_file):
    """computer_open passes the approval gate like a navigation: a new origin the operator
    did not name asks the user, and without elicitation nobody can be asked."""
    asked, approve, decline = elicitation_answers()
    with serve_page() as page:
        async with Client(server(binary, tools_file, operator_allows_page=False), mode="legacy") as client:
            result = await tool(client, "computer_open", {"url": page, "display": DISPLAY})
            assert result.is_error and "[refused]" in text_of(result), text_of(result)
            assert "elicitation" in text_of(result) and "new-origin" in text_of(result), text_of(result)
        async with Client(server(binary, tools_file, operator_allows_page=False), mode="legacy",
                          elicitation_callback=decline) as client:
            result = await tool(client, "computer_open", {"url": page, "display": DISPLAY})
            assert result.is_error and "declined" in text_of(result), text_of(result)
        async with Client(server(binary, tools_file, operator_allows_page=False), mode="legacy",
                          elicitation_callback=approve) as client:
            computer = await open_page(client, page)
            await tool(client, "computer_close", {"id": computer})
        assert len(asked) == 2 and page in asked[0], asked
        # Private networks stay off limits however the model spells the address.
        async with Client(server(binary, tools_file), mode="legacy") as client:
            port = os.environ["CORDON_E2E_PAGE_PORT"]
            for url in [f"http://localhost:{int(port) + 1}/", "http://169.254.169.254/latest/meta-data/"]:
                result = await tool(client, "computer_open", {"url": url, "display": DISPLAY})
                assert result.is_error and "private-network" in text_of(result), (url, text_of(result))
                # Naming it in the model's own allow_origins does not open it either.
                origin = url.split("/latest")[0].rstrip("/")
                result = await tool(client, "computer_open",
                                    {"url": url, "display": DISPLAY, "allow_origins": [origin]})
                assert result.is_error and "private-network" in text_of(result), (url, text_of(result))


def recorded_trajectories(root):
    """`--trajectories`: each computer session wrote its steps and screenshots."""
    sessions = sorted(os.listdir(root))
    # `computers` opened two: the one it drives and the exact-DPR one (only opened).
    assert len(sessions) == 2 and all(s.startswith("cmp_") for s in sessions), sessions
    recorded = []
    for name in sessions:
        with open(os.path.join(root, name, "steps.jsonl")) as f:
            recorded.append((len(f.readlines()), name))
    session = os.path.join(root, max(recorded)[1])
    with open(os.path.join(session, "steps.jsonl")) as f:
        steps = [json.loads(line) for line in f]
    # open (screenshot), the click, the nested screenshot, then the model's mistakes
    assert len(steps) >= 3, steps
    shots = [name for name in os.listdir(session) if name.endswith(".png")]
    assert len(shots) >= 3, shots


async def main_stdio(binary, tools_file):
    trajectories = tempfile.mkdtemp(prefix="cordon-mcp-trajectories-")
    for mode in ["legacy", "auto"]:
        extra = ["--trajectories", trajectories] if mode == "legacy" else []
        async with Client(server(binary, tools_file, *extra), mode=mode) as client:
            assert client.protocol_version == "2025-11-25", client.protocol_version
            await basics(client)
            if mode == "legacy":
                await progress_and_cancel(client)
                await computers(client)
                recorded_trajectories(trajectories)
                shutil.rmtree(trajectories)
    await approvals(binary, tools_file)
    await computer_approvals(binary, tools_file)
    await open_gate(binary, tools_file)
    await connected(binary)


async def main_http(url):
    async with Client(url, mode="legacy") as client:
        tools = await client.list_tools()
        assert [tool.name for tool in tools.tools] == TOOLS
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
        await computers(client)
        # Computer approvals are elicitations over HTTP too; sessions are per connection.
        with serve_page() as page:
            computer = await open_page(client, page)
            result = await tool(client, "computer", {"id": computer, "action": "left_click", "coordinate": BUY})
            assert not result.is_error and "#bought" in text_of(result), text_of(result)
            async with Client(url, mode="legacy") as other:
                result = await tool(other, "computer", {"id": computer, "action": "screenshot"})
                assert result.is_error and "no open browser" in text_of(result), text_of(result)


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        os.environ.setdefault("CORDON_E2E_PAGE_PORT", str(free_port()))
        anyio.run(main_stdio, sys.argv[2], sys.argv[3])
    else:
        # The server was started with `--allow-origin http://127.0.0.1:PAGE_PORT`.
        os.environ["CORDON_E2E_PAGE_PORT"] = sys.argv[3]
        anyio.run(main_http, sys.argv[2])
    print(f"ok mcp {sys.argv[1]}")
