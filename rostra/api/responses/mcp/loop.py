"""The server-side tool loop of a Responses request, and MCP items in the conversation.

One request may take several model turns: after a turn whose tool calls include MCP tools,
rostra runs them, emits their results, adds them to the conversation and lets the model go on,
until it answers, calls a function tool (which the client runs: the response ends, as for any
function call), asks for an approval, or `max_tool_calls` is spent (then it must answer).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, AsyncGenerator

from rostra.api.responses.builtin_tools import HostedRoute
from rostra.api.responses.items import MCP_ITEM_TYPES
from rostra.api.responses.mcp.client import CallResult, call_tool, error_text
from rostra.api.responses.mcp.tools import McpTools
from rostra.api.responses.render import ResponseBuilder
from rostra.errors import InvalidRequest

MAX_TURNS = 32  # model turns in one response, at most, when max_tool_calls does not say less
_NOT_RUN = CallResult(error={"type": "mcp_tool_execution_error", "content": [
    {"type": "text", "text": "not run: the response reached max_tool_calls"}]})


@dataclass
class ToolLoop:
    """What the loop of one response keeps between model turns."""

    tools: McpTools
    max_calls: int | None = None  # the request's max_tool_calls
    calls: int = 0  # MCP calls run so far
    turns: int = 1
    # Hosted tools served by tool servers (builtin_tools.py), by the name the model calls.
    hosted: dict[str, HostedRoute] = field(default_factory=dict)

    def room(self) -> bool:
        """Whether the model may still be offered the MCP tools."""
        within_calls = self.max_calls is None or self.calls < self.max_calls
        return within_calls and self.turns < MAX_TURNS

    def chat_tools(self) -> list[dict[str, Any]]:
        return self.tools.chat_tools if self.room() else []

    async def run(self, builder: ResponseBuilder, calls: list[dict[str, Any]]) -> AsyncGenerator[dict[str, Any], None]:
        """Run this turn's MCP calls (concurrently), then emit each one's end, in order."""
        allowed = calls if self.max_calls is None else calls[:max(0, self.max_calls - self.calls)]
        self.calls += len(allowed)
        results = await asyncio.gather(*(self._call(*builder.mcp.invocation(item)) for item in allowed))
        for item, result in zip(calls, [*results, *[_NOT_RUN] * (len(calls) - len(allowed))]):
            for event in builder.mcp.call_done(item, result):
                yield event

    async def run_approved(self, calls: list[dict[str, Any]]) -> None:
        """Run approved calls (concurrently), within max_tool_calls: their results go into the items."""
        allowed = calls if self.max_calls is None else calls[:max(0, self.max_calls - self.calls)]
        self.calls += len(allowed)
        results = await asyncio.gather(*(self._call(item["name"], item["arguments"]) for item in allowed))
        for item, result in zip(calls, [*results, *[_NOT_RUN] * (len(calls) - len(allowed))]):
            item.update(output=result.output, error=result.error, status="failed" if result.error else "completed")

    async def _call(self, name: str, arguments: str) -> CallResult:
        hosted = self.hosted.get(name)
        if hosted is not None and hosted.search is not None:  # file_search: run here
            return await hosted.search(arguments)
        if hosted is not None and hosted.server is not None:
            return await call_tool(hosted.server, hosted.tool, arguments)
        route = self.tools.routes[name]
        return await call_tool(route.server, route.name, arguments)


def awaits_client(items: list[dict[str, Any]]) -> bool:
    """A turn that called a function tool or asked for an approval ends the response: the client acts next."""
    return any(item["type"] in ("function_call", "mcp_approval_request") for item in items)


def approved_call_id(request: dict[str, Any]) -> str:
    """The id of the call that an approval of `request` runs: the same for the same approval of the same call, so
    a retry of a request finds the run its first attempt made (ResponsesService._ran_before)."""
    named = json.dumps([request["id"], request["server_label"], request["name"], request["arguments"]])
    return "mcp_" + hashlib.sha256(named.encode()).hexdigest()[:32]


def approved_calls(items: list[dict[str, Any]], conversation: list[dict[str, Any]],
                   loop: ToolLoop) -> list[dict[str, Any]]:
    """The calls this request's `mcp_approval_response` items approve, as `mcp_call` items not run yet: they run
    (ToolLoop.run_approved) as the first step of the response, once the request is known good and the response
    is stored, so a refused request never runs a side-effecting tool, nor does a retry of one run it twice."""
    requests = {item["id"]: item for item in conversation if item.get("type") == "mcp_approval_request"}
    done = {item.get("approval_request_id") for item in conversation if item.get("type") == "mcp_call"}
    approved = []
    for index, item in enumerate(items):
        if item["type"] != "mcp_approval_response" or not item["approve"] or item["approval_request_id"] in done:
            continue
        request = requests.get(item["approval_request_id"])
        if request is None:
            raise InvalidRequest(f"no mcp_approval_request {item['approval_request_id']!r} in the conversation",
                                 param=f"input[{index}].approval_request_id")
        route = loop.tools.routes.get(request["name"])
        if route is None or route.server.label != request["server_label"]:
            raise InvalidRequest(f"the approved call's MCP server {request['server_label']!r} (tool "
                                 f"{request['name']!r}) is not among this request's tools", param="tools")
        approved.append({"id": approved_call_id(request), "type": "mcp_call", "server_label": request["server_label"],
                         "name": request["name"], "arguments": request["arguments"],
                         "approval_request_id": request["id"], "output": None, "error": None,
                         "status": "in_progress"})
    return approved


def expand_mcp(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """MCP items as the function calls and outputs the chat template renders; listings and unanswered
    approval requests are not part of what the model reads."""
    requests = {item["id"]: item for item in items if item.get("type") == "mcp_approval_request"}
    out: list[dict[str, Any]] = []
    for item in items:
        kind = item.get("type")
        if kind == "mcp_call":
            call_id = item.get("approval_request_id") or item["id"]
            out += [{"type": "function_call", "call_id": call_id, "name": item["name"],
                     "arguments": item["arguments"]},
                    {"type": "function_call_output", "call_id": call_id, "output": _result_text(item)}]
        elif kind == "mcp_approval_response" and not item["approve"] and item["approval_request_id"] in requests:
            request = requests[item["approval_request_id"]]
            reason = f" ({item['reason']})" if item.get("reason") else ""
            out += [{"type": "function_call", "call_id": request["id"], "name": request["name"],
                     "arguments": request["arguments"]},
                    {"type": "function_call_output", "call_id": request["id"],
                     "output": f"The user did not approve this tool call{reason}."}]
        elif kind not in MCP_ITEM_TYPES:
            out.append(item)
    return out


def _result_text(item: dict[str, Any]) -> str:
    error = item.get("error")
    if not error:
        return item.get("output") or ""
    return error_text(error)

