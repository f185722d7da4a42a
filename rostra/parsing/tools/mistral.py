"""mistral: [TOOL_CALLS] followed by the calls, which run to the end of the output.

Two generations of the format:
- before tokenizer v11 (Mistral 7B v0.3, Mixtral 8x22B, Nemo...): a JSON list of calls,
      [TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Oslo"}}, {"name": "add", ...}]
- v11 and later (Mistral Small 3.x, Magistral, Devstral...): the name, then its JSON arguments,
  one [TOOL_CALLS] per call; some versions put [ARGS] (and [CALL_ID] <id>) before the arguments:
      [TOOL_CALLS]get_weather{"city": "Oslo"}[TOOL_CALLS]add[ARGS]{"a": 1}

Text before the first [TOOL_CALLS] is content. Each [TOOL_CALLS] opens a segment that runs up to
the next one (or the end of the output, where it is decided); a segment is one or more calls or,
when it does not parse or names an unknown tool, text. Call ids are 9 letters and digits, the
only form Mistral's chat templates accept when the calls are sent back.
"""

from __future__ import annotations

import re
from typing import Sequence

from rostra.parsing.events import Event, Text
from rostra.parsing.tools.base import (ParsedCall, ToolParser, ToolSpec, merge_text, alphanumeric_id,
                                       calls_from_json, loads_strict, partial_suffix)

MARKER = "[TOOL_CALLS]"

# v11+: the name, then optionally [CALL_ID] <id> and [ARGS], then the arguments object.
_NAMED = re.compile(r"([^\s\[\]{}]+)\s*(?:\[CALL_ID\]\s*[A-Za-z0-9]*\s*)?(?:\[ARGS\])?\s*")


class MistralToolParser(ToolParser):
    name = "mistral"

    def __init__(self, tools: Sequence[ToolSpec], max_calls: int | None = None):
        super().__init__(tools, max_calls)
        self._pending = ""  # before the first marker: a tail that could start one; after: the open segment
        self._inside = False
        self._searched = 0  # inside: no marker starts before this index of _pending

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
            out += self._close(self._pending[:at])
            self._pending = self._pending[at:]
            self._searched = 0
        self._searched = len(self._pending) - len(MARKER) + 1
        return merge_text(out)

    def finish(self) -> list[Event]:
        raw, self._pending = self._pending, ""
        if self._inside:
            return self._close(raw)
        return [Text(raw)] if raw else []

    def _close(self, raw: str) -> list[Event]:
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
