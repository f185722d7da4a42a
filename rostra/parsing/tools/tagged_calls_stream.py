"""FunctionStream: a block of tagged calls (tagged_calls.py: Qwen3-Coder, Seed-OSS, MiniMax-M2, GLM-4.5)
streamed as the model writes it. The tags are the parser's (`parser.tags`); Qwen3-Coder's are used here.

Once a call's head `<function=NAME>` is read (NAME a tool of the request) the call starts and its JSON
arguments are built as the parameters arrive, so that the deltas concatenate to exactly the
arguments of the whole block:

- a parameter whose schema type is "string" streams: `"key": "` goes out when its value begins,
  then the value, JSON-escaped, as it is written; held back are only what could still be markup:
  the newline the markup puts before `</parameter>` (where the format has one), a partial tag, and a
  `</function>` until it is known to be text (a later `</parameter>`) or the call's close (the next tag,
  or the block's end) — the whole-block parser's rules;
- any other parameter is converted by its schema type (param_values.convert) once it is whole.

Before the call starts, a block that does not begin with a known call head is the parser's
to parse whole. After, what cannot be read is dropped and the arguments close where they were.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from rostra.parsing.events import Event, ToolCallArgs, ToolCallEnd, ToolCallStart
from rostra.parsing.tools.base import partial_suffix
from rostra.parsing.tools.buffered_stream import WHOLE, BufferedStream
from rostra.parsing.tools.param_values import convert, schema_types

if TYPE_CHECKING:
    from rostra.parsing.tools.tagged_calls import TaggedCallsToolParser

log = logging.getLogger("rostra.tools")

HEAD_LIMIT = 2000
# HEAD: before <function=…>; PARAMS: between parameters; VALUE: in one; AFTER: past the call;
# WHOLE: the block is the parser's to parse whole.
HEAD, PARAMS, VALUE, AFTER = "head", "params", "value", "after"


class FunctionStream(BufferedStream):
    def __init__(self, parser: TaggedCallsToolParser):
        super().__init__()
        self.parser = parser
        self.tags = parser.tags
        self.state = HEAD
        self.started = False
        self._index = -1
        self._properties: dict[str, Any] = {}
        self._count = 0  # parameters written
        self._key = ""
        self._streams = False  # the value is a string that streams
        self._lead = True  # the value's first newline (markup) is still to be skipped
        self._searched = 0  # in a value: no end tag starts before this index of _buf

    def end(self) -> list[Event]:
        out: list[Event] = []
        if self.state == VALUE:
            held = self._find(self.tags.function_close)
            out += self._end_value(self._buf if held < 0 else self._buf[:held])
        if self.state in (PARAMS, VALUE):
            out += self._close_call()
        self.state, self._buf = AFTER, ""
        return out

    def _find(self, tag: str, start: int = 0, stop: int | None = None) -> int:
        """Where `tag` is in the buffer, or -1 (also for a format without that tag)."""
        return self._buf.find(tag, start, len(self._buf) if stop is None else stop) if tag else -1

    def _step(self, out: list[Event]) -> bool:
        if self.state == HEAD:
            return self._head(out)
        if self.state == PARAMS:
            return self._params(out)
        if self.state == VALUE:
            return self._value(out)
        self._buf = self._buf.lstrip()  # AFTER: another function may follow
        opening = self.tags.function_open
        if opening and (self._buf.startswith(opening) or opening.startswith(self._buf)):
            self.state = HEAD
            return self._buf.startswith(opening)
        log.info("text after a %s call dropped: %.200r", self.parser.name, self._buf)
        self._buf = ""
        return False

    def _head(self, out: list[Event]) -> bool:
        stripped, tags = self._buf.lstrip(), self.tags
        found = tags.function_head.match(stripped)
        if found and tags.name_needs_follower and found.end() == len(stripped):
            found = None  # (the name may go on)
        if not found:
            opening = tags.function_open
            if opening.startswith(stripped) or (stripped.startswith(opening) and len(stripped) < HEAD_LIMIT
                                                and "\n" not in stripped and (not opening or ">" not in stripped)):
                return False  # wait for the rest of the tag
            return self._give_up()
        name = found.group(1).strip()
        full = self.parser.max_calls is not None and self.parser.calls >= self.parser.max_calls
        if name not in self.parser.tools or full:
            return self._give_up()  # (a call over the limit is dropped by the whole parse)
        self.started, self.state, self._count = True, PARAMS, 0
        self._properties = self.parser.properties(name)
        self._index = self.parser.calls
        self.parser.calls += 1
        out += [ToolCallStart(self._index, self.parser.new_call_id(), name), ToolCallArgs(self._index, "{")]
        self._buf = stripped[found.end():]
        return True

    def _give_up(self) -> bool:
        if self.started:
            log.info("unreadable %s markup after a call dropped: %.200r", self.parser.name, self._buf)
            self.state, self._buf = AFTER, ""
        else:
            self.state, self._buf = WHOLE, ""
        return False

    def _params(self, out: list[Event]) -> bool:
        self._buf, tags = self._buf.lstrip(), self.tags
        if tags.function_close and self._buf.startswith(tags.function_close):
            out += self._close_call()
            self.state, self._buf = AFTER, self._buf[len(tags.function_close):]
            return True
        found = tags.parameter_head.match(self._buf)
        if found:
            self._key, self._buf = found.group(1).strip(), self._buf[found.end():]
            self._streams = schema_types(self._properties.get(self._key)) == ["string"]
            self.state, self._lead, self._searched = VALUE, tags.value_newlines, 0
            if self._streams:
                out.append(ToolCallArgs(self._index, self._member_head() + '"'))
            return True
        if any(tag.startswith(self._buf) for tag in (tags.function_close, tags.parameter_open) if tag) or (
                self._buf.startswith(tags.parameter_open) and self._find(tags.head_end, len(tags.parameter_open)) < 0
                and len(self._buf) < HEAD_LIMIT):
            return False
        return self._skip_unknown(out)

    def _skip_unknown(self, out: list[Event]) -> bool:
        """Markup the format does not have, between a call's parts: skipped (and logged) up to the next parameter or
        the call's close, so the parameters after it are not lost; waited for while one may still come."""
        tags = self.tags
        found = [at for at in (self._find(tags.parameter_open, 1), self._find(tags.function_close, 1)) if at > 0]
        if found:
            log.info("unknown markup inside a %s call skipped: %.200r", self.parser.name, self._buf[:min(found)])
            self._buf = self._buf[min(found):]
            return True
        if len(self._buf) < HEAD_LIMIT:
            return False
        out += self._close_call()
        return self._give_up()

    def _value(self, out: list[Event]) -> bool:
        if self._lead:
            if self._buf in ("\r",):
                return False
            self._buf = self._buf[2:] if self._buf.startswith("\r\n") else self._buf.removeprefix("\n")
            self._lead = False
        tags = self.tags
        ends = [at for at in (self._find(tags.parameter_close, self._searched),
                              self._find(tags.parameter_open, self._searched)) if at >= 0]
        if ends:
            return self._value_ends(min(ends), out)
        self._searched = max(0, len(self._buf) - max(len(tags.parameter_close), len(tags.parameter_open)) + 1)
        if self._streams:
            self._release(out)
        return False

    def _value_ends(self, at: int, out: list[Event]) -> bool:
        close = self.tags.parameter_close
        closed = self._buf.startswith(close, at)
        held = self._find(self.tags.function_close, 0, at)
        if not closed and held >= 0:
            at = held  # the parameter close left out: the value ends at the call's close
        out += self._end_value(self._buf[:at])
        self._buf = self._buf[at + (len(close) if closed else 0):]
        return True

    def _release(self, out: list[Event]) -> None:
        """Stream what of the value can no longer be markup."""
        held = self._find(self.tags.function_close)
        free = len(self._buf) if held < 0 else held
        free -= max(partial_suffix(self._buf[:free], tag) for tag in self.tags.tags())
        text = self._buf[:free]
        # A last newline may be the markup's before the parameter close: held until more follows.
        if self.tags.value_newlines:
            free -= 2 if text.endswith("\r\n") else 1 if text.endswith(("\n", "\r")) else 0
        if free > 0:
            out.append(ToolCallArgs(self._index, _encode(self._buf[:free])))
            self._buf = self._buf[free:]
            self._searched = max(0, self._searched - free)

    def _end_value(self, value: str) -> list[Event]:
        self.state = PARAMS
        value = _strip_newline(value) if self.tags.value_newlines else value
        if self._streams:
            return [ToolCallArgs(self._index, _encode(value) + '"')]
        converted = convert(value, self._properties.get(self._key))
        return [ToolCallArgs(self._index, self._member_head() + json.dumps(converted, ensure_ascii=False))]

    def _member_head(self) -> str:
        separator = ", " if self._count else ""
        self._count += 1
        return separator + json.dumps(self._key, ensure_ascii=False) + ": "

    def _close_call(self) -> list[Event]:
        return [ToolCallArgs(self._index, "}"), ToolCallEnd(self._index)]


def _encode(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)[1:-1]


def _strip_newline(value: str) -> str:
    """The value without the one newline the markup puts before </parameter>."""
    if value.endswith("\r\n"):
        return value[:-2]
    return value[:-1] if value.endswith("\n") else value
