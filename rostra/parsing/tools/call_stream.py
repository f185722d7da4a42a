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
import logging
import re

from rostra.parsing.events import Event, ToolCallArgs, ToolCallEnd, ToolCallStart
from rostra.parsing.tools.arguments import ArgumentsWriter
from rostra.parsing.tools.base import ToolParser

log = logging.getLogger("rostra.tools")

HEAD = re.compile(r'\s*\{\s*"name"\s*:\s*"((?:[^"\\\n]|\\.)*)"\s*,\s*"(?:arguments|parameters)"\s*:\s*(\S)')
HEAD_LIMIT = 2000  # a head not found in this much text is not coming: stop looking

# CLOSED: the object ended, what follows is the caller's; DROPPED: ended, the rest is dropped.
HEAD_STATE, ARGS, TAIL, CLOSED, DROPPED, WHOLE = "head", "args", "tail", "closed", "dropped", "whole"


class CallStream:
    """`head`: the pattern of a call's head (group 1 its name, JSON-escaped; group 2 the first character of its
    arguments), HEAD's `{"name": …, "arguments": ` unless a format names its keys otherwise; `opening`: what the
    head begins with, so that a block that does not is known at once to be no such head ("": a name, say)."""

    def __init__(self, parser: ToolParser, head: re.Pattern[str] = HEAD, opening: str = "{"):
        self.parser = parser
        self.head = head
        self.opening = opening
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
        found = self.head.match(self._head)
        if not found:
            stripped = self._head.lstrip()
            if len(self._head) > HEAD_LIMIT or (stripped and not stripped.startswith(self.opening)):
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


class CallListStream:
    """A JSON list of call objects `[{…}, {…}]` (or one object), each streamed by a CallStream.

    Until the first call starts, the list can still be parsed whole (`started` false: a first
    object that cannot stream hands the list back). After, an object that cannot stream, and
    anything that is not `,` / `]` between objects, ends the list: the rest is dropped.
    """

    def __init__(self, parser: ToolParser, bracket: bool, head: re.Pattern[str] = HEAD):
        self.parser = parser
        self.head = head  # each call's head (CallStream)
        self.started = False
        self.state = "before" if bracket else "item"  # before | item | call | after | done
        self._call: CallStream | None = None

    def feed(self, text: str) -> tuple[list[Event], str]:
        out: list[Event] = []
        while text and self.state != "done":
            if self.state == "call":
                text = self._in_call(text, out)
                continue
            stripped = text.lstrip()
            if not stripped:
                break
            text, char = stripped[1:], stripped[0]
            if self.state == "before" and char == "[":
                self.state = "item"
            elif self.state == "item" and char == "{" and self._full():
                self._stop("parallel_tool_calls is false")
            elif self.state == "item" and char == "{":
                self.state, self._call = "call", CallStream(self.parser, self.head)
                text = char + text
            elif self.state == "after" and char == ",":
                self.state = "item"
            elif self.state == "after" and char == "]":
                self.state = "done"
            else:
                self._stop(f"unexpected {char!r} in a list of calls")
        return out, ""

    def end(self) -> list[Event]:
        call, self._call, self.state = self._call, None, "done"
        return call.end() if call is not None else []

    def _in_call(self, text: str, out: list[Event]) -> str:
        assert self._call is not None
        events, after = self._call.feed(text)
        out += events
        self.started = self.started or self._call.started
        if self._call.state == WHOLE:
            self._stop("a call object that cannot stream")
        elif self._call.state in (CLOSED, DROPPED):
            self.state, self._call = ("after" if self._call.state == CLOSED else "done"), None
            return after
        return ""

    def _full(self) -> bool:
        return self.parser.max_calls is not None and self.parser.calls >= self.parser.max_calls

    def _stop(self, why: str) -> None:
        if self.started:
            log.info("rest of a streamed list of calls dropped: %s", why)
        self.state, self._call = "done", None
