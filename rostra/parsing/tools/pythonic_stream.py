"""PythonicStream: a pythonic call list `[name(key=value, …), …]` streamed as it is written.

A call starts at its "(" (its name a tool of the request) and its JSON arguments are built as the
keyword arguments arrive, so that the deltas concatenate to exactly the arguments of the whole
list: a plain string value ('…', "…", '''…''', \"\"\"…\"\"\") streams, decoded and JSON-escaped
as it is written (an escape is held until whole); any other value is read whole (up to the "," or
")" that ends it) and converted as the whole-list parser does (pythonic.literal_value).

Before the first call starts, what cannot stream hands the list back to the parser (parsed whole,
all or nothing). After, it ends the open call with what was read, and the rest is dropped.
"""

from __future__ import annotations

import ast
import json
import logging
import warnings
from typing import TYPE_CHECKING

from rostra.parsing.events import Event, ToolCallArgs, ToolCallEnd, ToolCallStart

if TYPE_CHECKING:
    from rostra.parsing.tools.pythonic import PythonicToolParser

log = logging.getLogger("rostra.tools")

# OPEN: before "["; NAME: a call's name; KEY: a keyword (or ")"); VALUE: a non-string value;
# STRING: a streaming string; NEXT: after a value; AFTER: after a call; DONE: nothing more read.
OPEN, NAME, KEY, VALUE, STRING, NEXT, AFTER, DONE = "open", "name", "key", "value", "string", "next", "after", "done"
ESCAPE_LENGTHS = {"x": 4, "u": 6, "U": 10}  # the whole escape, backslash included


