"""End-to-end checks of sandbox files: the HTTP API with httpx, `execute_code` with the
official MCP Python SDK.

Usage:
  python3 files.py http BASE_URL          # a running `cordon serve`
  python3 files.py mcp CORDON_BINARY      # spawns `cordon mcp` itself (stdio)
Exits non-zero on the first failed check; every request is bounded by a timeout.
"""

import base64
import json
import sys

import os
import tempfile

import anyio
import httpx
import mcp_types as types
from mcp import Client, StdioServerParameters
from serve_http import run

SALES = "city,amount\nParis,3\nOslo,4\nParis,5\n"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# Polls of 50 ms one execution may take here: 30 s, this script's bound per execution.
RUN_POLLS = 600

# Reads the CSV with `csv`, writes JSON and a PNG (by pure Python: struct + zlib).
REPORT = r'''
import csv, json, os, struct, zlib
totals = {}
with open("data/sales.csv", newline="") as f:
    for row in csv.DictReader(f):
        totals[row["city"]] = totals.get(row["city"], 0) + int(row["amount"])
os.makedirs("out", exist_ok=True)
with open("out/totals.json", "w") as f:
    json.dump(totals, f, sort_keys=True)
def chunk(kind, data):
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xffffffff)
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)) \
    + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b"")
with open("out/chart.png", "wb") as f:
    f.write(png)
sorted(totals.items())
'''


def check_error(response, status, error_type):
    assert response.status_code == status, (response.status_code, response.text)
    body = response.json()
    assert body["type"] == error_type, body
    assert body["message"], body


def http_scenario(base):
    with httpx.Client(base_url=base, timeout=httpx.Timeout(30.0)) as http:
        # Workspaces live in the server's memory: a sandbox cannot ask for more than 1 GiB.
        check_error(http.post("/v1/sandboxes", json={"language": "python", "limits": {"workspace_bytes": 2 << 30}}),
                    422, "invalid_request")
        for stateful in (False, True):
            created = http.post("/v1/sandboxes", json={
                "language": "python", "stateful": stateful,
                "limits": {"workspace_bytes": 4096, "workspace_files": 10},
            })
            assert created.status_code == 201, created.text
            sandbox = created.json()["id"]
            files = f"/v1/sandboxes/{sandbox}/files"

            # Upload, run, download.
            put = http.put(f"{files}/data/sales.csv", content=SALES.encode())
            assert put.status_code == 201, put.text
            assert put.json()["path"] == "data/sales.csv" and put.json()["size"] == len(SALES), put.json()
            result = run(http, sandbox, REPORT, polls=RUN_POLLS)
            assert result["status"] == "completed", result
            assert result["result"] == [["Oslo", 4], ["Paris", 8]], result
            totals = http.get(f"{files}/out/totals.json")
            assert totals.status_code == 200, totals.text
            assert totals.headers["content-type"] == "application/json", totals.headers
            assert totals.json() == {"Oslo": 4, "Paris": 8}, totals.text
            chart = http.get(f"{files}/out/chart.png")
            assert chart.headers["content-type"] == "image/png", chart.headers
            assert chart.content.startswith(PNG_MAGIC), chart.content
            listing = http.get(files).json()
            assert [f["path"] for f in listing["files"]] == ["data/sales.csv", "out/chart.png", "out/totals.json"], listing
            assert all(f["modified"].endswith("Z") for f in listing["files"]), listing
            assert listing["workspace_bytes"] == 4096 and listing["workspace_files"] == 10, listing

            # The files stay for the next execution, stateless or not.
            again = run(http, sandbox, "import os\nsorted(os.listdir('out'))", polls=RUN_POLLS)
            assert again["result"] == ["chart.png", "totals.json"], again

            # Traversal in the path is a 400 (httpx would normalise `..`, so it is encoded).
            for bad in ["%2E%2E/etc/passwd", "a/%2E%2E/%2E%2E/x", "%2Fetc%2Fpasswd", "a//b"]:
                check_error(http.put(f"{files}/{bad}", content=b"x"), 400, "invalid_path")
                check_error(http.get(f"{files}/{bad}"), 400, "invalid_path")
            check_error(http.get(f"{files}/missing.txt"), 404, "not_found")

            # Quotas: bytes, then entries (the sandbox holds 3 files in 2 directories).
            check_error(http.put(f"{files}/big.bin", content=b"x" * 5000), 413, "workspace_quota")
            for i in range(5):
                assert http.put(f"{files}/n{i}", content=b"").status_code == 201
            check_error(http.put(f"{files}/one-too-many", content=b""), 413, "workspace_quota")

            # Over quota from inside: an OSError, and the execution goes on.
            over = run(http, sandbox, "try:\n    with open('n0', 'wb') as f:\n        f.write(b'x' * 5000)\n    r = 'stored'\n"
                                      "except OSError as e:\n    r = e.errno\nr", polls=RUN_POLLS)
            assert over["status"] == "completed" and over["result"] == 51, over  # ENOSPC

            assert http.delete(f"{files}/out").status_code == 204
            assert [f["path"] for f in http.get(files).json()["files"]][:1] == ["data/sales.csv"]
            check_error(http.delete(f"{files}/out"), 404, "not_found")
            assert http.delete(f"/v1/sandboxes/{sandbox}").status_code == 204
            check_error(http.get(files), 404, "not_found")


