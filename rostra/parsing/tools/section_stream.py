"""SectionStream: the calls of a section (DeepSeek, Kimi K2), streamed as the model writes them.

A section holds calls, each `call_begin HEAD {arguments} … call_end`. Once a call's head is read
(its name known, the arguments' "{" in sight) the call starts and its arguments stream through
ArgumentsWriter; the object's closing brace ends it and the rest, up to call_end (a closing code
fence, say), is skipped. The head is format-specific: the parser's `read_head`.

Until the first call starts, the section can still be parsed whole, all or nothing, as before: a
first call that cannot stream (an unknown tool, arguments that are not an object) hands the whole
section back to the parser (`started` stays false). Once a call went out it cannot be taken back,
so a later call that cannot stream is parsed whole at its call_end (text if it is not a call),
stray text between calls is text, and arguments that break are closed where they broke.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rostra.parsing.events import Event, Text, ToolCallArgs, ToolCallEnd, ToolCallStart
from rostra.parsing.tools.arguments import ArgumentsWriter
from rostra.parsing.tools.base import partial_suffix
from rostra.parsing.tools.buffered_stream import WHOLE, BufferedStream

if TYPE_CHECKING:
    from rostra.parsing.tools.base import SectionToolParser

log = logging.getLogger("rostra.tools")

HEAD_LIMIT = 2000  # a head not resolved in this much text is not streamable: parsed whole
# BETWEEN: before a call_begin; WHOLE: the section is the parser's to parse whole; RAW: a call
# kept to its call_end and parsed whole; SKIP: dropped up to call_end.
BETWEEN, HEAD, ARGS, RAW, SKIP = "between", "head", "args", "raw", "skip"


class SectionStream(BufferedStream):
    def __init__(self, parser: SectionToolParser):
        super().__init__()
        self.parser = parser
        self.state = BETWEEN
        self.started = False  # a call went out
        self._searched = 0  # RAW / SKIP: call_end does not start before this index of _buf
        self._index = -1
        self._writer = ArgumentsWriter()

    def end(self) -> list[Event]:
        """The section ended (or the output did): an open call ends, a raw one is parsed."""
        out: list[Event] = []
        if self.state == ARGS:
            out = self._close_call()
        elif self.state == RAW:
            out = self._parse_raw(self._buf, closed=False)
        elif self.state == HEAD and self._buf.strip():
            log.info("tool call cut off before its arguments dropped: %.200r", self._buf)
        self.state, self._buf = SKIP, ""
        return out

    # -- one state at a time; each returns whether to go on with what is left of _buf --------

    def _step(self, out: list[Event]) -> bool:
        if self.state == BETWEEN:
            return self._between(out)
        if self.state == HEAD:
            return self._head(out)
        if self.state == ARGS:
            return self._arguments(out)
        return self._to_call_end(out)  # RAW, SKIP

    def _between(self, out: list[Event]) -> bool:
        begin = self.parser.call_begin
        self._buf = self._buf.lstrip()
        if self._buf.startswith(begin):
            self._buf, self.state = self._buf[len(begin):], HEAD
            return True
        if begin.startswith(self._buf):
            return False  # (part of) a call_begin: wait for the rest
        if not self.started:
            return self._give_up()
        # Stray text after a call went out: text, up to the next call_begin.
        at = self._buf.find(begin)
        stray = self._buf[:at] if at >= 0 else self._buf[:len(self._buf) - partial_suffix(self._buf, begin)]
        log.info("text in a tool-call section kept as text: %.200r", stray)
        out.append(Text(stray))
        self._buf = self._buf[len(stray):]
        return at >= 0

    def _head(self, out: list[Event]) -> bool:
        end = self._buf.find(self.parser.call_end)
        head = self.parser.read_head(self._buf if end < 0 else self._buf[:end])
        if head is None:
            if end < 0 and len(self._buf) <= HEAD_LIMIT:
                return False
            return self._give_up()
        if head.name not in self.parser.tools:
            return self._give_up()
        max_calls = self.parser.max_calls
        if max_calls is not None and self.parser.calls >= max_calls:
            log.info("dropped tool call %r: parallel_tool_calls is false", head.name)
            self.state = SKIP
            return True
        self.started, self.state, self._writer = True, ARGS, ArgumentsWriter()
        call_id = head.id or self.parser.call_id(head.name)
        self._index = self.parser.calls
        self.parser.calls += 1
        out.append(ToolCallStart(self._index, call_id, head.name))
        self._buf = self._buf[head.args_at:]
        return True

    def _arguments(self, out: list[Event]) -> bool:
        text = self._writer.feed(self._buf)
        if text:
            out.append(ToolCallArgs(self._index, text))
        if not (self._writer.done or self._writer.broken):
            self._buf = ""
            return False
        # Broken: the character that broke it may be the start of call_end; search from it.
        self._buf = self._buf[self._writer.consumed - (1 if self._writer.broken else 0):]
        out += self._close_call()
        self.state = SKIP
        return True

    def _to_call_end(self, out: list[Event]) -> bool:
        end = self.parser.call_end
        at = self._buf.find(end, self._searched)
        if at < 0:
            self._searched = max(0, len(self._buf) - len(end) + 1)
            if self.state == SKIP:  # nothing of it is kept but what could begin call_end
                keep = partial_suffix(self._buf, end)
                self._buf, self._searched = self._buf[len(self._buf) - keep:], 0
            return False
        if self.state == RAW:
            out += self._parse_raw(self._buf[:at])
        self._buf, self._searched, self.state = self._buf[at + len(end):], 0, BETWEEN
        return True

    # -- helpers -------------------------------------------------------------------------

    def _give_up(self) -> bool:
        """What cannot stream: before any call went out, the whole section is the parser's (all
        or nothing); after, the call is kept to its call_end and parsed whole (RAW)."""
        if not self.started:
            self.state, self._buf = WHOLE, ""
            return False
        self.state = RAW
        return True

    def _close_call(self) -> list[Event]:
        if self._writer.broken:
            log.warning("tool call arguments that are not JSON were cut where they broke")
        tail = self._writer.close()
        events: list[Event] = [ToolCallArgs(self._index, tail)] if tail else []
        return events + [ToolCallEnd(self._index)]

    def _parse_raw(self, body: str, closed: bool = True) -> list[Event]:
        raw = self.parser.call_begin + body + (self.parser.call_end if closed else "")
        call = self.parser.parse_call(body)
        calls = self.parser.known([call] if call else None, raw)
        return self.parser.emit(calls) if calls else [Text(raw)]
