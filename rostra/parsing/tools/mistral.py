"""mistral: [TOOL_CALLS] followed by the calls, which run to the end of the output.

Two generations of the format:
- before tokenizer v11 (Mistral 7B v0.3, Mixtral 8x22B, Nemo...): a JSON list of calls,
      [TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Oslo"}}, {"name": "add", ...}]
- v11 and later (Mistral Small 3.x, Magistral, Devstral...): the name, then its JSON arguments,
  one [TOOL_CALLS] per call; some versions put [ARGS] (and [CALL_ID] <id>) before the arguments:
      [TOOL_CALLS]get_weather{"city": "Oslo"}[TOOL_CALLS]add[ARGS]{"a": 1}

Text before the first [TOOL_CALLS] is content. Each [TOOL_CALLS] opens a segment that runs up to
the next one (or the end of the output). A v11 segment streams (_Streamed): once the name and the
arguments' "{" are read and the name is a tool of the request, the call starts and its arguments
go out as they are written; arguments that break are closed where they broke, and text after them
is text. A pre-v11 list (or single object) streams call by call (CallListStream): each object's
arguments as they are written, once its `{"name": ..., "arguments": {` is read; an object that cannot
stream before any call went out leaves the list to be decided whole, after one, ends the list. Any other
segment is decided at its end: one or more calls or, when it does not parse or names an unknown tool, text. Call ids are 9 letters and digits, the
only form Mistral's chat templates accept when the calls are sent back.
"""

from __future__ import annotations

import re
from typing import Sequence

from rostra.parsing.events import Event, Text, ToolCallArgs, ToolCallEnd, ToolCallStart
from rostra.parsing.tools.arguments import ArgumentsWriter
from rostra.parsing.tools.call_stream import CallListStream
from rostra.parsing.tools.base import (ParsedCall, ToolParser, ToolSpec, merge_text, alphanumeric_id,
                                       calls_from_json, loads_strict, partial_suffix)

MARKER = "[TOOL_CALLS]"

# v11+: the name, then optionally [CALL_ID] <id> and [ARGS], then the arguments object.
_NAMED = re.compile(r"([^\s\[\]{}]+)\s*(?:\[CALL_ID\]\s*[A-Za-z0-9]*\s*)?(?:\[ARGS\])?\s*")
HEAD_LIMIT = 2000  # a v11 head (name, id, [ARGS]) not done in this much text is not streamed


class _Streamed:
    """A v11 call streaming: its arguments through an ArgumentsWriter, then the text after them."""

    def __init__(self, index: int):
        self.index = index
        self.writer = ArgumentsWriter()
        self.after: list[str] = []  # text after the arguments object

    def feed(self, text: str) -> list[Event]:
        if self.writer.done or self.writer.broken:
            self.after.append(text if self.writer.done else "")
            return []
        out = self.writer.feed(text)
        if self.writer.done:
            self.after.append(text[self.writer.consumed:])
        return [ToolCallArgs(self.index, out)] if out else []

    def end(self) -> list[Event]:
        tail, after = self.writer.close(), "".join(self.after).strip()
        events: list[Event] = [ToolCallArgs(self.index, tail)] if tail else []
        return events + [ToolCallEnd(self.index)] + ([Text(after)] if after else [])


