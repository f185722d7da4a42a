"""CallEmitter: the one gate every tool call passes, whoever recognised it.

It is the last stage of a choice's pipeline (after the reasoning parser, which may emit calls
itself, as gpt-oss's does, and after the tool parser), and relayed upstream calls pass it too.
It holds the request's side of the contract:

- only tools of the request are called, and none with tool_choice "none": such a call becomes
  text (its arguments), as a call a parser cannot read does;
- parallel_tool_calls false: calls after the first are dropped (and logged);
- indexes count 0, 1, 2... over the calls let through; a call without an id gets one;
- arguments are valid JSON whatever the source wrote (ArgumentsWriter: NaN stops them, a cut-off
  is closed) and, when strict (a forced call, or a tool marked `strict`), hold only properties
  the schema lists (unless it allows others); a missing required one is logged.

Arguments stream as they arrive, so the events out are exactly what a client sees and the
non-streamed response, their fold, cannot differ.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Sequence

from rostra.parsing.events import Event, Finish, Text, ToolCallArgs, ToolCallEnd, ToolCallStart
from rostra.parsing.tools.arguments import ArgumentsWriter
from rostra.parsing.tools.base import ToolSpec, openai_call_id

log = logging.getLogger("rostra.tools")


@dataclass
class _Call:
    name: str
    index: int | None  # None: not let through
    as_text: bool = False  # not let through, and its arguments become text
    writer: ArgumentsWriter | None = None
    raw: list[str] = field(default_factory=list)  # as_text: the arguments as written


def allowed_properties(spec: ToolSpec) -> frozenset[str] | None:
    """The properties a strict call may carry; None when the schema allows any."""
    extra = spec.parameters.get("additionalProperties", False)
    if extra is not False:
        return None
    return frozenset(spec.parameters.get("properties") or {})


class CallEmitter:
    def __init__(self, tools: Sequence[ToolSpec], allow_calls: bool = True, max_calls: int | None = None,
                 strict: bool = False):
        self.tools = {tool.name: tool for tool in tools}
        self.allow_calls = allow_calls
        self.max_calls = max_calls
        self.strict = strict  # every call is strict (forced tool choice)
        self.count = 0
        self._open: dict[int, _Call] = {}  # by the source's index

    def feed(self, events: list[Event]) -> list[Event]:
        out: list[Event] = []
        for event in events:
            if isinstance(event, ToolCallStart):
                out += self._start(event)
            elif isinstance(event, ToolCallArgs):
                out += self._arguments(event)
            elif isinstance(event, ToolCallEnd):
                out += self._end(event.index, event.complete)
            elif isinstance(event, Finish) and event.reason == "tool_calls" and not self.count:
                out.append(replace(event, reason="stop"))  # (a relayed upstream's) calls all left out
            else:
                out.append(event)
        return out

    def finish(self) -> list[Event]:
        out: list[Event] = []
        for index in list(self._open):
            out += self._end(index)
        return out

    def _start(self, event: ToolCallStart) -> list[Event]:
        out = self._end(event.index) if event.index in self._open else []
        spec = self.tools.get(event.name)
        if spec is None or not self.allow_calls:
            log.info("tool call to %r left as text: %s", event.name,
                     "tool_choice is none" if spec else "not a tool of the request")
            self._open[event.index] = _Call(event.name, None, as_text=True)
            return out
        if self.max_calls is not None and self.count >= self.max_calls:
            log.info("dropped tool call %r: parallel_tool_calls is false", event.name)
            self._open[event.index] = _Call(event.name, None)
            return out
        strict = self.strict or spec.strict
        index = self.count
        call = _Call(event.name, index, writer=ArgumentsWriter(allowed_properties(spec) if strict else None))
        self.count += 1
        self._open[event.index] = call
        return out + [ToolCallStart(index, event.id or openai_call_id(), event.name)]

    def _arguments(self, event: ToolCallArgs) -> list[Event]:
        call = self._open.get(event.index)
        if call is None:
            log.warning("tool-call arguments for a call never started (index %d) dropped", event.index)
            return []
        if call.writer is None or call.index is None:  # not let through (the two go together)
            call.raw.append(event.text)
            return []
        text = call.writer.feed(event.text)
        return [ToolCallArgs(call.index, text)] if text else []

    def _end(self, source_index: int, complete: bool = True) -> list[Event]:
        call = self._open.pop(source_index, None)
        if call is None:
            return []
        if call.writer is None or call.index is None:  # not let through (the two go together)
            raw = "".join(call.raw)
            return [Text(raw)] if call.as_text and raw else []
        writer = call.writer
        tail = writer.close()
        if writer.broken:
            log.warning("tool call %r: arguments that are not JSON were cut where they broke", call.name)
        if writer.dropped:
            log.info("tool call %r: properties outside the schema left out: %s", call.name, writer.dropped)
        self._check_required(call.name, writer)
        events: list[Event] = [ToolCallArgs(call.index, tail)] if tail else []
        return events + [ToolCallEnd(call.index, complete)]

    def _check_required(self, name: str, writer: ArgumentsWriter) -> None:
        spec = self.tools[name]
        if not (self.strict or spec.strict):
            return
        missing = [key for key in spec.parameters.get("required") or () if key not in writer.seen]
        if missing:
            log.warning("strict tool call %r lacks required properties %s", name, missing)
