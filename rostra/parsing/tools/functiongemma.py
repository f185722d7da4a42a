"""functiongemma: Google's FunctionGemma, one call per `<start_function_call>` block.

    <start_function_call>call:get_weather{city:<escape>Oslo<escape>,days:3}<end_function_call>

(Google's FunctionGemma guide, "Formatting and best practices", and its model card's example
`<start_function_call>call:get_current_temperature{location:<escape>London<escape>}<end_function_call>`; several
calls are several blocks, one after another: vLLM's tests/tool_parsers/test_functiongemma_tool_parser.py.) The
arguments are FunctionGemma's own syntax (functiongemma_values.py), read into JSON; a top-level value takes the type
the tool's schema gives it. The model ends its turn after its calls with `<start_function_response>` (the guide
names it a stop sequence).

A call starts once `call:NAME{` is read, NAME a tool of the request, and its arguments stream pair by pair as each
is written (FunctionGemmaStream); a block that cannot stream is parsed whole at `<end_function_call>` or at the end
of the output: a call, or text if it is not this syntax or names an unknown tool.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from rostra.parsing.events import Event, ToolCallArgs, ToolCallEnd, ToolCallStart
from rostra.parsing.tools.base import BlockStream, MarkupToolParser, ParsedCall
from rostra.parsing.tools.functiongemma_values import (ESCAPE, Incomplete, Malformed, read_key, read_object,
                                                       read_value, separator, skip_space, typed)

log = logging.getLogger("rostra.tools")

HEAD = re.compile(r"\s*call:([^\s{}<>,]+)\{")
OPENING = "call:"
HEAD_LIMIT = 500  # no head in this much text: it is not coming


class FunctionGemmaToolParser(MarkupToolParser):
    name = "functiongemma"
    start = "<start_function_call>"
    end = "<end_function_call>"
    end_optional = True  # the model stopped (or was stopped) before closing the block
    escape = ESCAPE  # the token around strings

    def parse_block(self, block: str) -> list[ParsedCall] | None:
        found = HEAD.match(block)
        if not found:
            return None
        name = found.group(1)
        try:
            pairs, after = read_object(block, found.end(), 1, self.escape)
        except (Incomplete, Malformed):
            return None
        if block[after:].strip():
            return None
        return [ParsedCall(name, {key: typed(value, self.schema(name, key)) for key, value in pairs.items()})]

    def schema(self, name: str, key: str) -> Any:
        tool = self.tools.get(name)
        properties = tool.parameters.get("properties") if tool and isinstance(tool.parameters, dict) else None
        return properties.get(key) if isinstance(properties, dict) else None

    def new_stream(self) -> BlockStream | None:
        return FunctionGemmaStream(self)


# HEAD_STATE: before `call:NAME{`; PAIRS: reading the arguments; after the call: CLOSED (the object ended; what
# follows is the caller's) or DROPPED (it broke: the rest is dropped); WHOLE: the block is parsed whole at its end.
HEAD_STATE, PAIRS, CLOSED, DROPPED, WHOLE = "head", "pairs", "closed", "dropped", "whole"


class FunctionGemmaStream:
    """One block's call, streamed: `{` when the call starts, then each pair as `"key": value` once it is whole,
    then `}`. A pair is read again from its start when more text comes, so a value is whole however it was split."""

    def __init__(self, parser: FunctionGemmaToolParser):
        self.parser = parser
        self.state = HEAD_STATE
        self._buf = ""
        self._pos = 0  # _buf before this is written out
        self._count = 0  # pairs written
        self._index = -1
        self._name = ""

    @property
    def started(self) -> bool:
        return self.state in (PAIRS, CLOSED, DROPPED)

    def feed(self, text: str) -> tuple[list[Event], str]:
        if self.state in (WHOLE, DROPPED):
            return [], ""
        if self.state == CLOSED:
            return [], text
        self._buf += text
        out: list[Event] = []
        if self.state == HEAD_STATE and not self._head(out):
            return out, ""
        return self._pairs(out)

    def end(self) -> list[Event]:
        """The block ended: a call still open ends with the pairs written so far."""
        return self._close() if self.state == PAIRS else []

    def _head(self, out: list[Event]) -> bool:
        found = HEAD.match(self._buf)
        if not found:
            stripped = self._buf.lstrip()
            if len(self._buf) > HEAD_LIMIT or not (OPENING.startswith(stripped) or stripped.startswith(OPENING)):
                self.state = WHOLE
            return False
        name, full = found.group(1), self.parser.max_calls is not None and self.parser.calls >= self.parser.max_calls
        if name not in self.parser.tools or full:
            self.state = WHOLE  # (the whole-block parse leaves it text, or drops it over the limit)
            return False
        self.state, self._name, self._pos = PAIRS, name, found.end()
        self._index = self.parser.calls
        self.parser.calls += 1
        out += [ToolCallStart(self._index, self.parser.new_call_id(), name), ToolCallArgs(self._index, "{")]
        return True

    def _pairs(self, out: list[Event]) -> tuple[list[Event], str]:
        while True:
            pos = skip_space(self._buf, self._pos)
            try:
                if self._buf.startswith("}", pos):
                    out += self._close()
                    return out, self._buf[pos + 1:]
                if self._count:
                    pos = separator(self._buf, pos, "}") + 1
                key, pos = read_key(self._buf, pos, self.parser.escape)
                value, pos = read_value(self._buf, pos, escape=self.parser.escape)  # (a bare one is whole only at the `,` or `}` after it)
            except Incomplete:
                return out, ""
            except Malformed as bad:
                log.info("%s call %r: arguments stop being readable at %.60r", self.parser.name, self._name,
                         str(bad))
                out += self._close()
                self.state = DROPPED
                return out, ""
            value = typed(value, self.parser.schema(self._name, key))
            piece = json.dumps(key, ensure_ascii=False) + ": " + json.dumps(value, ensure_ascii=False)
            out.append(ToolCallArgs(self._index, (", " if self._count else "") + piece))
            self._count += 1
            self._pos = pos

    def _close(self) -> list[Event]:
        self.state = CLOSED
        return [ToolCallArgs(self._index, "}"), ToolCallEnd(self._index)]

