"""llama3_json: the call is the output, a JSON object (Llama 3.1, 3.2, 3.3 with JSON tool calling).

    {"name": "get_weather", "parameters": {"city": "Oslo"}}
    <|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo"}}
    {"name": "a", "parameters": {}}; {"name": "b", "parameters": {}}

The arguments key is "parameters" ("arguments" is accepted too). Several calls are separated by
";". There is no start marker, so a call must begin the output (after whitespace and an optional
<|python_tag|>); an output that starts with prose is content, and a JSON object later in the
prose is not a call unless a <|python_tag|> comes right before it.

The machinery (BareCallParser) is shared with the pythonic format, whose calls are bare too.
"""

from __future__ import annotations

from typing import Sequence

from rostra.parsing.events import Event, Text
from rostra.parsing.tools.base import (BlockStream, ParsedCall, ToolParser, ToolSpec, call_from_object, loads_strict,
                                       merge_text, partial_suffix)

_LEAD, _REGION, _PROSE = "lead", "region", "prose"


class BareCallParser(ToolParser):
    """Formats whose calls are the output itself: a bracketed region (a JSON object, a Python
    list...) that starts the output, or follows `tag` anywhere, or follows an earlier call.

    Three states, driven one character at a time where it matters so that any split of the
    output into pieces gives the same result:
    - lead: text that may still precede a call (whitespace, `tag`, and after a call also the
      separators and `trailer_tags`) is held. `opener` starts a region; anything else releases
      the held text as content and goes to prose.
    - region: buffered until its brackets balance (string literals skipped), then handed to
      `parse_region`: valid known calls are emitted and we are back in lead; anything else is
      released verbatim as text and we go to prose.
    - prose: passed through, holding only a tail that could be the start of `tag`; a complete
      `tag` goes back to lead.
    Held lead text is markup when a call follows it (or when it merely trails the last call at
    the end of the output); otherwise it is content.

    A region may also stream (`new_stream`, e.g. a CallStream): it is fed the region as it is
    scanned; once its call started, the region's close (or the output's end) ends the call.
    """

    opener = "{"
    tag = "<|python_tag|>"
    trailer_tags: tuple[str, ...] = ()  # markers allowed only after a call, e.g. <|python_end|>
    separators = ""  # besides whitespace, what may stand between two calls
    quotes = '"'  # string delimiters inside a region
    python_strings = False  # also ''' and \"\"\" strings

    def __init__(self, tools: Sequence[ToolSpec], max_calls: int | None = None):
        super().__init__(tools, max_calls)
        self._state = _LEAD
        self._after_call = False  # lead right after a call: separators and trailer tags allowed
        self._held = ""  # lead text not yet released
        self._partial = ""  # the tail of _held that is a proper prefix of a tag
        self._pending = ""  # prose: a tail that could be the start of `tag`
        self._region = ""
        self._pos = 0  # next index of _region to scan
        self._depth = 0
        self._quote = ""  # the open string's delimiter, "" outside strings
        self._escape = False
        self._committed = True  # region_prefix has accepted the region's start
        self._checked = 1  # region_prefix has seen the characters before this index
        self._stream: BlockStream | None = None  # region: its call, streaming
        self._fed = 0  # region: _region up to here went to the stream

    # Hooks for the format.

    def parse_region(self, raw: str) -> list[ParsedCall] | None:
        raise NotImplementedError

    def region_started(self) -> None:
        """A region begins (its opener was seen); reset any per-region state of region_prefix."""

    def new_stream(self) -> BlockStream | None:
        """The stream of a new region; None: regions are parsed whole when they close."""
        return None

    def region_prefix(self, char: str) -> bool | None:
        """Called for each character after the opener until it returns True: True = the region
        is a call candidate for good, False = undecided, None = not a call (give up early)."""
        return True

    # The machine.

    def feed_text(self, text: str) -> list[Event]:
        out: list[Event] = []
        while text:
            if self._state == _LEAD:
                text = self._lead(text, out)
            elif self._state == _REGION:
                text = self._scan_region(text, out)
            else:
                text = self._prose(text, out)
        return merge_text(out)

    def finish(self) -> list[Event]:
        if self._state == _LEAD:
            # Whitespace, separators and tags trailing the last call are markup; a lead that
            # never reached a call (or ends in half a tag) is plain text.
            rest = "" if self._after_call and not self._partial else self._held
        elif self._state == _REGION and self._stream is not None and self._stream.started:
            out = self._stream.end()  # a streaming call cut off: it ends with what was valid
            self._stream, self._state, self._held, self._region = None, _PROSE, "", ""
            return out
        elif self._state == _REGION:
            rest = self._held + self._region  # cut off before it closed: not a call
        else:
            rest = self._pending
        self._held = self._partial = self._pending = self._region = ""
        self._state = _PROSE
        return [Text(rest)] if rest else []

    def _lead(self, text: str, out: list[Event]) -> str:
        tags = (self.tag, *self.trailer_tags) if self._after_call else (self.tag,)
        for i, char in enumerate(text):
            candidate = self._partial + char
            if any(tag.startswith(candidate) for tag in tags):
                self._partial = "" if candidate in tags else candidate
            elif self._partial or not (char.isspace() or (self._after_call and char in self.separators)):
                if char == self.opener and not self._partial:
                    self._start_region()
                    return text[i:]
                # Not a lead: what was held is content; this character starts the prose (it
                # may begin a tag, so it is not released here).
                out.append(Text(self._held))
                self._to_prose()
                return text[i:]
            self._held += char
        return ""

    def _start_region(self) -> None:
        self._state = _REGION
        self._region = ""
        self._pos = 0
        self._depth = 0
        self._quote = ""
        self._escape = False
        self._committed = False
        self._checked = 1  # the opener itself is not asked about
        self.region_started()
        full = self.max_calls is not None and self.calls >= self.max_calls
        self._stream, self._fed = (None if full else self.new_stream()), 0

    def _to_prose(self) -> None:
        self._state = _PROSE
        self._held = self._partial = ""
        self._after_call = False

    def _scan_region(self, text: str, out: list[Event]) -> str:
        self._region += text
        region, i = self._region, self._pos
        while i < len(region):
            char = region[i]
            if not self._committed and i >= self._checked:
                self._checked = i + 1  # a wait below re-scans index i: ask once per character
                verdict = self.region_prefix(char)
                if verdict is None:  # not a call after all: text up to here, the rest is prose
                    out.append(Text(self._held + region[:i]))
                    self._to_prose()
                    return region[i:]
                self._committed = verdict
            if self._quote:
                if self._escape:
                    self._escape = False
                elif char == "\\":
                    self._escape = True
                elif region.startswith(self._quote, i):
                    i += len(self._quote) - 1
                    self._quote = ""
                elif len(region) - i < len(self._quote) and self._quote.startswith(region[i:]):
                    break  # maybe the closing ''' : wait for more text
            elif char in self.quotes:
                if self.python_strings and region.startswith(char * 3, i):
                    self._quote = char * 3
                    i += 2
                elif self.python_strings and len(region) - i < 3 and (char * 3).startswith(region[i:]):
                    break  # ' or '' at the end: an empty string or a ''' opening? wait
                else:
                    self._quote = char
            elif char in "([{":
                self._depth += 1
            elif char in ")]}":
                self._depth -= 1
                if self._depth == 0:
                    raw, rest = region[: i + 1], region[i + 1:]
                    self._stream_to(i + 1, out)
                    self._close(raw, out)
                    return rest
            i += 1
        self._pos = i
        self._stream_to(i, out)
        return ""

    def _stream_to(self, upto: int, out: list[Event]) -> None:
        if self._stream is not None and upto > self._fed:
            events, _ = self._stream.feed(self._region[self._fed: upto])
            out += events
            self._fed = upto

    def _close(self, raw: str, out: list[Event]) -> None:
        stream, self._stream = self._stream, None
        if stream is not None and stream.started:
            out += stream.end()  # (nothing when the object closed with the region)
            self._state, self._held, self._partial, self._after_call = _LEAD, "", "", True
            self._region = ""
            return
        calls = self.known(self.parse_region(raw), raw)
        if calls:
            out += self.emit(calls)
            self._state = _LEAD
            self._held = self._partial = ""
            self._after_call = True
        else:
            out.append(Text(self._held + raw))
            self._to_prose()
        self._region = ""

    def _prose(self, text: str, out: list[Event]) -> str:
        self._pending += text
        at = self._pending.find(self.tag)
        if at < 0:
            keep = partial_suffix(self._pending, self.tag)
            out.append(Text(self._pending[: len(self._pending) - keep]))
            self._pending = self._pending[len(self._pending) - keep:]
            return ""
        out.append(Text(self._pending[:at]))
        rest, self._pending = self._pending[at:], ""
        self._state = _LEAD  # the tag is re-read there, as held lead text
        return rest


class Llama3JsonToolParser(BareCallParser):
    name = "llama3_json"
    separators = ";"

    def new_stream(self) -> BlockStream | None:
        from rostra.parsing.tools.call_stream import CallStream  # (it builds on base)

        return CallStream(self)  # {"name": …, "parameters": {: the arguments stream

    def parse_region(self, raw: str) -> list[ParsedCall] | None:
        try:
            call = call_from_object(loads_strict(raw), ("parameters", "arguments"))
        except (ValueError, RecursionError):  # not JSON; or nested too deep to decode
            return None
        return [call] if call else None
