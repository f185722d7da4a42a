"""The MCP items and events of a response, rendered by a part the ResponseBuilder holds (`builder.mcp`).

A model's call to an MCP tool becomes an `mcp_call` item: output_item.added,
response.mcp_call.in_progress, mcp_call_arguments.delta/.done as the arguments stream; once rostra
has run it, response.mcp_call.completed (or .failed) and output_item.done with its output (or
error). A call that needs approval becomes an `mcp_approval_request` item, sent whole once its
arguments are complete. Listings are `mcp_list_tools` items (in_progress, completed or failed).

Calls to hosted tools rostra serves through tool servers (web_search, code_interpreter) are rendered by the
HostedRenderer it holds (`hosted`, builtin_render.py): they are run the same way, after the turn.

It writes through the narrow `OutputWriter` the builder is (events numbered in one sequence, items in one
output list), so it knows nothing else of the builder, and the builder nothing of MCP but when to ask it.
"""

from __future__ import annotations

from typing import Any, Protocol

from rostra.api.responses.builtin_render import HOSTED_ITEM_TYPES, HostedRenderer
from rostra.api.responses.objects import new_id, snapshot
from rostra.api.responses.mcp.client import CallResult
from rostra.api.responses.response_object import ResponseObject
from rostra.parsing.events import ToolCallStart


class OutputWriter(Protocol):
    response: ResponseObject

    def event(self, kind: str, **fields: Any) -> dict[str, Any]: ...

    def open_item(self, item: dict[str, Any]) -> list[dict[str, Any]]: ...

    def index(self) -> int: ...


class McpRenderer:
    def __init__(self, writer: OutputWriter):
        self.writer = writer
        self.tools: dict[str, tuple[str, bool]] = {}  # tool name -> (server label, needs approval)
        self.pending_calls: list[dict[str, Any]] = []  # items of this turn's calls, waiting to be run
        self.hosted = HostedRenderer(writer)

    def handles(self, tool_name: str) -> bool:
        """Whether a call to this tool is one rostra runs (MCP, or a hosted tool), not one the client runs."""
        return tool_name in self.tools or tool_name in self.hosted.routes

    def owns(self, item: dict[str, Any]) -> bool:
        """Whether this item is one of those `open` makes."""
        return item["type"].startswith("mcp_") or item["type"] in HOSTED_ITEM_TYPES

    def invocation(self, item: dict[str, Any]) -> tuple[str, str]:
        """The tool a pending call runs (by the name the model called) and its arguments."""
        hosted = self.hosted.invocations.get(item["id"])
        return (hosted.name, hosted.arguments) if hosted else (item["name"], item["arguments"])

    def open(self, event: ToolCallStart) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The item a call opens (the builder's open item from now on) and the events that say so."""
        if event.name in self.hosted.routes:
            return self.hosted.open(event)
        label, needs_approval = self.tools[event.name]
        if needs_approval:  # withheld until its arguments are complete: it is sent whole
            return {"id": new_id("mcpr"), "type": "mcp_approval_request", "server_label": label,
                    "name": event.name, "arguments": ""}, []
        item: dict[str, Any] = {"id": new_id("mcp"), "type": "mcp_call", "server_label": label, "name": event.name,
                                "arguments": "", "output": None, "error": None, "status": "in_progress"}
        out = self.writer.open_item(item)
        return item, out + [self.writer.event("response.mcp_call.in_progress", item_id=item["id"],
                                              output_index=self.writer.index())]

    def arguments(self, item: dict[str, Any], text: str) -> list[dict[str, Any]]:
        """More arguments for `item`, the open MCP item."""
        if item["type"] in HOSTED_ITEM_TYPES:
            self.hosted.arguments(item, text)
            return []
        item["arguments"] += text
        if item["type"] == "mcp_approval_request":
            return []
        return [self.writer.event("response.mcp_call_arguments.delta", item_id=item["id"],
                                  output_index=self.writer.index(), delta=text)]

    def close(self, item: dict[str, Any], status: str) -> list[dict[str, Any]]:
        writer = self.writer
        if item["type"] in HOSTED_ITEM_TYPES:
            out, runs = self.hosted.close(item, status)
            if runs:
                self.pending_calls.append(item)
            return out
        if item["type"] == "mcp_approval_request":
            if status != "completed":  # cut off before its arguments were whole: never sent
                return []
            writer.response.output.append(item)
            index = writer.index()
            return [writer.event("response.output_item.added", output_index=index, item=dict(item)),
                    writer.event("response.output_item.done", output_index=index, item=dict(item))]
        index = writer.response.output.index(item)
        out = [writer.event("response.mcp_call_arguments.done", item_id=item["id"], output_index=index,
                            arguments=item["arguments"])]
        if status == "completed":
            self.pending_calls.append(item)
            return out
        item["status"] = status  # the response failed before the call could run
        return out + [writer.event("response.output_item.done", output_index=index, item=dict(item))]

    def call_done(self, item: dict[str, Any], result: CallResult) -> list[dict[str, Any]]:
        """The end of an mcp_call rostra has run: its output or error, and the events that say so."""
        if item["type"] in HOSTED_ITEM_TYPES:
            return self.hosted.call_done(item, result)
        item["output"], item["error"] = result.output, result.error
        item["status"] = "failed" if result.error else "completed"
        index = self.writer.response.output.index(item)
        kind = "response.mcp_call.failed" if result.error else "response.mcp_call.completed"
        return [self.writer.event(kind, item_id=item["id"], output_index=index),
                self.writer.event("response.output_item.done", output_index=index, item=snapshot(item))]

    def whole_item(self, item: dict[str, Any]) -> list[dict[str, Any]]:
        """An item complete before the model runs (a listing, an approved call), as its events."""
        writer = self.writer
        writer.response.output.append(item)
        index, item_id = writer.index(), item["id"]
        if item["type"] == "mcp_list_tools":
            kind = "failed" if item.get("error") else "completed"
            return [writer.event("response.output_item.added", output_index=index, item={**item, "tools": []}),
                    writer.event("response.mcp_list_tools.in_progress", item_id=item_id, output_index=index),
                    writer.event(f"response.mcp_list_tools.{kind}", item_id=item_id, output_index=index),
                    writer.event("response.output_item.done", output_index=index, item=snapshot(item))]
        started = {**item, "output": None, "error": None, "status": "in_progress"}
        return [writer.event("response.output_item.added", output_index=index, item=started),
                writer.event("response.mcp_call.in_progress", item_id=item_id, output_index=index),
                writer.event("response.mcp_call_arguments.delta", item_id=item_id, output_index=index,
                             delta=item["arguments"]),
                writer.event("response.mcp_call_arguments.done", item_id=item_id, output_index=index,
                             arguments=item["arguments"]),
                writer.event("response.mcp_call.failed" if item.get("error") else "response.mcp_call.completed",
                             item_id=item_id, output_index=index),
                writer.event("response.output_item.done", output_index=index, item=snapshot(item))]

