"""Semantic events -> Responses API stream events, and the response object they build.

One `ResponseBuilder` per response: every semantic event becomes the OpenAI event sequence
(output_item.added, content_part.added, deltas, the .done events) with increasing
sequence numbers, and the same calls keep `response.output` up to date. A non-streamed
response is this builder's final object, so it is the fold of the very events a stream sends.
MCP items are rendered by the McpRenderer it holds (`mcp`), through the builder's `event`, `open_item`
and `index`.

A call to a client-run tool becomes the item of its kind (`routes`, calls.py): a function_call (with its
`namespace`), a custom_tool_call (its `input` streamed by `response.custom_tool_call_input.delta`/`.done` once the
call is whole: the model writes it inside JSON arguments) or a local_shell_call. Reasoning is `reasoning_text`
content, or, when the request asked for a summary (`summary`), the item's summary part: a local model writes no
summary of its own, so its thinking is the summary clients show (Codex, the AI SDK display summaries only).
Whitespace between items is held back and makes no message item unless text follows it.
"""

from __future__ import annotations

import time
from typing import Any

from rostra.api.responses.calls import ToolRoutes, call_item
from rostra.api.responses.mcp.render import McpRenderer
from rostra.api.responses.objects import new_id, snapshot
from rostra.api.responses.response_object import ResponseObject
from rostra.api.responses.wire import IncompleteDetails, ResponseError, ResponseUsage
from rostra.errors import APIError
from rostra.parsing.events import Event, Finish, Reasoning, Text, ToolCallArgs, ToolCallEnd, ToolCallStart
from rostra.serving.chat import logprobs_content
from rostra.serving.reasoning_crypto import ReasoningSealer


def keepalive(last: dict[str, Any] | None) -> dict[str, Any] | None:
    """What a silent Responses stream sends (rostra/http/sse.py's KeepAlive): OpenAI's own, `{"type": "keepalive",
    "sequence_number": N}`, which its API sends on long requests though the spec does not list it (openai-node
    #1964 and openai-java #776 saw it; their readers skip it since, and Codex skips event types it does not know).
    An SSE comment would keep the socket open but not Codex, whose idle timer (stream_idle_timeout_ms, 300 s by
    default) counts events: with comments alone a 5 s first token failed a 2 s timer, `idle timeout waiting for
    SSE`. It repeats the last event's number rather than taking the next: it is in no event log, so a client that
    resumes after it (`GET ?stream=true&starting_after=N`) is sent every event after the last real one. Before
    any event: a comment."""
    if last is None or "sequence_number" not in last:
        return None
    return {"type": "keepalive", "sequence_number": last["sequence_number"]}


