"""CallStream: one call object {"name": N, "arguments": {...}}, streamed as the model writes it.

Used where a call's start is unambiguous (inside format markup such as <tool_call>, or a forced
call): once the head `{"name": "get_weather", "arguments": {` has been read and the name is a
tool of the request, the call starts (ToolCallStart) and its arguments stream (ToolCallArgs, via
ArgumentsWriter); the object's closing brace ends the stream. Anything else (another key order,
arguments as a JSON string, an unknown name) is not streamed: the caller parses the whole block
at its end, as before.

A started call cannot be taken back. If its arguments stop being JSON or are cut off, the call
still ends: its arguments are what was valid, closed into valid JSON (ArgumentsWriter.close), and
the rest of the block is dropped. The same events make the stream and its fold, so both end alike.
"""

from __future__ import annotations

import json
import re

from rostra.parsing.events import Event, ToolCallArgs, ToolCallEnd, ToolCallStart
from rostra.parsing.tools.arguments import ArgumentsWriter
from rostra.parsing.tools.base import ToolParser

HEAD = re.compile(r'\s*\{\s*"name"\s*:\s*"((?:[^"\\\n]|\\.)*)"\s*,\s*"(?:arguments|parameters)"\s*:\s*(\S)')
HEAD_LIMIT = 2000  # a head not found in this much text is not coming: stop looking

# CLOSED: the object ended, what follows is the caller's; DROPPED: ended, the rest is dropped.
HEAD_STATE, ARGS, TAIL, CLOSED, DROPPED, WHOLE = "head", "args", "tail", "closed", "dropped", "whole"


class CallStream:
    def __init__(self, parser: ToolParser):
        self.parser = parser
        self.state = HEAD_STATE
        self._head = ""
        self._index = -1
        self._writer = ArgumentsWriter()

    @property
    def started(self) -> bool:
        return self.state in (ARGS, TAIL, CLOSED, DROPPED)

    def feed(self, text: str) -> tuple[list[Event], str]:
        """Events for `text`, and what follows the call object once it closed ("" before)."""
        if self.state == HEAD_STATE:
            return self._read_head(text)
        if self.state == ARGS:
            return self._arguments(text)
        if self.state == TAIL:
            return self._tail(text)
        if self.state == CLOSED:
            return [], text
        return [], ""  # WHOLE: the caller keeps the raw text; DROPPED: ignored

    def end(self) -> list[Event]:
        """The block ended: a started call that is still open ends here."""
        if self.state not in (ARGS, TAIL):
            return []
        self.state = CLOSED
        tail = self._writer.close()
        events: list[Event] = [ToolCallArgs(self._index, tail)] if tail else []
        return events + [ToolCallEnd(self._index)]

    def _read_head(self, text: str) -> tuple[list[Event], str]:
        self._head += text
        found = HEAD.match(self._head)
        if not found:
            stripped = self._head.lstrip()
            if len(self._head) > HEAD_LIMIT or (stripped and not stripped.startswith("{")):
                self.state = WHOLE
            return [], ""
        try:
            name = json.loads(f'"{found.group(1)}"')
        except ValueError:
            name = None
        if found.group(2) != "{" or name not in self.parser.tools:
            self.state = WHOLE  # arguments as a string, or a call the whole-block parse decides
            return [], ""
        self.state = ARGS
        self._index = self.parser.calls
        self.parser.calls += 1
        rest = self._head[found.start(2):]
        events, after = self._arguments(rest)
        return [ToolCallStart(self._index, self.parser.new_call_id(), name), *events], after

    def _arguments(self, text: str) -> tuple[list[Event], str]:
        out = self._writer.feed(text)
        events: list[Event] = [ToolCallArgs(self._index, out)] if out else []
        if self._writer.broken:
            events += self.end()
            self.state = DROPPED  # the rest of the block is not read
            return events, ""
        if self._writer.done:
            self.state = TAIL
            more, after = self._tail(text[self._writer.consumed:])
            return events + more, after
        return events, ""

    def _tail(self, text: str) -> tuple[list[Event], str]:
        """After the arguments: the object's closing brace ends the call."""
        stripped = text.lstrip()
        if not stripped:
            return [], ""
        events = self.end()
        if stripped[0] == "}":
            return events, stripped[1:]
        self.state = DROPPED  # other keys after the arguments: dropped with the rest
        return events, ""
