"""longcat: Meituan LongCat's tool calls, one `<longcat_tool_call>` block per call, in either of the two bodies the
LongCat models write:

    <longcat_tool_call>{"name": "get_weather", "arguments": {"city": "Tokyo"}}</longcat_tool_call>

(LongCat-Flash-Chat: hermes's JSON in LongCat's tags; the model card's tool-calling format, vLLM's
tests/tool_parsers/test_longcat_tool_parser.py), and

    <longcat_tool_call>get_weather
    <longcat_arg_key>city</longcat_arg_key>
    <longcat_arg_value>Tokyo</longcat_arg_value>
    </longcat_tool_call>

(the later LongCat models: GLM-4.5's key/value pairs with LongCat's tag names, as clients of the LongCat API
receive them, e.g. yaicli's tests/test_longcat_provider.py). Which body a block has is known from its first
character: JSON streams as hermes's does (CallStream), the pairs as GLM's do (FunctionStream); a value is a
string unless the tool's schema says otherwise. A block that reads as neither stays text.
"""

from __future__ import annotations

import re

from rostra.parsing.events import Event
from rostra.parsing.tools.base import BlockStream, ParsedCall, calls_from_json
from rostra.parsing.tools.call_stream import CallStream
from rostra.parsing.tools.tagged_calls import CallTags, TaggedCallsToolParser

LONGCAT_TAGS = CallTags(
    function_open="", function_head=re.compile(r"\s*([^\s<>{]+)(?=\s|<|\Z)"),
    parameter_open="<longcat_arg_key>",
    parameter_head=re.compile(r"\s*<longcat_arg_key>([^<\n]*)</longcat_arg_key>\s*<longcat_arg_value>"),
    head_end="<longcat_arg_value>", parameter_close="</longcat_arg_value>", function_close="",
    value_newlines=False, name_needs_follower=True)


class LongCatToolParser(TaggedCallsToolParser):
    name = "longcat"
    start = "<longcat_tool_call>"
    end = "</longcat_tool_call>"
    tags = LONGCAT_TAGS
    restarts = True  # a new block's start ends one whose end tag was left out
    drops_empty = True

    def parse_block(self, block: str) -> list[ParsedCall] | None:
        body = block.strip()
        return calls_from_json(body) if body.startswith("{") else super().parse_block(block)

    def new_stream(self) -> BlockStream | None:
        return JsonOrPairsStream(self)


class JsonOrPairsStream:
    """A block's stream, chosen by its first character: a JSON call object, or a name and key/value pairs."""

    def __init__(self, parser: LongCatToolParser):
        self.parser = parser
        self._inner: BlockStream | None = None

    @property
    def started(self) -> bool:
        return self._inner is not None and self._inner.started

    def feed(self, text: str) -> tuple[list[Event], str]:
        if self._inner is None:
            stripped = text.lstrip()
            if not stripped:
                return [], ""
            if stripped[0] == "{":
                self._inner = CallStream(self.parser)
            else:
                self._inner = TaggedCallsToolParser.new_stream(self.parser)
                assert self._inner is not None
            text = stripped
        return self._inner.feed(text)

    def end(self) -> list[Event]:
        return self._inner.end() if self._inner is not None else []