class MistralToolParser(ToolParser):
    name = "mistral"

    def __init__(self, tools: Sequence[ToolSpec], max_calls: int | None = None):
        super().__init__(tools, max_calls)
        self._pending = ""  # before the first marker: a tail that could start one; after: the open segment
        self._inside = False
        self._searched = 0  # inside: no marker starts before this index of _pending
        self._stream: _Streamed | None = None  # inside: the segment's call, streaming
        self._list: CallListStream | None = None  # inside: the segment's pre-v11 calls, streaming
        self._whole = False  # inside: the segment is decided at its end, not streamed
        self._fed = 0  # inside, streaming: _pending up to here went to the stream

    def new_call_id(self) -> str:
        return alphanumeric_id(9)

    def feed_text(self, text: str) -> list[Event]:
        self._pending += text
        out: list[Event] = []
        if not self._inside:
            at = self._pending.find(MARKER)
            if at < 0:
                keep = partial_suffix(self._pending, MARKER)
                out.append(Text(self._pending[: len(self._pending) - keep]))
                self._pending = self._pending[len(self._pending) - keep:]
                return merge_text(out)
            out.append(Text(self._pending[:at]))
            self._pending = self._pending[at:]
            self._inside = True
        # A segment is complete once the next marker begins (the marker is whole: a partial
        # one is not found, and the segment waits). Search only where a new one could be.
        while (at := self._pending.find(MARKER, max(len(MARKER), self._searched))) >= 0:
            out += self._stream_to(at) + self._close(self._pending[:at])
            self._pending = self._pending[at:]
            self._searched = 0
        self._searched = len(self._pending) - len(MARKER) + 1
        out += self._stream_to(len(self._pending) - partial_suffix(self._pending, MARKER))
        return merge_text(out)

    def finish(self) -> list[Event]:
        raw, self._pending = self._pending, ""
        if self._inside:
            return self._stream_to(len(raw), raw) + self._close(raw)
        return [Text(raw)] if raw else []

    def _stream_to(self, upto: int, pending: str | None = None) -> list[Event]:
        """Stream the open segment up to `upto` (where a marker could begin)."""
        pending = self._pending if pending is None else pending
        if self._whole:
            return []
        if self._stream is None and self._list is None:
            return self._read_head(pending[len(MARKER): upto])
        piece, self._fed = pending[self._fed: upto], max(self._fed, upto)
        if self._list is not None:
            return self._list.feed(piece)[0]
        assert self._stream is not None
        return self._stream.feed(piece)

    def _read_head(self, body: str) -> list[Event]:
        """`name[CALL_ID]id[ARGS]{`: a known tool's call starts at its arguments' "{"."""
        stripped = body.lstrip()
        if stripped[:1] in ("[", "{"):  # pre-v11: a list of call objects (or one); v11 starts with the name
            self._list, self._fed = CallListStream(self, bracket=stripped[0] == "["), len(MARKER) + len(body)
            return self._list.feed(stripped)[0]
        brace = stripped.find("{")
        if brace < 0:
            self._whole = len(body) > HEAD_LIMIT
            return []
        named = _NAMED.match(stripped, 0, brace)
        full = self.max_calls is not None and self.calls >= self.max_calls
        if not named or named.end() != brace or named.group(1) not in self.tools or full:
            self._whole = True  # decided at the segment's end, as before
            return []
        self._stream, self._fed = _Streamed(self.calls), len(MARKER) + len(body)
        self.calls += 1
        start = ToolCallStart(self._stream.index, self.new_call_id(), named.group(1))
        return [start, *self._stream.feed(stripped[brace:])]

    def _close(self, raw: str) -> list[Event]:
        stream, calls_list = self._stream, self._list
        self._stream, self._list, self._whole, self._fed = None, None, False, 0
        if stream is not None:
            return stream.end()
        if calls_list is not None and calls_list.started:
            return calls_list.end()
        calls = self.known(_parse_segment(raw[len(MARKER):]), raw)
        return self.emit(calls) if calls else [Text(raw)]


def _parse_segment(segment: str) -> list[ParsedCall] | None:
    body = segment.strip()
    try:
        if body[:1] in ("[", "{"):  # pre-v11: a list of call objects (or one)
            return calls_from_json(body)
        named = _NAMED.match(body)
        if not named:
            return None
        arguments = loads_strict(body[named.end():])
    except (ValueError, RecursionError):  # not JSON; or nested too deep to decode
        return None
    return [ParsedCall(named.group(1), arguments)] if isinstance(arguments, dict) else None
