"""internlm2: InternLM2 / InternLM2.5, one call per action, a JSON object after the plugin token.

    <|action_start|><|plugin|>
    {"name": "get_weather", "parameters": {"city": "Oslo"}}<|action_end|>

`<|action_start|>`, `<|plugin|>` and `<|action_end|>` are special tokens of InternLM2's vocabulary; the model writes
its arguments under "parameters" (vLLM's tests/tool_parsers/test_internlm2_tool_parser.py: with or without the newline
after `<|plugin|>`, pretty-printed objects, text before the action); the tool template vLLM ships for it writes past
calls back with "arguments" (examples/tool_chat_template_internlm2_tool.jinja): both are read. A call streams its
arguments once `{"name": …, "parameters": {` is read (CallStream); an action that cannot stream is parsed whole at
`<|action_end|>` (or the end of the output): a call, or text if it does not parse or names an unknown tool. (The
code interpreter's `<|action_start|><|interpreter|>` is not a function call: it stays text.)
"""

from __future__ import annotations

from rostra.parsing.tools.base import MarkupToolParser, ParsedCall, calls_from_json

PLUGIN_ACTION = "<|action_start|><|plugin|>"


class InternLM2ToolParser(MarkupToolParser):
    name = "internlm2"
    start = PLUGIN_ACTION
    end = "<|action_end|>"
    end_optional = True
    stream_calls = True

    def parse_block(self, block: str) -> list[ParsedCall] | None:
        calls = calls_from_json(block.strip())
        return calls if calls is not None and len(calls) == 1 else None  # one call per action
