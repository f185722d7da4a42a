"""ArgumentsWriter: a call's arguments, streamed as the model writes them, always valid JSON.

The model's JSON text goes in piece by piece; canonical JSON text (json.dumps' spacing, strings
re-escaped, numbers normalised) comes out as soon as it is decided, so long string values (code,
file contents) stream character by character. What is out can always be completed into valid
JSON by `close()`: a separator is written only when the next member begins, a key only when its
value begins, a number or literal only once it is whole. So

- a valid object comes out as `json.dumps(json.loads(text), ensure_ascii=False)`;
- input that stops being JSON (a syntax error, NaN/Infinity, text after a cut-off) stops the
  writer: `broken` is set, the rest is ignored and `close()` closes what was written;
- a top-level property outside `allowed` (strict schemas) is left out, value and all;
- nesting deeper than MAX_DEPTH breaks the writer (what is out stays parseable everywhere).

The input is read leniently in one way: raw control characters in strings (a newline a small
model wrote unescaped) are taken as those characters and written escaped.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?\Z")
NUMBER_CHARS = set("0123456789+-.eE")
LITERALS = ("true", "false", "null")
ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
STRING_RUN = re.compile(r'[^"\\]+')
SPACE = " \t\r\n"
MAX_DEPTH = 256  # deeper nesting breaks the arguments: clients' JSON parsers (Python's) give up


@dataclass
class _Frame:
    kind: str  # "{" or "["
    skip: bool  # inside a left-out value: nothing is written
    count: int = 0  # members written
    expect: str = "value"  # object: key | colon | value | next; array: value | next
    key: str = ""  # object: the key of the member being read
    keep: bool = True  # object: that member is written
    comma: bool = False  # a comma was read and no member has followed it yet


@dataclass
class _Token:
    kind: str  # "string", "number" or "literal"
    is_key: bool = False
    text: list[str] = field(default_factory=list)  # decoded (string) or raw (number, literal)
    escape: str | None = None  # after a backslash: "" , or "u" + the hex digits so far
    high: str = ""  # a high surrogate waiting for its low half


def _encode(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)[1:-1]


class ArgumentsWriter:
    def __init__(self, allowed: frozenset[str] | None = None):
        self.allowed = allowed  # None: every property is kept
        self.stack: list[_Frame] = []
        self.token: _Token | None = None
        self.started = False  # the top-level "{" was read
        self.done = False  # ... and its "}": what follows is not ours
        self.broken = False
        self.consumed = 0  # of the last feed: characters read (the rest lies after the object)
        self.dropped: list[str] = []  # properties left out
        self.seen: set[str] = set()  # top-level properties read

    def feed(self, text: str) -> str:
        out: list[str] = []
        i = 0
        while i < len(text) and not (self.done or self.broken):
            token = self.token
            if token is not None and token.kind == "string" and token.escape is None:
                run = STRING_RUN.match(text, i)
                if run:
                    self._decoded(token, run.group(), out)  # a run of plain characters
                    i = run.end()
                    continue
            self._char(text[i], out)
            i += 1
        self.consumed = i
        return "".join(out)

    def close(self) -> str:
        """What completes the output into valid JSON (nothing when the object closed)."""
        if self.done:
            return ""
        if not self.started:
            self.started, self.done = True, True
            return "{}"
        out: list[str] = []
        if self.token is not None and self.token.kind != "string" and not self.broken:
            self._end_scalar(self.token, out)  # a whole number or literal at the cut stays
        token, self.token = self.token, None
        if token is not None and token.kind == "string" and not token.is_key and self._writing():
            out.append('"')  # a string value cut off: what was written of it stays
        for frame in reversed(self.stack):
            if not frame.skip:
                out.append("}" if frame.kind == "{" else "]")
        self.stack, self.done = [], True
        return "".join(out)

    # -- the machine ---------------------------------------------------------------------

    def _writing(self) -> bool:
        frame = self.stack[-1]
        return not frame.skip and (frame.kind == "[" or frame.keep)

    def _char(self, char: str, out: list[str]) -> None:
        token = self.token
        if token is not None:
            if token.kind == "string":
                self._string_char(token, char, out)
                return
            if char in NUMBER_CHARS or char.isalpha():
                token.text.append(char)
                return
            self._end_scalar(token, out)
            if self.broken:
                return
        if char in SPACE:
            return
        if not self.started:
            if char != "{":
                self.broken = True
                return
            self.started = True
            self.stack.append(_Frame("{", skip=False, expect="key"))
            out.append("{")
            return
        self._structural(char, out)

    def _structural(self, char: str, out: list[str]) -> None:
        frame = self.stack[-1]
        closer = "}" if frame.kind == "{" else "]"
        if frame.expect == "key":
            if char == '"':
                self.token = _Token("string", is_key=True)
            elif char == closer and not frame.comma:
                self._pop(out)
            else:
                self.broken = True
        elif frame.expect == "colon":
            if char == ":":
                frame.expect = "value"
            else:
                self.broken = True
        elif frame.expect == "next":
            if char == ",":
                frame.expect, frame.comma = ("key" if frame.kind == "{" else "value"), True
            elif char == closer:
                self._pop(out)
            else:
                self.broken = True
        elif char == closer and frame.kind == "[" and not frame.comma:
            self._pop(out)  # an empty list
        else:
            self._value(char, out)

    def _value(self, char: str, out: list[str]) -> None:
        if char == '"':
            self._begin(out)
            self.token = _Token("string")
            if self._writing():
                out.append('"')
        elif char in "{[":
            if len(self.stack) >= MAX_DEPTH:
                self.broken = True
                return
            self._begin(out)
            skip = not self._writing()
            self.stack.append(_Frame(char, skip=skip, expect="key" if char == "{" else "value"))
            if not skip:
                out.append(char)
        elif char == "-" or char.isdigit():
            self.token = _Token("number", text=[char])
        elif char.isalpha():
            self.token = _Token("literal", text=[char])
        else:
            self.broken = True

    def _begin(self, out: list[str]) -> None:
        """A value begins in the current frame: its separator and key are due now."""
        frame = self.stack[-1]
        frame.expect, frame.comma = "next", False
        if not self._writing():
            return
        separator = ", " if frame.count else ""
        out.append(separator + (json.dumps(frame.key, ensure_ascii=False) + ": " if frame.kind == "{" else ""))
        frame.count += 1

    def _pop(self, out: list[str]) -> None:
        frame = self.stack.pop()
        if not frame.skip:
            out.append("}" if frame.kind == "{" else "]")
        if not self.stack:
            self.done = True

    def _end_scalar(self, token: _Token, out: list[str]) -> None:
        self.token = None
        text = "".join(token.text)
        if token.kind == "number" and NUMBER.match(text) and math.isfinite(float(text)):
            text = json.dumps(json.loads(text))  # (1e400 would come back as Infinity: not JSON)
        elif token.kind != "literal" or text not in LITERALS:
            self.broken = True  # NaN, Infinity, a bare word: not JSON
            return
        self._begin(out)
        if self._writing():
            out.append(text)

    # -- strings -------------------------------------------------------------------------

    def _string_char(self, token: _Token, char: str, out: list[str]) -> None:
        if token.escape is None:
            if char == '"':
                self._end_string(token, out)
            else:  # a backslash
                token.escape = ""
            return
        if token.escape == "" and char != "u":
            decoded = ESCAPES.get(char)
            token.escape = None
            if decoded is None:
                self.broken = True
            else:
                self._decoded(token, decoded, out)
            return
        token.escape += char
        if len(token.escape) == 5:
            try:
                code = int(token.escape[1:], 16)
            except ValueError:
                self.broken = True
                return
            token.escape = None
            self._code_point(token, code, out)

    def _code_point(self, token: _Token, code: int, out: list[str]) -> None:
        if 0xD800 <= code < 0xDC00:
            if token.high:
                self._decoded(token, "\ufffd", out)
            token.high = chr(code)
            return
        if 0xDC00 <= code < 0xE000:
            if token.high:
                high, token.high = token.high, ""
                self._decoded(token, chr(0x10000 + ((ord(high) - 0xD800) << 10) + (code - 0xDC00)), out)
                return
            code = 0xFFFD
        self._decoded(token, chr(code), out)

    def _decoded(self, token: _Token, text: str, out: list[str]) -> None:
        if token.high:
            text, token.high = "\ufffd" + text, ""
        if token.is_key:
            token.text.append(text)
        elif self._writing():
            out.append(_encode(text))

    def _end_string(self, token: _Token, out: list[str]) -> None:
        self.token = None
        if token.high:
            if token.is_key:
                token.text.append("\ufffd")
            elif self._writing():
                out.append(_encode("\ufffd"))
        frame = self.stack[-1]
        if token.is_key:
            frame.key = "".join(token.text)
            frame.expect = "colon"
            if len(self.stack) == 1:
                self.seen.add(frame.key)
            frame.keep = not (len(self.stack) == 1 and self.allowed is not None and frame.key not in self.allowed)
            if not frame.keep:
                self.dropped.append(frame.key)
            return
        if self._writing():
            out.append('"')
