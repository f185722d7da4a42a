"""json: a lenient parser for small models that follow no tool-call format.

Asked to call a tool, a small model typically answers with plain JSON and no tags, e.g.
Qwen2.5-Coder-0.5B: "```json\\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\\n```".
A call is recognised in

- a bare object {"name": …, "arguments": {…}} ("parameters" for "arguments"; the OpenAI
  shape {"type": "function", "function": {…}} too), or a JSON list of such objects;
- a fenced block (```json or a plain ```) whose whole body is either of those;

and only when every name is one of the request's tools: any other JSON (the model answering
{"city": "Oslo"}, an example in prose) comes out unchanged as text. Code in fences of other
languages is text as a whole: a call written inside ```python is code, not a call.

Streaming: text is released as it arrives, except from a possible start of a candidate (a "{",
a "[" or a "```" that could begin a call). From there it is held until the candidate is
complete (brackets balanced, counting only those outside JSON strings; or the closing fence)
and then decided: call events, or the held text released. Bracket depth and string state are
tracked incrementally, so a chunk costs time in proportion to its own length. A candidate
that cannot be JSON (a "{" followed by prose, a character JSON does not allow) is let go as
soon as that shows. At the end of the output anything still held is text, unless it is a
fenced call cut off before its closing fence.
"""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

from rostra.parsing.events import Event, Text
from rostra.parsing.tools.base import ParsedCall, ToolParser, ToolSpec, merge_text, call_from_object

TEXT, BARE, FENCE_OPEN, FENCE_JSON, FENCE_OTHER = range(5)  # what the held text is

OPENER = re.compile(r"[{\[`]")
JSON_SPACE = " \t\r\n"
# Outside strings JSON holds only brackets, quotes, separators, numbers and true/false/null;
# anything else (prose, a backtick) means this candidate is not JSON.
OUTSIDE_STRING = re.compile(r"[^ \t\r\n0-9+\-.eE:,truefalsn]")
IN_STRING = re.compile(r'\\.|"', re.S)  # an escape pair consumed whole, or the closing quote
INFO_END = re.compile(r"[\n`{\[]")  # what ends a fence's info string ("json", "python", …)
# In a JSON fence's body: string state and fences (an escape never swallows a newline: a line
# may end in a backslash, e.g. a shell continuation, with the closing fence on the next).
FENCE_BODY = re.compile(r'\\[^\n]|["\n`]')
LINE_FENCE = re.compile(r"\n[ \t]*```")  # a fence at the start of a line
LINE_FENCE_TAIL = re.compile(r"\n[ \t]*`{0,2}\Z")  # …that may still be coming


