"""The XML-like call formats: a call's name in a tag, then one tag pair per parameter with its raw value.

    Qwen3-Coder, Seed-OSS   <function=NAME><parameter=KEY>VALUE</parameter>…</function>
    MiniMax-M2              <invoke name="NAME"><parameter name="KEY">VALUE</parameter>…</invoke>
    GLM-4.5 / 4.6 / 4.7     NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>…   (no close of its own)

inside the format's block markers (<tool_call>, <seed:tool_call>, <minimax:tool_call>). A format is its
CallTags; TaggedCallsToolParser reads a block whole, and tagged_calls_stream.FunctionStream streams it. A
value is raw text: converted by the type the tool's schema gives the parameter (param_values.convert), so a
string stays exactly as written (code with quotes or newlines needs no escaping).

Tolerated: a block closed by its end marker whose function close (or last parameter close) is missing, and a
block cut off by the end of the output after a complete function close. A block cut off earlier is text, like
every other malformed block (unless its call already started streaming: see tagged_calls_stream).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from rostra.parsing.events import Event
from rostra.parsing.tools.base import BlockStream, MarkupToolParser, ParsedCall, ToolSpec
from rostra.parsing.tools.param_values import convert


@dataclass(frozen=True)
class CallTags:
    """One format's tags. The patterns match at the start of the text (after whitespace)."""

    function_open: str  # the literal a call's head begins with ("" : the name opens the block, GLM)
    function_head: re.Pattern[str]  # a call's whole head; group 1 is its name
    parameter_open: str
    parameter_head: re.Pattern[str]  # a parameter's head, up to where its value begins; group 1 is the key
    head_end: str  # what ends a parameter's head: seen without a match, the head is not one
    parameter_close: str
    function_close: str  # "" : nothing closes a call but its block's end (GLM)
    # The markup puts one newline on each side of a value (Qwen3-Coder's template; Seed-OSS's reference
    # parser strips them too): those newlines are not the value's.
    value_newlines: bool = True
    # A name is known only once something follows it (GLM: nothing closes the name but what comes next).
    name_needs_follower: bool = False

    def tags(self) -> tuple[str, ...]:
        """The tags that end or interrupt a value, for what the stream must hold back."""
        return tuple(tag for tag in (self.parameter_close, self.parameter_open, self.function_close) if tag)


SPACE = re.compile(r"\s*")

QWEN3_CODER_TAGS = CallTags(
    function_open="<function=", function_head=re.compile(r"\s*<function=([^>\n]+)>"),
    parameter_open="<parameter=", parameter_head=re.compile(r"\s*<parameter=([^>\n]+)>"), head_end=">",
    parameter_close="</parameter>", function_close="</function>")


class TaggedCallsToolParser(MarkupToolParser):
    """A block of tagged calls; `tags` says which format. Blocks stream (FunctionStream) once a call to a known
    tool is read; any other block is parsed whole at its end."""

    tags: CallTags
    end_optional = True

    def __init__(self, tools: Sequence[ToolSpec], max_calls: int | None = None):
        super().__init__(tools, max_calls)
        self._cut_off = False  # the block being parsed ran to the end of the output unclosed

    def new_stream(self) -> BlockStream | None:
        from rostra.parsing.tools.tagged_calls_stream import FunctionStream  # (it builds on this module)

        return FunctionStream(self)

    def finish(self) -> list[Event]:
        # The base closes an unterminated block only from finish(); mark it so parse_block can
        # insist on a complete call there (a cut-off call must not become a shorter one).
        self._cut_off = True
        try:
            return super().finish()
        finally:
            self._cut_off = False

    def parse_block(self, block: str) -> list[ParsedCall] | None:
        calls: list[ParsedCall] = []
        pos = 0
        while True:
            opened = self.tags.function_head.match(block, pos)
            if not opened or (self.tags.name_needs_follower and self._cut_off and opened.end() == len(block)):
                break
            parsed = self._parse_function(block, opened.group(1).strip(), opened.end())
            if parsed is None:
                return None
            call, pos = parsed
            calls.append(call)
            if not self.tags.function_close:
                break  # one call per block
        # Only whitespace may follow the last function; nothing else may sit in the block.
        return calls if calls and not block[pos:].strip() else None

    def _parse_function(self, block: str, name: str, pos: int) -> tuple[ParsedCall, int] | None:
        tags, properties = self.tags, self.properties(name)
        arguments: dict[str, Any] = {}
        while True:
            space = SPACE.match(block, pos)
            at = space.end() if space else pos
            if tags.function_close and block.startswith(tags.function_close, at):
                return ParsedCall(name, arguments), at + len(tags.function_close)
            opened = tags.parameter_head.match(block, pos)
            if not opened:
                # No function close: acceptable only where the block itself was closed and nothing but
                # whitespace is left (for GLM, whose calls have no close, that is the rule).
                if block[pos:].strip() or (self._cut_off and tags.function_close):
                    return None
                return ParsedCall(name, arguments), len(block)
            key, start = opened.group(1).strip(), opened.end()
            end = block.find(tags.parameter_close, start)
            after = block.find(tags.parameter_open, start)
            if end >= 0 and (after < 0 or end < after):
                pos = end + len(tags.parameter_close)  # (a value may contain the function close)
            else:
                # A missing parameter close: the value runs to the next tag (or the block's end).
                following = self._next_tag(block, start)
                if self._cut_off and following < 0:
                    return None
                end = pos = following if following >= 0 else len(block)
            value = block[start:end]
            arguments[key] = convert(strip_newlines(value) if tags.value_newlines else value, properties.get(key))

    def _next_tag(self, block: str, start: int) -> int:
        """Where the next parameter or the function close begins after `start`, or -1."""
        tags = (self.tags.parameter_open, self.tags.function_close)
        found = [at for at in (block.find(tag, start) for tag in tags if tag) if at >= 0]
        return min(found) if found else -1

    def properties(self, name: str) -> dict[str, Any]:
        tool = self.tools.get(name)
        properties = tool.parameters.get("properties") if tool and isinstance(tool.parameters, dict) else None
        return properties if isinstance(properties, dict) else {}


def strip_newlines(value: str) -> str:
    """The value without the one newline the markup puts on each side of it."""
    if value.startswith("\r\n"):
        value = value[2:]
    elif value.startswith("\n"):
        value = value[1:]
    if value.endswith("\r\n"):
        value = value[:-2]
    elif value.endswith("\n"):
        value = value[:-1]
    return value