def text_of(result):
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


async def mcp_scenario(binary):
    params = StdioServerParameters(command=binary, args=["mcp", "--no-computer"])
    async with Client(params, mode="legacy") as client:
        with anyio.fail_after(60):
            result = await client.call_tool("execute_code", {
                "code": REPORT,
                "files": {"data/sales.csv": {"base64": base64.b64encode(SALES.encode()).decode()}},
            })
        assert not result.is_error, text_of(result)
        assert result.structured_content["result"] == [["Oslo", 4], ["Paris", 8]], result.structured_content
        written = {f["path"]: f for f in result.structured_content["files"]}
        assert set(written) == {"out/totals.json", "out/chart.png"}, written
        assert written["out/chart.png"]["inline"] == "image", written
        text = text_of(result)
        assert "/workspace/out/totals.json" in text and '{"Oslo": 4, "Paris": 8}' in text, text
        images = [block for block in result.content if getattr(block, "type", "") == "image"]
        assert len(images) == 1 and images[0].mime_type == "image/png", result.content
        assert base64.b64decode(images[0].data).startswith(PNG_MAGIC)

        # Text files, and a session keeps its files between calls.
        with anyio.fail_after(60):
            first = await client.call_tool("execute_code", {
                "code": "open('note.txt').read()", "session_id": "s", "files": {"note.txt": "hello"},
            })
            second = await client.call_tool("execute_code", {
                "code": "open('note.txt', 'a').write(' again')\nopen('note.txt').read()", "session_id": "s",
            })
            escape = await client.call_tool("execute_code", {"files": {"../x": "no"}, "code": "1"})
        assert first.structured_content["result"] == "hello", first.structured_content
        assert second.structured_content["result"] == "hello again", second.structured_content
        assert [f["path"] for f in second.structured_content["files"]] == ["note.txt"]
        assert escape.is_error and "invalid workspace path" in text_of(escape), text_of(escape)


async def mcp_user_ask(binary):
    """`user_ask` (the tool pack) becomes an elicitation to the client's user."""
    asked = []

    async def answer(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"answer": "blue"})

    with tempfile.TemporaryDirectory() as folder:
        tools = os.path.join(folder, "tools.json")
        with open(tools, "w") as f:
            json.dump({"tools": [{"pack": "user_ask"}]}, f)
        params = StdioServerParameters(command=binary, args=["mcp", "--no-computer", "--tools", tools])
        async with Client(params, mode="legacy", elicitation_callback=answer) as client:
            with anyio.fail_after(60):
                result = await client.call_tool("execute_code", {
                    "code": "await user_ask(question='Which color?', options=['red', 'blue'])",
                })
        assert not result.is_error, text_of(result)
        assert result.structured_content["result"] == {"answer": "blue", "is_freeform": False}, result.structured_content
        assert len(asked) == 1 and "Which color?" in asked[0] and "red / blue" in asked[0], asked
        # A client that cannot be asked gets an error result the code can catch.
        async with Client(params, mode="legacy") as client:
            with anyio.fail_after(60):
                result = await client.call_tool("execute_code", {
                    "code": "try:\n    await user_ask(question='?')\n    r = 'answered'\nexcept ToolError as e:\n    r = str(e)\nr",
                })
        assert "does not support elicitation" in result.structured_content["result"], result.structured_content


def main():
    mode = sys.argv[1]
    if mode == "http":
        http_scenario(sys.argv[2])
    elif mode == "mcp":
        anyio.run(mcp_scenario, sys.argv[2])
        anyio.run(mcp_user_ask, sys.argv[2])
    else:
        raise SystemExit(f"unknown mode {mode}")
    print(json.dumps({"ok": mode}))


if __name__ == "__main__":
    main()