class JsonToolParser(ToolParser):
    name = "json"

    def __init__(self, tools: Sequence[ToolSpec], max_calls: int | None = None):
        super().__init__(tools, max_calls)
        self._held = ""  # text not released yet: a candidate (or a partial fence) and what follows
        self._mode = TEXT
        self._scanned = 0  # how much of _held the current mode has examined
        self._stack: list[str] = []  # BARE: brackets open
        self._in_string = False  # BARE, FENCE_JSON: inside a JSON string
        self._checked = False  # BARE: the first character after the opener looked like a call
        self._body = 0  # FENCE_JSON: where the body starts in _held

    def feed_text(self, text: str) -> list[Event]:
        self._held += text
        out: list[Event] = []
        step = (self._text, self._bare, self._fence_open, self._fence_json, self._fence_other)
        while self._held and step[self._mode](out):
            pass
        return merge_text(out)

    def finish(self) -> list[Event]:
        held, mode, body = self._held, self._mode, self._body
        self._to_text("")
        if mode == FENCE_JSON:
            # Cut off before the closing fence (max_tokens): still a call if the JSON is whole.
            calls = self._calls(held[body:].strip().rstrip("`"), held)
            if calls:
                return self.emit(calls)
        return [Text(held)] if held else []

    # Each step consumes what it can decide and says whether to go on (False: wait for more).

    def _text(self, out: list[Event]) -> bool:
        held = self._held
        found = OPENER.search(held)
        if not found:
            self._release(out, len(held))
            return False
        at = found.start()
        if held[at] != "`":
            self._release(out, at)
            self._start(BARE, 1)
            self._stack = [held[at]]
            self._checked = False
            return True
        run = at
        while run < len(held) and held[run] == "`":
            run += 1
        if run - at >= 3:
            self._release(out, at)
            self._start(FENCE_OPEN, 3)
            return True
        if run == len(held):
            self._release(out, at)  # "`" or "``" at the end: maybe the start of a fence
            return False
        self._release(out, run)  # inline code, not a fence
        return True

    def _bare(self, out: list[Event]) -> bool:
        held, i = self._held, self._scanned
        if not self._checked:
            # A call object begins with a key, a list of calls with an object: "{ see below"
            # or "[1]" is let go at once (only the opener; what follows is looked at again).
            while i < len(held) and held[i] in JSON_SPACE:
                i += 1
            if i == len(held):
                self._scanned = i
                return False
            if held[i] != ('"' if held[0] == "{" else "{"):
                self._release(out, 1)
                self._to_text(self._held)
                return True
            self._checked = True
        stack = self._stack
        while True:
            if self._in_string:
                found = IN_STRING.search(held, i)
                if not found:
                    # A lone backslash at the end escapes a character still to come.
                    self._scanned = len(held) - 1 if held.endswith("\\") and len(held) - 1 >= i else len(held)
                    return False
                i = found.end()
                if found.group() == '"':
                    self._in_string = False
                continue
            found = OUTSIDE_STRING.search(held, i)
            if not found:
                self._scanned = len(held)
                return False
            char, i = found.group(), found.end()
            if char == '"':
                self._in_string = True
            elif char in "{[":
                stack.append(char)
            elif char in "}]" and stack[-1] == ("{" if char == "}" else "["):
                stack.pop()
                if not stack:
                    self._decide(out, i, held[:i])
                    return True
            else:
                # Not JSON after all: let it go up to here, and look at this character again
                # as text (it may be a backtick starting a fence).
                self._release(out, found.start())
                self._to_text(self._held)
                return True

    def _fence_open(self, out: list[Event]) -> bool:
        held = self._held
        found = INFO_END.search(held, self._scanned)
        if not found:
            self._scanned = len(held)
            return False
        at, char = found.start(), found.group()
        json_info = held[3:at].strip(" \t\r").lower() in ("", "json")
        if char == "`":
            self._release(out, 3)  # ```x` is inline code, not a fence
            self._to_text(self._held)
        elif char == "\n" and json_info:
            self._start(FENCE_JSON, at + 1)
            self._body = at + 1
        elif char == "\n":
            self._release(out, at)  # another language: text, up to its closing fence
            self._start(FENCE_OTHER, 0)
        elif json_info:
            self._start(FENCE_JSON, at)  # ```json{"name": … on the fence's own line
            self._body = at
        else:
            self._scanned = at + 1  # a bracket in another language's info string
        return True

    def _fence_json(self, out: list[Event]) -> bool:
        held, i = self._held, self._scanned
        while True:
            found = FENCE_BODY.search(held, i)
            if not found:
                self._scanned = len(held) - 1 if held.endswith("\\") and len(held) - 1 >= i else len(held)
                return False
            at, char = found.start(), found.group()
            i = found.end()
            if char == '"':
                self._in_string = not self._in_string
            elif char == "\n":
                # A fence at the start of a line closes the block whatever the string state
                # (a JSON string cannot hold a raw newline).
                fence = LINE_FENCE.match(held, at)
                if fence:
                    return self._close_fence(out, fence.end())
                if LINE_FENCE_TAIL.match(held, at):
                    self._scanned = at
                    return False
            elif char == "`" and not self._in_string:
                # ```` right after the JSON (``` on the same line) closes it too.
                if held.startswith("```", at):
                    return self._close_fence(out, at + 3)
                if held[at:] in ("`", "``"):
                    self._scanned = at
                    return False

    def _fence_other(self, out: list[Event]) -> bool:
        held = self._held
        fence = LINE_FENCE.search(held)
        if fence:
            self._release(out, fence.end())
            self._to_text(self._held)
            return True
        tail = LINE_FENCE_TAIL.search(held)
        self._release(out, tail.start() if tail else len(held))
        return False

    def _close_fence(self, out: list[Event], end: int) -> bool:
        self._decide(out, end, self._held[self._body: end - 3].strip())
        return True

    def _decide(self, out: list[Event], end: int, candidate: str) -> None:
        """Calls for held[:end] (the markup dropped) if `candidate` is calls; else the text."""
        raw = self._held[:end]
        calls = self._calls(candidate, raw)
        out.extend(self.emit(calls) if calls else [Text(raw)])
        self._to_text(self._held[end:])

    def _calls(self, text: str, raw: str) -> list[ParsedCall] | None:
        """The calls `text` holds if it is exactly a call or a list of calls to known tools."""
        try:
            value = json.loads(text, parse_constant=_reject_constant)
        except (ValueError, RecursionError):
            return None
        items = value if isinstance(value, list) else [value]
        calls = [call_from_object(_unwrap(item)) for item in items]
        if not calls or any(call is None for call in calls):
            return None  # plain JSON, not a call: nothing to log
        return self.known(calls, raw)  # type: ignore[arg-type]

    def _release(self, out: list[Event], upto: int) -> None:
        if upto:
            out.append(Text(self._held[:upto]))
            self._held = self._held[upto:]

    def _start(self, mode: int, scanned: int) -> None:
        self._mode, self._scanned, self._in_string = mode, scanned, False

    def _to_text(self, held: str) -> None:
        self._held = held
        self._start(TEXT, 0)
        self._stack = []


def _unwrap(item: Any) -> Any:
    """The OpenAI shape {"type": "function", "function": {"name": …, "arguments": …}}."""
    if isinstance(item, dict) and "name" not in item and isinstance(item.get("function"), dict):
        return item["function"]
    return item


def _reject_constant(name: str) -> None:
    # NaN / Infinity parse in Python but are not JSON: the arguments we emit must be.
    raise ValueError(name)