class PythonicStream:
    def __init__(self, parser: PythonicToolParser):
        self.parser = parser
        self.state = OPEN
        self.started = False
        self._buf = ""
        self._index = -1  # the open call's index; -1 before it started
        self._call_name = ""
        self._keys: set[str] = set()
        self._quote = ""  # STRING: its closing quote
        self._head = ""  # the key of the value being read, as JSON with its separator
        self._depth = 0  # VALUE: brackets open
        self._in = ""  # VALUE: the quote of a string inside it, "" outside
        self._pos = 0  # VALUE: _buf scanned up to here

    def feed(self, text: str) -> tuple[list[Event], str]:
        self._buf += text
        out: list[Event] = []
        while self._buf and self.state != DONE and self._step(out):
            pass
        return out, ""

    def end(self) -> list[Event]:
        out: list[Event] = []
        if self.state == STRING:
            out.append(ToolCallArgs(self._index, '"'))  # cut off: what was written stays
        if self.state in (KEY, VALUE, STRING, NEXT) and self._index >= 0:
            out += self._close()
        self.state = DONE
        return out

    def _step(self, out: list[Event]) -> bool:
        if self.state == STRING:
            return self._string(out)
        if self.state == VALUE:
            return self._value(out)
        stripped = self._buf.lstrip()
        if not stripped:
            self._buf = ""
            return False
        self._buf = stripped
        if self.state == OPEN:
            return self._expect("[", NAME, out)
        if self.state == NAME:
            return self._name(out)
        if self.state == KEY:
            return self._key(out)
        if self.state == NEXT:
            return self._expect(",", KEY, out) if self._buf[0] != ")" else self._expect(")", AFTER, out)
        return self._expect(",", NAME, out) if self._buf[0] != "]" else self._expect("]", DONE, out)  # AFTER

    def _expect(self, char: str, state: str, out: list[Event]) -> bool:
        if self._buf[0] != char:
            return self._stop(out, f"{self._buf[0]!r} where {char!r} belongs")
        self._buf, self.state = self._buf[1:], state
        if char == ")":
            self._args(out, "}")
            out.append(ToolCallEnd(self._index))
        return True

    def _name(self, out: list[Event]) -> bool:
        at = self._buf.find("(")
        if at < 0:
            return False if len(self._buf) < 200 and self._buf.rstrip().isidentifier() else self._stop(out, "no call")
        name = self._buf[:at].strip()
        full = self.parser.max_calls is not None and self.parser.calls >= self.parser.max_calls
        if name not in self.parser.tools or full:
            return self._stop(out, "a call to an unknown tool, or over the limit")
        self.state, self._keys, self._call_name, self._index = KEY, set(), name, -1
        self._buf = self._buf[at + 1:]
        return True

    def _args(self, out: list[Event], text: str) -> None:
        """Arguments out; the call starts with its first (so a list whose first call breaks
        before any argument was read is still parsed whole)."""
        if self._index < 0:
            self.started, self._index = True, self.parser.calls
            self.parser.calls += 1
            out += [ToolCallStart(self._index, self.parser.new_call_id(), self._call_name), ToolCallArgs(self._index, "{")]
        out.append(ToolCallArgs(self._index, text))

    def _key(self, out: list[Event]) -> bool:
        if self._buf[0] == ")":
            return self._expect(")", AFTER, out)
        at = self._buf.find("=")
        if at < 0:
            return False if len(self._buf) < 200 and self._buf.rstrip().isidentifier() else self._stop(out, "not a keyword")
        key, rest = self._buf[:at].strip(), self._buf[at + 1:].lstrip()
        if not key.isidentifier() or key in self._keys:
            return self._stop(out, f"keyword {key!r}")
        if not rest or (rest[0] in "'\"" and len(rest) < 3):
            return False  # the value's first characters decide how it is read (' or '''?)
        self._head = (", " if self._keys else "") + json.dumps(key) + ": "
        self._keys.add(key)
        self._buf = rest
        if rest[0] in "'\"":
            self._quote = rest[0] * 3 if rest.startswith(rest[0] * 3) else rest[0]
            self._buf, self.state = rest[len(self._quote):], STRING
            self._args(out, self._head + '"')
        else:
            self.state, self._depth, self._in, self._pos = VALUE, 0, "", 0
        return True

    def _string(self, out: list[Event]) -> bool:
        buf, quote, i = self._buf, self._quote, 0
        text: list[str] = []
        while i < len(buf):
            char = buf[i]
            if char == quote[0]:
                if buf.startswith(quote, i):
                    self._buf, self.state = buf[i + len(quote):], NEXT
                    self._args(out, _encode("".join(text)) + '"')
                    return True
                if len(buf) - i < len(quote) and quote.startswith(buf[i:]):
                    break  # maybe the closing ''': wait
                text.append(char)
                i += 1
            elif char == "\\":
                size = _escape_size(buf, i)
                if size == 0:
                    break  # the escape is not whole yet
                decoded = _decode(buf[i: i + size])
                if decoded is None:
                    self._buf = buf[i:]
                    self._args(out, _encode("".join(text)))
                    return self._stop(out, "an escape that is not Python")
                text.append(decoded)
                i += size
            else:
                at = _next_special(buf, i, quote[0])
                text.append(buf[i:at])
                i = at
        self._buf = buf[i:]
        if text:
            self._args(out, _encode("".join(text)))
        return False

    def _value(self, out: list[Event]) -> bool:
        """A value other than a plain string: read whole, up to the "," or ")" that ends it."""
        buf, i = self._buf, self._pos
        while i < len(buf):
            char = buf[i]
            if self._in:
                if char == "\\":
                    i += 1
                elif char == self._in:
                    self._in = ""
            elif char in "'\"":
                self._in = char
            elif char in "([{":
                self._depth += 1
            elif char in ")]}" and self._depth:
                self._depth -= 1
            elif char in ",)" and not self._depth:
                return self._end_value(buf[:i], out)
            i += 1
        self._pos = min(i, len(buf))
        return False

    def _end_value(self, text: str, out: list[Event]) -> bool:
        from rostra.parsing.tools.pythonic import literal_value  # (it imports this module)

        try:
            value = literal_value(text)
        except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
            return self._stop(out, f"a value that is not a literal: {text[:200]!r}")
        self._args(out, self._head + json.dumps(value, ensure_ascii=False))
        self._buf, self.state = self._buf[len(text):], NEXT
        return True

    def _stop(self, out: list[Event], why: str) -> bool:
        """What cannot stream: before a call started, the list is the parser's to parse whole;
        after, the open call ends with what was read and the rest is dropped."""
        if self._index >= 0:
            log.info("pythonic call list: %s; the rest is dropped", why)
            if self.state == STRING:
                out.append(ToolCallArgs(self._index, '"'))
            if self.state in (KEY, VALUE, STRING, NEXT):
                out += self._close()
        elif self.started:
            log.info("pythonic call list: %s; the rest is dropped", why)
        self.state, self._buf = DONE, ""
        return False

    def _close(self) -> list[Event]:
        return [ToolCallArgs(self._index, "}"), ToolCallEnd(self._index)]


def _encode(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)[1:-1]


def _next_special(buf: str, start: int, quote: str) -> int:
    found = [at for at in (buf.find("\\", start), buf.find(quote, start)) if at >= 0]
    return min(found) if found else len(buf)


def _escape_size(buf: str, at: int) -> int:
    """Length of the escape at `at` (a backslash), 0 while it may still grow."""
    if at + 1 >= len(buf):
        return 0
    kind = buf[at + 1]
    if kind in ESCAPE_LENGTHS:
        return ESCAPE_LENGTHS[kind] if len(buf) - at >= ESCAPE_LENGTHS[kind] else 0
    if kind == "N":
        close = buf.find("}", at)
        return close - at + 1 if close >= 0 else 0
    if kind in "01234567":
        size = 2
        while size < 4 and at + size < len(buf) and buf[at + size] in "01234567":
            size += 1
        return size if size == 4 or at + size < len(buf) else 0
    return 2


def _decode(escape: str) -> str | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an unknown escape stays as written, as in Python
            value = ast.literal_eval('"' + escape + '"')
    except (SyntaxError, ValueError):
        return None
    return value if isinstance(value, str) else None
