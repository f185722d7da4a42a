"""functionary_v32: MeetKai Functionary v3.2 (Llama 3 based), every part of the answer addressed to a recipient.

    all
    Let me check.>>>get_weather
    {"city": "Oslo", "days": 3}>>>add
    {"a": 1, "b": 2}

`>>>RECIPIENT\\n` opens each part: `all` is text for the user, a function's name is a call whose body is its JSON
arguments; the part runs to the next `>>>` or the end of the output. The generation prompt already ends with
`>>>` (llama.cpp models/templates/meetkai-functionary-medium-v3.2.jinja: "Respond in this format:
>>>${recipient}\\n${content}"; it writes past turns back as `>>>all\\n…` and `>>>NAME\\nARGS`), so the output
starts with the first recipient. The outputs of llama.cpp's tests/test-chat.cpp for it: `all\\nHello>>>f\\n{…}`,
`f\\n{"arg1": 1} \\n   `, and `python\\nCODE` for the built-in code interpreter (a call {"code": CODE} where the
request has a `python` tool).

A call streams its arguments once `NAME\\n{` is read (CallStream); text addressed to `all` streams as it comes. A
part that is neither (an unknown tool, a body that is not JSON) stays text, `>>>` and all; an output that does not
start with a recipient is all text (the model ignored the format), `>>>` parts after it still read.
"""

from __future__ import annotations

import re
from typing import Sequence

from rostra.parsing.events import Event, Text
from rostra.parsing.tools.base import BlockStream, MarkupToolParser, ParsedCall, ToolSpec, loads_strict
from rostra.parsing.tools.call_stream import CallStream

TO_USER = "all"
RECIPIENT = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
HEAD = re.compile(r"([A-Za-z0-9_.\-]{1,128})\n\s*(\S)")  # NAME\n then the arguments' first character


class FunctionaryV32ToolParser(MarkupToolParser):
    name = "functionary_v32"
    start = ">>>"
    end = ">>>"  # (a part ends where the next begins: _find_end)
    end_optional = True

    def __init__(self, tools: Sequence[ToolSpec], max_calls: int | None = None):
        super().__init__(tools, max_calls)
        self._opened = False  # the generation prompt's `>>>` was put before the output
        self._first = True  # the part that `>>>` opens is not over yet

    def feed_text(self, text: str) -> list[Event]:
        if not self._opened:  # the prompt's `>>>`: the output opens the first part
            self._opened, text = True, self.start + text
        return super().feed_text(text)

    def _find_end(self) -> tuple[int, int]:
        return self._pending.find(self.start, max(len(self.start), self._searched)), 0

    def new_stream(self) -> BlockStream | None:
        return RecipientStream(self, first=self._first)

    def parse_block(self, block: str) -> list[ParsedCall] | None:
        recipient, newline, body = block.partition("\n")
        if not newline or not RECIPIENT.fullmatch(recipient) or recipient == TO_USER:
            return None
        try:
            arguments = loads_strict(body) if body.strip() else {}
        except (ValueError, RecursionError):
            arguments = {"code": body} if recipient == "python" else None  # the code interpreter's raw code
        return [ParsedCall(recipient, arguments)] if isinstance(arguments, dict) else None

    def _close(self, raw: str, block: str) -> list[Event]:
        events = super()._close(raw, block)
        if self._first:  # a first part left as text: the prompt's `>>>` is not the model's
            self._first = False
            events = [Text(e.text[len(self.start):]) if isinstance(e, Text) and e.text.startswith(self.start) else e
                      for e in events]
        return events


class RecipientStream:
    """One part: its recipient line, then text for the user (streamed as Text) or a call (CallStream)."""

    def __init__(self, parser: FunctionaryV32ToolParser, first: bool):
        self.parser = parser
        self.first = first
        self._head = ""  # the recipient line so far
        self._text = False  # the part is text
        self._whole = False  # the part is the parser's to read whole at its end
        self._call: CallStream | None = None

    @property
    def started(self) -> bool:
        return self._text or (self._call is not None and self._call.started)

    def feed(self, text: str) -> tuple[list[Event], str]:
        if self._text:
            return ([Text(text)] if text else []), ""
        if self._call is not None:
            return self._call.feed(text)
        if self._whole:
            return [], ""
        self._head += text
        line, newline, rest = self._head.partition("\n")
        if not newline:
            return ([], "") if RECIPIENT.fullmatch(line) or not line else self._not_a_recipient()
        if line == TO_USER:
            self._text = True
            return ([Text(rest)] if rest else []), ""
        if RECIPIENT.fullmatch(line):
            self._call = CallStream(self.parser, head=HEAD, opening="")
            return self._call.feed(self._head)
        return self._not_a_recipient()

    def end(self) -> list[Event]:
        return self._call.end() if self._call is not None else []

    def _not_a_recipient(self) -> tuple[list[Event], str]:
        if self.first:  # the output did not begin with a recipient: text
            self._text, head, self._head = True, self._head, ""
            return [Text(head)], ""
        self._whole = True  # `>>>` in the text, say: kept as it was written
        return [], ""
