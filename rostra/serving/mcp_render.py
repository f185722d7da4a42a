"""The MCP items and events of a response (part of ResponseBuilder).

A model's call to an MCP tool becomes an `mcp_call` item: output_item.added,
response.mcp_call.in_progress, mcp_call_arguments.delta/.done as the arguments stream; once rostra
has run it, response.mcp_call.completed (or .failed) and output_item.done with its output (or
error). A call that needs approval becomes an `mcp_approval_request` item, sent whole once its
arguments are complete. Listings are `mcp_list_tools` items (in_progress, completed or failed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rostra.parsing.events import ToolCallStart
from rostra.serving.mcp_client import CallResult


class McpRendering:
    """Mixed into ResponseBuilder, whose `event`, `_open_item`, `_snapshot`-taking helpers it uses."""

    response: dict[str, Any]
    _open: dict[str, Any] | None

    if TYPE_CHECKING:  # ResponseBuilder's, declared for the type checker only
        def event(self, kind: str, **fields: Any) -> dict[str, Any]: ...
        def _open_item(self, item: dict[str, Any]) -> list[dict[str, Any]]: ...
        def _index(self) -> int: ...

    def _init_mcp(self) -> None:
        self.mcp: dict[str, tuple[str, bool]] = {}  # tool name -> (server label, needs approval)
        self.pending_calls: list[dict[str, Any]] = []  # mcp_call items of this turn, waiting to be run

    def _open_mcp(self, event: ToolCallStart) -> list[dict[str, Any]]:
        from rostra.serving.responses_render import new_id

        label, needs_approval = self.mcp[event.name]
        if needs_approval:  # withheld until its arguments are complete: it is sent whole
            self._open = {"id": new_id("mcpr"), "type": "mcp_approval_request", "server_label": label,
                          "name": event.name, "arguments": ""}
            return []
        item: dict[str, Any] = {"id": new_id("mcp"), "type": "mcp_call", "server_label": label, "name": event.name,
                "arguments": "", "output": None, "error": None, "status": "in_progress"}
        out = self._open_item(item)
        return out + [self.event("response.mcp_call.in_progress", item_id=item["id"], output_index=self._index())]

    def _mcp_args(self, item: dict[str, Any], text: str) -> list[dict[str, Any]]:
        """More arguments for `item`, the open MCP item."""
        item["arguments"] += text
        if item["type"] == "mcp_approval_request":
            return []
        return [self.event("response.mcp_call_arguments.delta", item_id=item["id"], output_index=self._index(),
                           delta=text)]

    def _close_mcp(self, item: dict[str, Any], status: str) -> list[dict[str, Any]]:
        if item["type"] == "mcp_approval_request":
            if status != "completed":  # cut off before its arguments were whole: never sent
                return []
            self.response["output"].append(item)
            index = self._index()
            return [self.event("response.output_item.added", output_index=index, item=dict(item)),
                    self.event("response.output_item.done", output_index=index, item=dict(item))]
        index = self.response["output"].index(item)
        out = [self.event("response.mcp_call_arguments.done", item_id=item["id"], output_index=index,
                          arguments=item["arguments"])]
        if status == "completed":
            self.pending_calls.append(item)
            return out
        item["status"] = status  # the response failed before the call could run
        return out + [self.event("response.output_item.done", output_index=index, item=dict(item))]

    def call_done(self, item: dict[str, Any], result: CallResult) -> list[dict[str, Any]]:
        """The end of an mcp_call rostra has run: its output or error, and the events that say so."""
        item["output"], item["error"] = result.output, result.error
        item["status"] = "failed" if result.error else "completed"
        index = self.response["output"].index(item)
        kind = "response.mcp_call.failed" if result.error else "response.mcp_call.completed"
        return [self.event(kind, item_id=item["id"], output_index=index),
                self.event("response.output_item.done", output_index=index, item=_copy(item))]

    def whole_item(self, item: dict[str, Any]) -> list[dict[str, Any]]:
        """An item complete before the model runs (a listing, an approved call), as its events."""
        self.response["output"].append(item)
        index, item_id = self._index(), item["id"]
        if item["type"] == "mcp_list_tools":
            kind = "failed" if item.get("error") else "completed"
            return [self.event("response.output_item.added", output_index=index, item={**item, "tools": []}),
                    self.event("response.mcp_list_tools.in_progress", item_id=item_id, output_index=index),
                    self.event(f"response.mcp_list_tools.{kind}", item_id=item_id, output_index=index),
                    self.event("response.output_item.done", output_index=index, item=_copy(item))]
        started = {**item, "output": None, "error": None, "status": "in_progress"}
        return [self.event("response.output_item.added", output_index=index, item=started),
                self.event("response.mcp_call.in_progress", item_id=item_id, output_index=index),
                self.event("response.mcp_call_arguments.delta", item_id=item_id, output_index=index,
                           delta=item["arguments"]),
                self.event("response.mcp_call_arguments.done", item_id=item_id, output_index=index,
                           arguments=item["arguments"]),
                self.event("response.mcp_call.failed" if item.get("error") else "response.mcp_call.completed",
                           item_id=item_id, output_index=index),
                self.event("response.output_item.done", output_index=index, item=_copy(item))]


def _copy(value: Any) -> Any:
    from rostra.serving.responses_render import _snapshot  # that module imports this one

    return _snapshot(value)
