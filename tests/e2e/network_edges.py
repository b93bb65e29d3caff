"""End-to-end checks of the network edges of `cordon serve` and `cordon mcp --http`:
the Host/Origin guard (DNS rebinding, cross-site requests), client-declared host tools
without a token, and the policy of connected MCP servers' tools.

Usage: python3 network_edges.py SCENARIO BASE_URL [ARGS...]
Every request goes to the loopback server under test and has a timeout.
"""

import sys
from urllib.parse import urlsplit

import httpx

from http_api import check_error, client, create_sandbox, streamed_execution, wait_for

SANDBOX = {"language": "python"}
COMMAND_TOOL = {"name": "host_echo", "handler": {"kind": "command", "argv": ["cat"]}}
HTTP_TOOL = {"name": "host_post", "handler": {"kind": "http", "url": "http://127.0.0.1:9/x"}}


def port_of(base):
    return urlsplit(base).port


def scenario_guard(base):
    """Default `cordon serve`: only its own names, only its own pages."""
    http = client(base)
    port = port_of(base)
    # DNS rebinding: the page's name resolves to 127.0.0.1, the request names the page.
    for host in [f"rebind.attacker.example:{port}", "rebind.attacker.example", f"localhost:{port + 1}"]:
        body = check_error(
            http.post("/v1/sandboxes", json=SANDBOX, headers={"Host": host}), 403, "forbidden_host"
        )
        assert "--allow-host" in body["message"], body
    # Every route is behind the guard: OpenAPI, SSE, computers, unknown routes; and it
    # answers before the body is read (this one is not even JSON).
    for method, path in [
        ("GET", "/openapi.json"),
        ("GET", "/v1/executions/exe_x/events"),
        ("POST", "/v1/computers"),
        ("GET", "/nowhere"),
    ]:
        response = http.request(method, path, headers={"Host": "attacker.example"}, content=b"{not json")
        check_error(response, 403, "forbidden_host")
    # A page of another site posting to the loopback address.
    for origin in ["http://attacker.example", f"http://attacker.example:{port}", "null",
                   f"http://localhost:{port + 1}"]:
        body = check_error(
            http.post("/v1/sandboxes", json=SANDBOX, headers={"Origin": origin}), 403, "forbidden_origin"
        )
        assert "--allow-host" in body["message"], body
    # The server's own names and pages pass.
    for headers in [
        {"Origin": f"http://localhost:{port}"},
        {"Origin": f"http://127.0.0.1:{port}"},
        {"Host": f"localhost:{port}"},
        {"Host": "localhost"},
        {"Host": f"[::1]:{port}"},
    ]:
        response = http.post("/v1/sandboxes", json=SANDBOX, headers=headers)
        assert response.status_code == 201, (headers, response.text)


def scenario_allow_host(base, name):
    """`--allow-host NAME`: NAME is served too, nothing else is."""
    http = client(base)
    port = port_of(base)
    for headers in [
        {"Host": name},
        {"Host": f"{name}:{port}"},
        {"Host": f"{name}:{port}", "Origin": f"https://{name}"},
        {"Origin": f"http://{name}:{port}"},
    ]:
        response = http.post("/v1/sandboxes", json=SANDBOX, headers=headers)
        assert response.status_code == 201, (headers, response.text)
    check_error(http.post("/v1/sandboxes", json=SANDBOX, headers={"Host": f"x.{name}"}), 403, "forbidden_host")
    check_error(
        http.post("/v1/sandboxes", json=SANDBOX, headers={"Origin": f"http://x.{name}"}), 403, "forbidden_origin"
    )


def scenario_host_tools_refused(base):
    """No --token, no --allow-host-tools: `command` and `http` tools are refused."""
    http = client(base)
    for tool, kind in [(COMMAND_TOOL, "command"), (HTTP_TOOL, "http")]:
        body = check_error(
            http.post("/v1/sandboxes", json={**SANDBOX, "tools": [tool]}), 422, "host_tools_refused"
        )
        message = body["message"]
        assert "--allow-host-tools" in message and "--token" in message and f"`{kind}`" in message, body
    # Other handler kinds need nothing.
    create_sandbox(http, tools=[{"name": "fixed", "handler": {"kind": "static", "result": 1}},
                                {"name": "ask_me", "handler": {"kind": "client"}}])


def scenario_host_tools_accepted(base, token=None):
    """--allow-host-tools, or --token: `command` tools are accepted and run."""
    http = client(base, token)
    sandbox = create_sandbox(http, tools=[COMMAND_TOOL, HTTP_TOOL])
    with streamed_execution(http, sandbox, "(await host_echo(text='hi'))['text']") as (_, events):
        result = list(events)[-1][2]
    assert result["status"] == "completed" and result["result"] == "hi", result


def scenario_connect_policy(base):
    """`--connect calc=… --connect-policy calc=ask`: connected tools ask first; a client
    declaration of the same name can make one stricter; one with another handler is refused."""
    http = client(base)
    code = (
        "import tools\n"
        "try:\n    r = await calc.add(a=1, b=2)\nexcept tools.ToolError as e:\n    r = 'refused: ' + e.kind\n"
        "try:\n    t = await calc.table(rows=2)\nexcept tools.ToolError as e:\n    t = 'refused: ' + e.kind\n"
        "[r, t]"
    )
    stricter = {"name": "calc.table", "policy": "deny",
                "handler": {"kind": "mcp", "server": "calc", "tool": "table"}}
    sandbox = create_sandbox(http, tools=[stricter])
    with streamed_execution(http, sandbox, code) as (_, stream):
        seen = wait_for(stream, "approval.required")
        approval = seen[-1][2]
        assert approval["tool"] == "calc.add", approval
        decided = http.post(f"/v1/approvals/{approval['approval_id']}", json={"decision": "approve"})
        assert decided.status_code == 200, decided.text
        result = list(stream)[-1][2]
    assert result["status"] == "completed", result
    assert result["result"] == [{"result": 3}, "refused: denied"], result
    clash = {**SANDBOX, "tools": [{"name": "calc.add", "handler": {"kind": "static", "result": 1}}]}
    body = check_error(http.post("/v1/sandboxes", json=clash), 422, "invalid_tools")
    assert '{"kind":"mcp","server":"calc","tool":"add"}' in body["message"], body


def scenario_mcp_guard(url):
    """`cordon mcp --http`: the same guard in front of Streamable HTTP."""
    port = port_of(url)
    initialize = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "edges", "version": "1"}},
    }
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    with httpx.Client(timeout=httpx.Timeout(30.0)) as http:
        for extra, error_type in [
            ({"Origin": "http://attacker.example"}, "forbidden_origin"),
            ({"Origin": f"http://localhost:{port + 1}"}, "forbidden_origin"),
            ({"Host": f"rebind.attacker.example:{port}"}, "forbidden_host"),
        ]:
            response = http.post(url, json=initialize, headers={**headers, **extra})
            check_error(response, 403, error_type)
        response = http.post(url, json=initialize, headers={**headers, "Origin": f"http://localhost:{port}"})
        assert response.status_code == 200, (response.status_code, response.text)


SCENARIOS = {
    "guard": scenario_guard,
    "allow_host": scenario_allow_host,
    "host_tools_refused": scenario_host_tools_refused,
    "host_tools_accepted": scenario_host_tools_accepted,
    "connect_policy": scenario_connect_policy,
    "mcp_guard": scenario_mcp_guard,
}

if __name__ == "__main__":
    SCENARIOS[sys.argv[1]](*sys.argv[2:])
    print(f"ok {sys.argv[1]}")
