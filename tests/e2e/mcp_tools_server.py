"""A small MCP server (official Python SDK) that `cordon --connect` connects to in tests."""

from mcp.server.mcpserver import MCPServer

app = MCPServer("calc")


@app.tool()
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@app.tool()
def table(rows: int) -> list[dict]:
    """A large result that should stay inside the sandbox."""
    return [{"id": i, "square": i * i} for i in range(rows)]


@app.tool()
def fail(reason: str) -> str:
    """Always fails."""
    raise ValueError(reason)


if __name__ == "__main__":
    app.run()
