"""granite: IBM Granite 3.x, a marker followed by a JSON list of calls.

    <|tool_call|>[{"name": "get_weather", "arguments": {"city": "Oslo"}}, {"name": "add", "arguments": {"a": 1}}]

Granite 3.0 writes the marker <|tool_call|>; 3.1 and later write <tool_call> (no closing tag).
Both are accepted. 3.1 sometimes leaves the marker out, so a JSON list that starts the output
(whitespace aside) is a call list too, provided every name in it is a tool of the request.

Text before the marker is content. The list runs until its brackets balance (brackets inside
strings do not count); after that we are back in text, which may hold another marker.
Whitespace after the last list is treated as markup and dropped. A list that does not parse,
names an unknown tool or is cut off before it closes stays text, unless its first call already
streams (CallListStream): a call starts once `{"name": …, "arguments": {` is read, its arguments
go out as they are written, and a list cut off or broken after that ends with what was valid.
"""

from __future__ import annotations

from typing import Sequence

from rostra.parsing.events import Event, Text
from rostra.parsing.tools.base import ToolParser, ToolSpec, calls_from_json, merge_text, partial_suffix
from rostra.parsing.tools.call_stream import CallListStream

MARKERS = ("<|tool_call|>", "<tool_call>")

_START, _TEXT, _MARKER, _LIST = "start", "text", "marker", "list"


class GraniteToolParser(ToolParser):
    """Four states; each decision depends only on the text seen so far, never on how it was
    split into pieces, so a stream folds to the same result as the whole output:
    - start: only whitespace so far; "[" opens a bare list, anything else goes to text.
    - text: released, except a tail that could be the start of a marker.
    - marker: a marker and the whitespace after it are held; "[" (or "{", a lone call) opens
      the list, anything else releases the marker as text.
    - list: buffered until the brackets balance, then parsed: calls or, failing that, text.
    """

    name = "granite"
    markers: tuple[str, ...] = MARKERS  # what opens a list of calls (phi4_mini.py reads the same shape after its own)
    # What closes the block a marker opened (xlam.py: "```json" … "```"): dropped after the list, as markup.
    closers: dict[str, str] = {}

    def __init__(self, tools: Sequence[ToolSpec], max_calls: int | None = None):
        super().__init__(tools, max_calls)
        self._state = _START
        self._buf = ""  # not yet released; in marker/list it begins with the marker (or leading whitespace)
        self._marker_len = 0
        self._after_call = False  # text right after a list: whitespace-only so far is held
        self._closer = ""  # what closes the block of the list being read or just read (closers)
        self._open = 0  # list: index in _buf of the opening bracket
        self._pos = 0  # list: next index of _buf to scan (scanning resumes, never restarts)
        self._depth = 0
        self._in_string = False
        self._escape = False
        self._first = True  # list: the first character after the opening bracket is still to come
        self._stream: CallListStream | None = None  # list: its calls, streaming
        self._fed = 0  # list: _buf up to here went to the stream

    def feed_text(self, text: str) -> list[Event]:
        self._buf += text
        out: list[Event] = []
        while self._step(out):
            pass
        return merge_text(out)

    def finish(self) -> list[Event]:
        if self._state == _LIST and self._stream is not None and self._stream.started:
            self._state, self._buf = _TEXT, ""
            return self._stream.end()  # cut off after a call started: it ends with what was valid
        rest, self._buf = self._buf, ""
        if self._state == _TEXT and self._after_call:
            rest = ""  # only whitespace trails the last list
        self._state = _TEXT
        self._after_call = False
        # A list still open here was cut off: it cannot parse, so it stays text.
        return [Text(rest)] if rest else []

    def _step(self, out: list[Event]) -> bool:
        """One move of the machine; False when it must wait for more text."""
        buf = self._buf
        if self._state == _START:
            body = buf.lstrip()
            if not body:
                return False
            if body[0] == "[":
                self._closer = ""
                self._open_list(len(buf) - len(body))
            else:
                self._state = _TEXT
            return True
        if self._state == _TEXT:
            if self._after_call:
                after = self._after_list(buf)
                if after is not None:
                    return after
            hits = [(at, marker) for marker in self.markers if (at := buf.find(marker)) >= 0]
            if not hits:
                self._release(out, len(buf) - max(partial_suffix(buf, m) for m in self.markers))
                return False
            at, marker = min(hits)
            self._release(out, at)
            self._marker_len, self._closer = len(marker), self.closers.get(marker, "")
            self._state = _MARKER
            return True
        if self._state == _MARKER:
            body = buf[self._marker_len:].lstrip()
            if not body:
                return False
            if body[0] in "[{":
                self._open_list(len(buf) - len(body))
            else:  # a marker not followed by calls: plain text
                self._release(out, self._marker_len)
                self._state = _TEXT
            return True
        return self._scan(out)

    def _after_list(self, buf: str) -> bool | None:
        """Right after a list: whitespace is held, and so is the closer of the marker's block, then dropped. A
        step's result, or None: the text goes on as text."""
        body = buf.lstrip()
        if not body or (self._closer and self._closer.startswith(body)):
            return False  # wait: whitespace only, or (part of) the closer
        if self._closer and body.startswith(self._closer):
            self._buf, self._closer = body[len(self._closer):], ""
            return True
        self._after_call, self._closer = False, ""
        return None

    def _open_list(self, at: int) -> None:
        self._state = _LIST
        self._open, self._pos = at, at + 1
        self._depth, self._in_string, self._escape, self._first = 1, False, False, True
        full = self.max_calls is not None and self.calls >= self.max_calls
        self._stream = None if full else CallListStream(self, bracket=self._buf[at] == "[")
        self._fed = at

    def _scan(self, out: list[Event]) -> bool:
        buf, i = self._buf, self._pos
        while i < len(buf):
            char = buf[i]
            if self._first and not char.isspace():
                self._first = False
                if buf[self._open] == "[" and char != "{":
                    # Not a list of call objects ("[1, 2]", "[link](...)"): give up now
                    # rather than hold back what may be a long prose answer.
                    self._release(out, self._open + 1)
                    self._state = _TEXT
                    return True
            if self._in_string:
                if self._escape:
                    self._escape = False
                elif char == "\\":
                    self._escape = True
                elif char == '"':
                    self._in_string = False
            elif char == '"':
                self._in_string = True
            elif char in "[{":
                self._depth += 1
            elif char in "]}":
                self._depth -= 1
                if self._depth == 0:
                    self._stream_to(i + 1, out)
                    self._close(out, i + 1)
                    return True
            i += 1
        self._pos = i
        self._stream_to(i, out)
        return False

    def _stream_to(self, upto: int, out: list[Event]) -> None:
        if self._stream is not None and upto > self._fed:
            out += self._stream.feed(self._buf[self._fed: upto])[0]
            self._fed = upto

    def _close(self, out: list[Event], end: int) -> None:
        raw = self._buf[:end]
        stream, self._stream = self._stream, None
        if stream is not None and stream.started:
            out += stream.end()
            self._after_call = True
        elif calls := self.known(calls_from_json(raw[self._open:]), raw):
            out += self.emit(calls)
            self._after_call = True
        else:
            out.append(Text(raw))
        self._buf = self._buf[end:]
        self._state = _TEXT

    def _release(self, out: list[Event], size: int) -> None:
        if size:
            out.append(Text(self._buf[:size]))
            self._buf = self._buf[size:]