class ResponseBuilder:
    def __init__(self, response: ResponseObject, routes: ToolRoutes | None = None, summary: bool = False):
        self.response = response
        self.routes = routes or ToolRoutes()  # what each function the model sees stands for
        self.summary = summary  # reasoning as summary parts (the request set reasoning.summary)
        self.mcp = McpRenderer(self)
        self.sequence = 0
        self._open: dict[str, Any] | None = None  # the output item being written
        self._text = ""  # its text so far (message or reasoning)
        self._logprobs: list[dict[str, Any]] = []  # its tokens' logprobs so far (messages, when asked for)
        self.error: APIError | None = None  # why the response failed, once it has
        self.sealer: ReasoningSealer | None = None  # set when reasoning items carry encrypted_content
        self.freeform: str | None = None  # a forced custom tool whose input is the whole output (its grammar's)
        # A compaction turn's: the whole answer is the summary, sealed into one compaction item at the end.
        self.compaction: ReasoningSealer | None = None
        self._held = ""  # whitespace outside any message, until text follows it
        self.finish_reason = "stop"  # the last model turn's
        self._held_logprobs: list[dict[str, Any]] = []

    # -- the envelope ------------------------------------------------------------------------
    def event(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return event

    def lifecycle(self, kind: str) -> dict[str, Any]:
        """response.created / in_progress / completed / incomplete / failed / cancelled... with a snapshot."""
        return self.event(kind, response=self.response.wire())

    # -- semantic events: each model turn through the one loop (rostra/serving/rendering.py `rendered`), the
    # builder its EventRenderer; the response's lifecycle events are the service's, around turns and tool calls.
    def start(self) -> list[dict[str, Any]]:
        return []

    def end(self) -> list[dict[str, Any]]:
        return []

    def result(self) -> dict[str, Any]:
        """The response as JSON (the shared loop's renderer contract; the service reads `response` itself)."""
        return self.response.wire()

    def add(self, index: int, event: Event) -> list[dict[str, Any]]:
        """The events one semantic event makes (a response has one choice: `index` is 0)."""
        if isinstance(event, Finish):
            self.finish_reason = event.reason
        if self.compaction is not None:
            return self._summary(event, self.compaction)
        if isinstance(event, Text) and self.freeform is not None:
            return self._freeform_input(event.text)
        if isinstance(event, Text):
            logprobs = logprobs_content(event.logprobs)
            phase = "commentary" if event.commentary else "final_answer"
            open_message = self._open is not None and self._open["type"] == "message"
            if not open_message or (event.text and self._open is not None and self._open["phase"] != phase):
                if not event.text.strip():  # no message of whitespace alone (between tool calls, say)
                    self._held += event.text
                    self._held_logprobs += logprobs
                    return []
                text, logprobs = self._held + event.text, self._held_logprobs + logprobs
                return self._write("message", text, logprobs, phase)
            if not event.text:
                self._logprobs += logprobs
                return []
            return self._write("message", event.text, logprobs, phase)
        if isinstance(event, Reasoning):
            return self._write("reasoning", event.text) if event.text else []
        if isinstance(event, ToolCallStart):
            out = self._close()
            if self.mcp.handles(event.name):
                self._open, opened = self.mcp.open(event)
                return out + opened
            route = self.routes.route(event.name)
            kind = route.kind if route else "function"
            item = {"id": new_id(_ID_PREFIX[kind]), **call_item(route, event.id, ""), "status": "in_progress"}
            if kind == "function" and route is None:
                item["name"] = event.name
            return out + self.open_item(item)
        if isinstance(event, ToolCallArgs) and self._open and self.mcp.owns(self._open):
            return self.mcp.arguments(self._open, event.text)
        if isinstance(event, ToolCallArgs) and self._open and self._open["type"] in _WHOLE_CALLS:
            self._text += event.text  # read once the call is whole
            return []
        if isinstance(event, ToolCallArgs) and self._open and self._open["type"] == "function_call":
            self._open["arguments"] += event.text
            return [self.event("response.function_call_arguments.delta", item_id=self._open["id"],
                               output_index=self.index(), delta=event.text)]
        if isinstance(event, ToolCallEnd):  # a call the budget cut is `incomplete`, as OpenAI marks it
            return self._close("completed" if event.complete else "incomplete")
        if isinstance(event, Finish):
            return self._close("incomplete" if event.reason == "length" else "completed")
        return []

    def _freeform_input(self, text: str) -> list[dict[str, Any]]:
        """The output, as it comes, is the input of the forced custom tool: streamed as it is written."""
        out: list[dict[str, Any]] = []
        item = self._open
        if item is None or item["type"] != "custom_tool_call":
            out += self._close()
            item = {"id": new_id("ctc"), "type": "custom_tool_call", "call_id": new_id("call"),
                    "name": self.freeform, "input": "", "status": "in_progress"}
            out += self.open_item(item)
        if text:
            self._text += text
            out.append(self.event("response.custom_tool_call_input.delta", item_id=item["id"],
                                  output_index=self.index(), delta=text))
        return out

    def _summary(self, event: Event, sealer: ReasoningSealer) -> list[dict[str, Any]]:
        """A compaction turn's answer: exactly one compaction item, whole when it appears (a summary read in part
        would be wrong); the model's thinking is not part of it."""
        if isinstance(event, Text):
            self._text += event.text
            return []
        if not isinstance(event, Finish):
            return []
        item = {"id": new_id("cmp"), "type": "compaction", "encrypted_content": sealer.seal(self._text.strip())}
        self.response.output.append(item)
        return [self.event("response.output_item.added", output_index=self.index(), item=snapshot(item)),
                self.event("response.output_item.done", output_index=self.index(), item=snapshot(item))]

    def finish(self, reason: str, usage: ResponseUsage) -> dict[str, Any]:
        """The final status, usage and terminal event (after the Finish event was added)."""
        response = self.response
        response.usage = usage
        if reason == "length":
            response.status = "incomplete"
            response.incomplete_details = IncompleteDetails(reason="max_output_tokens")
            return self.lifecycle("response.incomplete")
        response.status = "completed"
        response.completed_at = int(time.time())
        return self.lifecycle("response.completed")

    def fail(self, error: APIError) -> list[dict[str, Any]]:
        """The events that end a response that failed: its open item closed as `incomplete`, an `error`
        event (the Responses stream's own error shape), then `response.failed`."""
        self.error = error
        out = self._close(status="incomplete")
        out.append(self.event("error", code=error.code or error.error_type, message=error.message,
                              param=error.param))
        self.response.status = "failed"
        # The response object's error codes are a closed set: everything rostra fails with is a server_error.
        self.response.error = ResponseError(code="server_error", message=error.message)
        out.append(self.lifecycle("response.failed"))
        return out

    # -- output items --------------------------------------------------------------------------
    def index(self) -> int:
        return len(self.response.output) - 1

    def open_item(self, item: dict[str, Any]) -> list[dict[str, Any]]:
        self.response.output.append(item)
        self._open, self._text, self._logprobs = item, "", []
        self._held, self._held_logprobs = "", []
        events = [self.event("response.output_item.added", output_index=self.index(), item=snapshot(item))]
        part = _empty_part(item["type"])
        if item["type"] == "reasoning" and self.summary:
            events.append(self.event("response.reasoning_summary_part.added", item_id=item["id"],
                                     output_index=self.index(), summary_index=0, part=dict(_SUMMARY_PART)))
        elif part is not None:
            events.append(self.event("response.content_part.added", item_id=item["id"], output_index=self.index(),
                                     content_index=0, part=part))
        return events

    def _write(self, kind: str, text: str, logprobs: list[dict[str, Any]] | None = None,
               phase: str = "final_answer") -> list[dict[str, Any]]:
        """`phase`: a message's (OpenAI's `phase`): commentary (gpt-oss's commentary channel) or the final answer;
        text of the other phase is a message of its own."""
        out: list[dict[str, Any]] = []
        item = self._open
        if item is None or item["type"] != kind or (kind == "message" and item["phase"] != phase):
            out += self._close()
            if kind == "message":
                item = {"id": new_id("msg"), "type": "message", "role": "assistant", "status": "in_progress",
                        "content": [], "phase": phase}
            else:
                item = {"id": new_id("rs"), "type": "reasoning", "summary": [], "content": [],
                        "status": "in_progress"}
            out += self.open_item(item)
        self._text += text
        if kind == "message":
            self._logprobs += logprobs or []
            out.append(self.event("response.output_text.delta", item_id=item["id"],
                                  output_index=self.index(), content_index=0, delta=text, logprobs=logprobs or []))
        elif self.summary:
            out.append(self.event("response.reasoning_summary_text.delta", item_id=item["id"],
                                  output_index=self.index(), summary_index=0, delta=text))
        else:
            out.append(self.event("response.reasoning_text.delta", item_id=item["id"],
                                  output_index=self.index(), content_index=0, delta=text))
        return out

    def _close(self, status: str = "completed") -> list[dict[str, Any]]:
        item, self._open = self._open, None
        if item is None:
            return []
        if self.mcp.owns(item):
            return self.mcp.close(item, status)
        index, item_id, out = self.index(), item["id"], []
        if item["type"] == "message":
            annotations = self.mcp.hosted.citations(self._text)  # file_search's sources
            part = {"type": "output_text", "text": self._text, "annotations": annotations, "logprobs": self._logprobs}
            item["content"] = [part]
            out += [self.event("response.output_text.annotation.added", item_id=item_id, output_index=index,
                               content_index=0, annotation_index=number, annotation=annotation)
                    for number, annotation in enumerate(annotations)]
            out += [self.event("response.output_text.done", item_id=item_id, output_index=index, content_index=0,
                               text=self._text, logprobs=self._logprobs),
                    self.event("response.content_part.done", item_id=item_id, output_index=index,
                               content_index=0, part=part)]
        elif item["type"] == "reasoning" and self.summary:
            summary = {"type": "summary_text", "text": self._text}
            item["summary"] = [summary]
            out += [self.event("response.reasoning_summary_text.done", item_id=item_id, output_index=index,
                               summary_index=0, text=self._text),
                    self.event("response.reasoning_summary_part.done", item_id=item_id, output_index=index,
                               summary_index=0, part=summary)]
        elif item["type"] == "reasoning":
            part = {"type": "reasoning_text", "text": self._text}
            item["content"] = [part]
            out += [self.event("response.reasoning_text.done", item_id=item_id, output_index=index,
                               content_index=0, text=self._text),
                    self.event("response.content_part.done", item_id=item_id, output_index=index,
                               content_index=0, part=part)]
        elif item["type"] == "custom_tool_call":
            if self.freeform is None:  # the call's JSON arguments: its input is read from them, whole
                item["input"] = call_item(self.routes.route(item["name"]), item["call_id"], self._text)["input"]
                out.append(self.event("response.custom_tool_call_input.delta", item_id=item_id, output_index=index,
                                      delta=item["input"]))
            else:  # streamed as written
                item["input"] = self._text
            out.append(self.event("response.custom_tool_call_input.done", item_id=item_id, output_index=index,
                                  input=item["input"]))
        elif item["type"] == "local_shell_call":
            item["action"] = call_item(self.routes.route("local_shell"), item["call_id"], self._text)["action"]
        elif item["type"] == "function_call":
            out.append(self.event("response.function_call_arguments.done", item_id=item_id, output_index=index,
                                  name=item["name"], arguments=item["arguments"]))
        if item["type"] == "reasoning" and self.sealer is not None:  # include: reasoning.encrypted_content
            item["encrypted_content"] = self.sealer.seal(self._text)
        item["status"] = status
        if item["type"] == "custom_tool_call":  # OpenAI's custom tool calls have no status
            del item["status"]
        out.append(self.event("response.output_item.done", output_index=index, item=snapshot(item)))
        return out


_ID_PREFIX = {"function": "fc", "custom": "ctc", "local_shell": "lsh"}
_WHOLE_CALLS = {"custom_tool_call", "local_shell_call"}  # their items are made from the whole arguments
_SUMMARY_PART = {"type": "summary_text", "text": ""}


def _empty_part(item_type: str) -> dict[str, Any] | None:
    if item_type == "message":
        return {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    if item_type == "reasoning":
        return {"type": "reasoning_text", "text": ""}
    return None

