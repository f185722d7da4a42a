"""command_r: Cohere Command R7B (and Command A, which keeps its markup), calls as a JSON list between action tokens.

    <|START_ACTION|>[
        {"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"city": "Oslo"}},
        {"tool_call_id": "1", "tool_name": "add", "parameters": {"a": 1}}
    ]<|END_ACTION|>

The shape is the one the chat template teaches ("write <|START_ACTION|> followed by a list of JSON-formatted tool
calls, with each one containing "tool_name" and "parameters" fields … close it out with <|END_ACTION|>") and
writes past calls back in (llama.cpp models/templates/CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja; the
outputs of llama.cpp's tests/test-chat.cpp for it). `tool_call_id` is the model's index of the call in the
conversation, not an id a client could use: a fresh id is made for each call. A call streams its arguments once
`{"tool_call_id": …, "tool_name": …, "parameters": {` is read (CallListStream); a list of any other shape is
parsed whole at <|END_ACTION|> (or at the end of the output): calls, or text if it does not parse or names an
unknown tool. The thinking before it (<|START_THINKING|>…) and the answer markers are the reasoning parser's
(reasoning/command_r.py).
"""

from __future__ import annotations

import re
from typing import Any

from rostra.parsing.tools.base import BlockStream, MarkupToolParser, ParsedCall, call_from_object, loads_strict
from rostra.parsing.tools.nemotron import ListOrObjectStream

START_ACTION, END_ACTION = "<|START_ACTION|>", "<|END_ACTION|>"
_STRING = r'"(?:[^"\\\n]|\\.)*"'
# A call's head as the template writes it: the id (a string, or a number a model may write), then the name.
HEAD = re.compile(r'\s*\{\s*(?:"tool_call_id"\s*:\s*(?:' + _STRING + r'|\d+)\s*,\s*)?'
                  r'"tool_name"\s*:\s*"((?:[^"\\\n]|\\.)*)"\s*,\s*"parameters"\s*:\s*(\S)')


class CommandRToolParser(MarkupToolParser):
    name = "command_r"
    reasoning = "command_r"
    start = START_ACTION
    end = END_ACTION
    end_optional = True  # a model stopped at its end-of-turn token before closing the action

    def parse_block(self, block: str) -> list[ParsedCall] | None:
        try:
            value = loads_strict(block.strip())
        except (ValueError, RecursionError):
            return None
        items = value if isinstance(value, list) else [value]
        calls = [_call(item) for item in items]
        return None if not calls or any(c is None for c in calls) else calls  # type: ignore[return-value]

    def new_stream(self) -> BlockStream | None:
        return ListOrObjectStream(self, head=HEAD)


def _call(item: Any) -> ParsedCall | None:
    """{"tool_call_id": …, "tool_name": N, "parameters": {…}}: the call it is."""
    if not isinstance(item, dict) or "tool_name" not in item:
        return None
    return call_from_object({"name": item["tool_name"], "arguments": item.get("parameters")})
