"""Parsers for forced tool choice, whose output constrained decoding has shaped already.

tool_choice "required": the model writes a JSON list of {"name", "arguments"} calls.
tool_choice named: the model writes only the arguments object of that one function.

The start of such a call is unambiguous, so its arguments stream as they are written (a named
call from the first "{", a listed call once its name is read: CallStream). Output of another
shape (an engine that does not constrain, e.g. the scripted one or a remote) is parsed whole at
the end, as before: calls if it is exactly that, else text.
"""

from __future__ import annotations

from typing import Sequence

from rostra.parsing.events import Event, Text, ToolCallArgs, ToolCallEnd, ToolCallStart
from rostra.parsing.tools.arguments import ArgumentsWriter
from rostra.parsing.tools.base import ParsedCall, ToolParser, ToolSpec, calls_from_json, loads_strict
from rostra.parsing.tools.call_stream import CLOSED, DROPPED, WHOLE, CallStream

SPACE = " \t\r\n"


class _WholeOutputParser(ToolParser):
    def __init__(self, tools: Sequence[ToolSpec], max_calls: int | None = None):
        super().__init__(tools, max_calls)
        self._buffer: list[str] = []

    def whole(self) -> list[Event]:
        raw = "".join(self._buffer)
        calls = self.known(self.parse(raw), raw) if raw.strip() else None
        return self.emit(calls) if calls else ([Text(raw)] if raw else [])

    def parse(self, raw: str) -> list[ParsedCall] | None:
        raise NotImplementedError


class RequiredCallsParser(_WholeOutputParser):
    """[{"name": …, "arguments": {…}}, …]: each call streams once its name is read."""

    name = "required"

    def __init__(self, tools: Sequence[ToolSpec], max_calls: int | None = None):
        super().__init__(tools, max_calls)
        self._mode = "open"  # open (before "["), element, between, done, whole
        self._stream: CallStream | None = None

    def parse(self, raw: str) -> list[ParsedCall] | None:
        return calls_from_json(raw)

    def feed_text(self, text: str) -> list[Event]:
        self._buffer.append(text)
        events: list[Event] = []
        while text and self._mode not in ("done", "whole"):
            if self._mode == "element" and self._stream is not None:  # (element: a call is open)
                more, text = self._stream.feed(text)
                events += more
                if self._stream.state in (WHOLE, DROPPED):
                    self._mode = "done" if self.calls else "whole"
                elif self._stream.state == CLOSED:
                    self._mode = "between"
                continue
            text = text.lstrip(SPACE)
            if not text:
                break
            if (self._mode, text[0]) in (("open", "["), ("between", ",")):
                self._mode, self._stream, text = "element", CallStream(self), text[1:]
            else:  # "]" ends the list; anything else is not this shape
                self._mode = "done" if self.calls or text[0] == "]" else "whole"
        return events

    def finish(self) -> list[Event]:
        if self.calls:  # calls were streamed: the output was this shape
            return self._stream.end() if self._stream is not None else []
        return self.whole()


class NamedCallParser(_WholeOutputParser):
    """The named function's arguments object, streamed from its first "{"."""

    name = "named"

    def __init__(self, tools: Sequence[ToolSpec], function: str):
        super().__init__(tools)
        self.function = function
        self._writer: ArgumentsWriter | None = None
        self._whole = False

    def parse(self, raw: str) -> list[ParsedCall] | None:
        try:
            arguments = loads_strict(raw)
        except (ValueError, RecursionError):
            return None
        return [ParsedCall(self.function, arguments)] if isinstance(arguments, dict) else None

    def feed_text(self, text: str) -> list[Event]:
        if self._writer is not None:
            out = self._writer.feed(text)  # after the object's "}", the rest is ignored
            return [ToolCallArgs(0, out)] if out else []
        self._buffer.append(text)
        if self._whole:
            return []
        raw = "".join(self._buffer)
        lead = raw.lstrip(SPACE)
        if not lead:
            return []
        if lead[0] != "{" or self.function not in self.tools:
            self._whole = True
            return []
        self.calls = 1
        self._writer = ArgumentsWriter()
        out = self._writer.feed(lead)
        events: list[Event] = [ToolCallStart(0, self.new_call_id(), self.function)]
        return events + ([ToolCallArgs(0, out)] if out else [])

    def finish(self) -> list[Event]:
        if self._writer is None:
            return self.whole()
        tail = self._writer.close()
        events: list[Event] = [ToolCallArgs(0, tail)] if tail else []
        return events + [ToolCallEnd(0)]
