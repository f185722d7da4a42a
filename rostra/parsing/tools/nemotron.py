"""nemotron_json: NVIDIA Nemotron (Llama-3.1/3.3-Nemotron, Nemotron Nano v2), calls in <TOOLCALL> tags.

    <TOOLCALL>[{"name": "get_weather", "arguments": {"city": "Oslo"}}, {"name": "add", "arguments": {"a": 1}}]</TOOLCALL>

The chat templates teach a JSON list of calls between the tags and write past calls back that way
(NVIDIA-Nemotron-Nano-v2.jinja, nvidia-Llama-3_3-Nemotron-Super-49B-v1_5.jinja in llama.cpp's models/templates);
the model now and then writes one object without the list, or its arguments as a JSON string (vLLM's
tests/tool_parsers/test_nemotron_nano_v2_tool_parser.py): both are calls. Each call streams its arguments once
`{"name": …, "arguments": {` is read (CallListStream); a block that cannot stream is parsed whole at
</TOOLCALL> (or at the end of the output, where the model often stops before the tag): calls, or text if it
does not parse or names an unknown tool. Text around the block is content.
"""

from __future__ import annotations

import re

from rostra.parsing.events import Event
from rostra.parsing.tools.base import BlockStream, MarkupToolParser, ParsedCall, ToolParser, calls_from_json
from rostra.parsing.tools.call_stream import HEAD, CallListStream


class NemotronToolParser(MarkupToolParser):
    name = "nemotron_json"
    start = "<TOOLCALL>"
    end = "</TOOLCALL>"
    end_optional = True

    def parse_block(self, block: str) -> list[ParsedCall] | None:
        return calls_from_json(block.strip())

    def new_stream(self) -> BlockStream | None:
        return ListOrObjectStream(self)


class ListOrObjectStream:
    """A block of JSON calls, a list or one object: which one is known from its first character."""

    def __init__(self, parser: ToolParser, head: re.Pattern[str] = HEAD):
        self.parser = parser
        self.head = head  # each call's head (call_stream.CallStream)
        self._calls: CallListStream | None = None
        self._whole = False  # the block does not begin with "[" or "{": parsed whole at its end

    @property
    def started(self) -> bool:
        return self._calls is not None and self._calls.started

    def feed(self, text: str) -> tuple[list[Event], str]:
        if self._whole:
            return [], ""
        if self._calls is None:
            text = text.lstrip()
            if not text:
                return [], ""
            if text[0] not in "[{":
                self._whole = True
                return [], ""
            self._calls = CallListStream(self.parser, bracket=text[0] == "[", head=self.head)
        return self._calls.feed(text)

    def end(self) -> list[Event]:
        return self._calls.end() if self._calls is not None else []
