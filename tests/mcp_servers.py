"""Real MCP servers for the tests, built on the official `mcp` SDK's server side (MCPServer, formerly FastMCP).

Run as a process: `python tests/mcp_servers.py PORT streamable-http|sse [calculator|browser|python]`. The
browser and python servers are tool servers for hosted tools (rostra/api/responses/builtin_tools.py): the browser's
`search` (and `open`, `find`) answer from a fixed page of results, python's `python` runs the code it is given
and returns what it printed. The calculator's tools:
`add` (integers), `divide` (raises on a zero divisor: a tool error the client sees as `isError`),
`shout` (echoes a long text back, for the output cap), `slow` (for timeouts) and `whoami` (reports the
headers it was sent).
"""

from __future__ import annotations

import contextlib
import io
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


browser = MCPServer("browser")
RESULTS = ["[0] Oslo weather today: 21C and sunny (https://weather.example/oslo)",
           "[1] Bergen weather: rain (https://weather.example/bergen)"]


@browser.tool(description="Search the web for `query`, showing `topn` results.")
def search(query: str, topn: int = 10, source: str | None = None) -> str:
    if query == "fail":
        raise ToolError("the search backend is down")
    return f"Results for {query!r}:\n" + "\n".join(RESULTS[:topn])


@browser.tool(name="open", description="Open link `id` of the results page.")
def open_page(id: int | str = -1, cursor: int = -1) -> str:
    return f"Page {id}: Oslo, 21C."


@browser.tool(description="Find `pattern` in the current page.")
def find(pattern: str, cursor: int = -1) -> str:
    return f"{pattern!r} found on line 1."


python = MCPServer("python")


@python.tool(name="python", description="Run Python code; returns what it printed.")
def python_tool(code: str) -> str:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(code, {})  # a test server on loopback, running the test's own code
    return printed.getvalue()



if __name__ == "__main__":
    port, transport = int(sys.argv[1]), sys.argv[2]
    server = {"calculator": calculator, "browser": browser, "python": python}[sys.argv[3] if len(sys.argv) > 3
                                                                              else "calculator"]
    if transport == "sse":
        anyio.run(lambda: server.run_sse_async(port=port))
    else:
        anyio.run(lambda: server.run_streamable_http_async(port=port))
