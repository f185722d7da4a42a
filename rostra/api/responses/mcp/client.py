"""Talking to MCP servers with the official `mcp` SDK: list their tools, call one.

Every operation opens its own connection and closes it before it returns, inside one `await`:
the SDK's transports hold task groups that must be entered and left by the same task, which a
response generator (closed by whoever consumes it) cannot promise. Failures never raise: a
listing gives an error string, a call an OpenAI `mcp_call.error` object.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:  # the SDK itself loads on first use
    from mcp import Client
    from mcp.client import Transport
    from mcp.types import Tool

log = logging.getLogger("rostra.mcp")


@dataclass(frozen=True)
class McpServer:
    """One MCP server a request uses (from a `{"type": "mcp"}` tool or `--tool-server`)."""

    label: str
    url: str
    headers: dict[str, str] = field(default_factory=dict, repr=False)  # secrets: never in repr or logs
    timeout: float = 30.0  # seconds per listing or call
    max_output: int = 65536  # characters of a tool's output kept

    @property
    def transport(self) -> str:
        """SSE for URLs whose path ends in /sse (the SDK's and most servers' convention), else streamable HTTP."""
        return "sse" if urlsplit(self.url).path.rstrip("/").endswith("/sse") else "streamable_http"


@dataclass
class CallResult:
    output: str | None = None
    error: dict[str, Any] | None = None  # an MCPToolCallError: mcp_protocol_error, mcp_tool_execution_error, http_error


def error_text(error: dict[str, Any] | str) -> str:
    """A failed call's error as the model reads it in the call's output: the tool's own text where it ran and
    failed, else the error's message (a stored item's error may be a plain string)."""
    if isinstance(error, str):
        return f"Error: {error}"
    if error.get("type") == "mcp_tool_execution_error":
        texts = [block.get("text", "") for block in error.get("content") or [] if isinstance(block, dict)]
        return "Error: " + ("\n".join(texts) or "the tool failed")
    return f"Error: {error.get('message', 'the tool call failed')}"


def _transport(server: McpServer) -> Transport:
    import httpx2
    from mcp.client.sse import sse_client
    from mcp.client.streamable_http import streamable_http_client

    if server.transport == "sse":
        return sse_client(server.url, headers=server.headers or None, timeout=server.timeout,
                          sse_read_timeout=server.timeout)
    client = httpx2.AsyncClient(headers=server.headers, timeout=server.timeout)
    return streamable_http_client(server.url, http_client=client)


def _client(server: McpServer) -> Client:
    from mcp import Client

    # legacy: the initialize handshake every MCP server speaks; no response cache (each call is fresh).
    return Client(_transport(server), mode="legacy", read_timeout_seconds=server.timeout, cache=None)


async def list_tools(server: McpServer) -> tuple[list[dict[str, Any]], str | None]:
    """The server's tools as `mcp_list_tools` entries, or an error message."""
    import anyio

    try:
        with anyio.fail_after(server.timeout * 2):  # connect + list
            async with _client(server) as client:
                tools, cursor = [], None
                while True:
                    page = await client.list_tools(cursor=cursor)
                    tools += page.tools
                    cursor = page.next_cursor
                    if not cursor:
                        break
    except BaseException as exc:  # noqa: BLE001 - transports raise exception groups; all mean "unreachable"
        if isinstance(exc, (KeyboardInterrupt, SystemExit)) or _is_cancel(exc):
            raise
        log.warning("MCP server %r: listing tools failed: %s", server.label, _describe(exc))
        return [], f"Error retrieving tool list from MCP server '{server.label}': {_describe(exc)}"
    return [_tool_entry(tool) for tool in tools], None


def _tool_entry(tool: Tool) -> dict[str, Any]:
    annotations = tool.annotations.model_dump(mode="json", exclude_none=True) if tool.annotations else None
    return {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema,
            "annotations": annotations}


async def call_tool(server: McpServer, name: str, arguments: str) -> CallResult:
    """Run one tool call; its text output (capped), or the error as OpenAI's mcp_call reports it."""
    import anyio

    try:
        parsed = json.loads(arguments or "{}")
    except json.JSONDecodeError as exc:
        return CallResult(error={"type": "mcp_protocol_error", "code": -32602,
                                 "message": f"the arguments are not valid JSON: {exc}"})
    try:
        with anyio.fail_after(server.timeout * 2):
            async with _client(server) as client:
                result = await client.call_tool(name, parsed if isinstance(parsed, dict) else {})
    except BaseException as exc:  # noqa: BLE001 - often an exception group from the transport's task group
        if isinstance(exc, (KeyboardInterrupt, SystemExit)) or _is_cancel(exc):
            raise
        return CallResult(error=_call_error(server, name, exc))
    content = [block.model_dump(mode="json", exclude_none=True) for block in result.content]
    if result.is_error:
        return CallResult(error={"type": "mcp_tool_execution_error", "content": content})
    return CallResult(output=_cap(_text_of(content, result.structured_content), server.max_output))


def _call_error(server: McpServer, name: str, exc: BaseException) -> dict[str, Any]:
    """A failed call as OpenAI's mcp_call.error says it: the server's JSON-RPC error, or an HTTP one as a
    gateway reports its upstream's (502 unreachable, 504 timed out)."""
    from mcp import MCPError
    from mcp_types.jsonrpc import REQUEST_TIMEOUT

    log.warning("MCP server %r: calling %r failed: %s", server.label, name, _describe(exc))
    leaf = _leaves(exc)[0]
    if isinstance(leaf, TimeoutError) or (isinstance(leaf, MCPError) and leaf.code == REQUEST_TIMEOUT):
        return {"type": "http_error", "code": 504, "message": f"the MCP server did not answer in {server.timeout:g} s"}
    if isinstance(leaf, MCPError):
        return {"type": "mcp_protocol_error", "code": leaf.code, "message": leaf.message}
    return {"type": "http_error", "code": _status(exc) or 502, "message": _describe(exc)}


def _text_of(content: list[dict[str, Any]], structured: Any) -> str:
    texts = [block["text"] for block in content if block.get("type") == "text"]
    if texts:
        return "\n".join(texts)
    if structured is not None:
        return json.dumps(structured)
    return json.dumps(content)


def _cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[output truncated: {len(text) - limit} more characters]"


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _is_cancel(exc: BaseException) -> bool:
    import asyncio

    return any(isinstance(leaf, asyncio.CancelledError) for leaf in _leaves(exc))


def _status(exc: BaseException) -> int | None:
    for leaf in _leaves(exc):
        status = getattr(getattr(leaf, "response", None), "status_code", None)
        if isinstance(status, int):
            return status
    return None


def _describe(exc: BaseException) -> str:
    leaf = _leaves(exc)[0]
    if isinstance(leaf, TimeoutError):
        return "timed out"
    return f"{type(leaf).__name__}: {leaf}" if str(leaf) else type(leaf).__name__
