"""End-to-end check that a sandbox cannot loosen the operator's policy of a connected MCP
tool by declaring it under another name: `cordon serve --connect calc=… --connect-policy
calc=deny`, then a sandbox created over the HTTP API (no token) declares `alias` with the
handler `{"kind": "mcp", "server": "calc", "tool": "add"}` and policy `allow`.

Usage: python3 connect_alias.py BASE_URL
"""

import sys

from http_api import check_error, client, create_sandbox, streamed_execution

ALIAS = {"name": "alias", "policy": "allow",
         "handler": {"kind": "mcp", "server": "calc", "tool": "add"}}
CODE = (
    "import tools\n"
    "out = []\n"
    "for call in (lambda: alias(a=1, b=2), lambda: calc.add(a=1, b=2)):\n"
    "    try:\n        out.append(await call())\n"
    "    except tools.ToolError as e:\n        out.append('refused: ' + e.kind)\n"
    "out"
)


def main(base):
    http = client(base)
    sandbox = create_sandbox(http, tools=[ALIAS])
    with streamed_execution(http, sandbox, CODE) as (_, stream):
        events = list(stream)
    assert not any(kind == "tool.call" for _, kind, _ in events), events
    result = events[-1][2]
    assert result["status"] == "completed", result
    assert result["result"] == ["refused: denied", "refused: denied"], result
    # A tool the server does not list has no operator policy to inherit: refused.
    hidden = {"name": "hidden", "handler": {"kind": "mcp", "server": "calc", "tool": "drop_all"}}
    body = check_error(
        http.post("/v1/sandboxes", json={"language": "python", "tools": [hidden]}),
        422, "invalid_tools",
    )
    assert "does not offer" in body["message"], body
    # The server keeps serving.
    sandbox = create_sandbox(http)
    with streamed_execution(http, sandbox, "1 + 1") as (_, stream):
        result = list(stream)[-1][2]
    assert result["status"] == "completed" and result["result"] == 2, result


if __name__ == "__main__":
    main(*sys.argv[1:])
    print("ok connect_alias")
