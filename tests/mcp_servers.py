"""Real MCP servers for the tests, built on the official `mcp` SDK's server side (MCPServer, formerly FastMCP).

Run as a process: `python tests/mcp_servers.py PORT streamable-http|sse`. The calculator's tools:
`add` (integers), `divide` (raises on a zero divisor: a tool error the client sees as `isError`),
`shout` (echoes a long text back, for the output cap), `slow` (for timeouts) and `whoami` (reports the
headers it was sent).
"""

from __future__ import annotations

import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

calculator = MCPServer("calculator")


@calculator.tool(description="Add two integers.")
def add(a: int, b: int) -> int:
    return a + b


@calculator.tool(description="Divide a by b.")
def divide(a: float, b: float) -> float:
    if b == 0:
        raise ToolError("division by zero")  # its message reaches the client
    return a / b


@calculator.tool(description="Repeat a text n times.")
def shout(text: str, n: int) -> str:
    return text * n


@calculator.tool(description="Wait, then say done.")
async def slow(seconds: float) -> str:
    await anyio.sleep(seconds)
    return "done"


RUNS = {"count": 0}


@calculator.tool(description="Count: how many times this tool has run (a tool with a side effect).")
def count() -> int:
    RUNS["count"] += 1
    return RUNS["count"]


@calculator.tool(description="Report the X-Caller header this call came with.")
def whoami(ctx: Context) -> str:
    request = ctx.request_context.request
    return request.headers.get("x-caller", "anonymous") if request is not None else "unknown"


if __name__ == "__main__":
    port, transport = int(sys.argv[1]), sys.argv[2]
    if transport == "sse":
        anyio.run(lambda: calculator.run_sse_async(port=port))
    else:
        anyio.run(lambda: calculator.run_streamable_http_async(port=port))
