"""Layered tool parsing, the default: the format's parser first, then rostra's lenient
recognisers on the text it leaves.

Models do not always write the format their chat template teaches: Qwen2.5-Coder-0.5B, whose
template asks for <tool_call> tags, answers with a fenced ```json block (tests/data/qwen25_coder.jsonl).
So the text the format's parser releases goes on through, in order:

1. `<tool_call>` blocks read leniently (LenientTagParser): a missing end tag, a fenced JSON body,
   or a <function=NAME> body;
2. bare `<function=NAME><parameter=…>…</function>` blocks (BareFunctionParser);
3. JSON: fenced blocks, bare objects, lists of calls, "parameters" for "arguments" (json_lenient).

Every layer takes only calls to tools of the request; all else stays text. `--tool-call-parser`
pins the first layer; `--strict-tool-parsing` leaves only it.
"""

from __future__ import annotations

import re
from typing import Callable, Sequence

from rostra.parsing.events import Event
from rostra.parsing.tools.base import ParsedCall, ToolParser, ToolSpec, calls_from_json
from rostra.parsing.tools.json_lenient import JsonToolParser
from rostra.parsing.tools.qwen3_coder import Qwen3CoderToolParser

FENCED = re.compile(r"```[ \t]*(?:json)?[ \t]*\n?(.*?)\n?[ \t]*```", re.S | re.I)


class LenientTagParser(Qwen3CoderToolParser):
    """<tool_call> blocks whatever their body: JSON call(s), fenced JSON, or <function=…> XML."""

    name = "lenient_tool_call"
    restarts = True

    def parse_block(self, block: str) -> list[ParsedCall] | None:
        body = block.strip()
        if body.startswith("<function="):
            return super().parse_block(block)
        fenced = FENCED.fullmatch(body)
        return calls_from_json(fenced.group(1).strip() if fenced else body)


class BareFunctionParser(Qwen3CoderToolParser):
    """<function=NAME>…</function> without the <tool_call> around it."""

    name = "bare_function"
    start = "<function="
    end = "</function>"

    def parse_block(self, block: str) -> list[ParsedCall] | None:
        return super().parse_block(self.start + block + self.end)


LENIENT_LAYERS: tuple[type[ToolParser], ...] = (LenientTagParser, BareFunctionParser, JsonToolParser)


class LayeredToolParser(ToolParser):
    name = "layered"

    def __init__(self, layers: Sequence[ToolParser]):
        super().__init__([])
        self.layers = list(layers)
        self.tools = self.layers[0].tools

    def feed(self, events: list[Event]) -> list[Event]:
        for layer in self.layers:
            events = layer.feed(events)
        return events

    def finish(self) -> list[Event]:
        events: list[Event] = []
        for position, layer in enumerate(self.layers):
            flushed = layer.finish()
            for later in self.layers[position + 1:]:
                flushed = later.feed(flushed)
            events += flushed
        return events


def layered_tool_parser(primary: type[ToolParser]) -> Callable[..., ToolParser]:
    """A factory like a parser class: (tools, max_calls) -> the layered parser over `primary`."""

    def make(tools: Sequence[ToolSpec], max_calls: int | None = None) -> ToolParser:
        if primary in LENIENT_LAYERS:  # (json: a template that teaches no format) the lenient layers in their order,
            # so a <tool_call> block is read whole: JSON read first would leave its tags in the text
            return LayeredToolParser([layer(tools, max_calls) for layer in LENIENT_LAYERS])
        layers = [primary(tools, max_calls)]
        layers += [layer(tools, max_calls) for layer in LENIENT_LAYERS]
        return LayeredToolParser(layers)

    make.name = primary.name  # type: ignore[attr-defined]
    return make
