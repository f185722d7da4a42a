"""Semantic events -> Responses API stream events, and the response object they build.

One `ResponseBuilder` per response: every semantic event becomes the OpenAI event sequence
(output_item.added, content_part.added, deltas, the .done events) with increasing
sequence numbers, and the same calls keep `response["output"]` up to date. A non-streamed
response is this builder's final object, so it is the fold of the very events a stream sends.
MCP items are rendered by the McpRenderer it holds (`mcp`), through the builder's `event`, `open_item`
and `index`.
"""

from __future__ import annotations

import time
from typing import Any

from rostra.api.responses.mcp.render import McpRenderer
from rostra.api.responses.objects import new_id, snapshot
from rostra.errors import APIError
from rostra.parsing.events import Event, Finish, Reasoning, Text, ToolCallArgs, ToolCallEnd, ToolCallStart
from rostra.serving.chat import logprobs_content
from rostra.serving.reasoning_crypto import ReasoningSealer


class ResponseBuilder:
    def __init__(self, response: dict[str, Any]):
        self.response = response
        self.mcp = McpRenderer(self)
        self.sequence = 0
        self._open: dict[str, Any] | None = None  # the output item being written
        self._text = ""  # its text so far (message or reasoning)
        self._logprobs: list[dict[str, Any]] = []  # its tokens' logprobs so far (messages, when asked for)
        self.error: APIError | None = None  # why the response failed, once it has
        self.sealer: ReasoningSealer | None = None  # set when reasoning items carry encrypted_content

    # -- the envelope ------------------------------------------------------------------------
    def event(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return event

    def lifecycle(self, kind: str) -> dict[str, Any]:
        """response.created / in_progress / completed / incomplete / failed / cancelled... with a snapshot."""
        return self.event(kind, response=snapshot(self.response))

    # -- semantic events -----------------------------------------------------------------------
    def add(self, event: Event) -> list[dict[str, Any]]:
        if isinstance(event, Text):
            logprobs = logprobs_content(event.logprobs)
            if not event.text:
                self._logprobs += logprobs if self._open and self._open["type"] == "message" else []
                return []
            return self._write("message", event.text, logprobs)
        if isinstance(event, Reasoning):
            return self._write("reasoning", event.text) if event.text else []
        if isinstance(event, ToolCallStart):
            out = self._close()
            if self.mcp.handles(event.name):
                self._open, opened = self.mcp.open(event)
                return out + opened
            item = {"id": new_id("fc"), "type": "function_call", "call_id": event.id, "name": event.name,
                    "arguments": "", "status": "in_progress"}
            return out + self.open_item(item)
        if isinstance(event, ToolCallArgs) and self._open and self._open["type"].startswith("mcp_"):
            return self.mcp.arguments(self._open, event.text)
        if isinstance(event, ToolCallArgs) and self._open and self._open["type"] == "function_call":
            self._open["arguments"] += event.text
            return [self.event("response.function_call_arguments.delta", item_id=self._open["id"],
                               output_index=self.index(), delta=event.text)]
        if isinstance(event, ToolCallEnd):
            return self._close()
        if isinstance(event, Finish):
            return self._close()
        return []

    def finish(self, reason: str, usage: dict[str, Any]) -> dict[str, Any]:
        """The final status, usage and terminal event (after the Finish event was added)."""
        response = self.response
        response["usage"] = usage
        if reason == "length":
            response["status"] = "incomplete"
            response["incomplete_details"] = {"reason": "max_output_tokens"}
            return self.lifecycle("response.incomplete")
        response["status"] = "completed"
        response["completed_at"] = int(time.time())
        return self.lifecycle("response.completed")

    def fail(self, error: APIError) -> list[dict[str, Any]]:
        """The events that end a response that failed: its open item closed as `incomplete`, an `error`
        event (the Responses stream's own error shape), then `response.failed`."""
        self.error = error
        out = self._close(status="incomplete")
        out.append(self.event("error", code=error.code or error.error_type, message=error.message,
                              param=error.param))
        self.response["status"] = "failed"
        # The response object's error codes are a closed set: everything rostra fails with is a server_error.
        self.response["error"] = {"code": "server_error", "message": error.message}
        out.append(self.lifecycle("response.failed"))
        return out

    # -- output items --------------------------------------------------------------------------
    def index(self) -> int:
        return len(self.response["output"]) - 1

    def open_item(self, item: dict[str, Any]) -> list[dict[str, Any]]:
        self.response["output"].append(item)
        self._open, self._text, self._logprobs = item, "", []
        events = [self.event("response.output_item.added", output_index=self.index(), item=snapshot(item))]
        part = _empty_part(item["type"])
        if part is not None:
            events.append(self.event("response.content_part.added", item_id=item["id"], output_index=self.index(),
                                     content_index=0, part=part))
        return events

    def _write(self, kind: str, text: str, logprobs: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        item = self._open
        if item is None or item["type"] != kind:
            out += self._close()
            if kind == "message":
                item = {"id": new_id("msg"), "type": "message", "role": "assistant", "status": "in_progress",
                        "content": []}
            else:
                item = {"id": new_id("rs"), "type": "reasoning", "summary": [], "content": [],
                        "status": "in_progress"}
            out += self.open_item(item)
        self._text += text
        if kind == "message":
            self._logprobs += logprobs or []
            out.append(self.event("response.output_text.delta", item_id=item["id"],
                                  output_index=self.index(), content_index=0, delta=text, logprobs=logprobs or []))
        else:
            out.append(self.event("response.reasoning_text.delta", item_id=item["id"],
                                  output_index=self.index(), content_index=0, delta=text))
        return out

    def _close(self, status: str = "completed") -> list[dict[str, Any]]:
        item, self._open = self._open, None
        if item is None:
            return []
        if item["type"].startswith("mcp_"):
            return self.mcp.close(item, status)
        index, item_id, out = self.index(), item["id"], []
        if item["type"] == "message":
            part = {"type": "output_text", "text": self._text, "annotations": [], "logprobs": self._logprobs}
            item["content"] = [part]
            out += [self.event("response.output_text.done", item_id=item_id, output_index=index, content_index=0,
                               text=self._text, logprobs=self._logprobs),
                    self.event("response.content_part.done", item_id=item_id, output_index=index,
                               content_index=0, part=part)]
        elif item["type"] == "reasoning":
            part = {"type": "reasoning_text", "text": self._text}
            item["content"] = [part]
            if self.sealer is not None:  # include: reasoning.encrypted_content
                item["encrypted_content"] = self.sealer.seal(self._text)
            out += [self.event("response.reasoning_text.done", item_id=item_id, output_index=index,
                               content_index=0, text=self._text),
                    self.event("response.content_part.done", item_id=item_id, output_index=index,
                               content_index=0, part=part)]
        elif item["type"] == "function_call":
            out.append(self.event("response.function_call_arguments.done", item_id=item_id, output_index=index,
                                  name=item["name"], arguments=item["arguments"]))
        item["status"] = status
        out.append(self.event("response.output_item.done", output_index=index, item=snapshot(item)))
        return out


def _empty_part(item_type: str) -> dict[str, Any] | None:
    if item_type == "message":
        return {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    if item_type == "reasoning":
        return {"type": "reasoning_text", "text": ""}
    return None

