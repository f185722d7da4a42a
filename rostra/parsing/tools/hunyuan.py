"""hunyuan_a13b: Tencent Hunyuan-A13B, a JSON list of calls between <tool_calls> tags, inside its answer.

    <answer>
    <tool_calls>[{"name": "get_weather", "arguments": {"city": "Oslo"}}, {"name": "add", "arguments": {"a": 1}}]</tool_calls>
    </answer>

The chat template teaches the list ("如果你决定调用任何函数，你必须将其格式化为<tool_calls>[{"name": "func_name1",
"arguments": {...}},...]</tool_calls>") and writes past calls back that way (vLLM's
examples/tool_chat_template_hunyuan_a13b.jinja); vLLM's tests/tool_parsers/test_hunyuan_a13b_tool_parser.py has the
model's outputs (text before the block, nested and non-ASCII arguments, `</answer>` after it). The block reads as
Nemotron's does (nemotron.py): a call streams its arguments once `{"name": …, "arguments": {` is read, a block that
cannot stream is parsed whole at </tool_calls> or the end of the output, and one that does not parse or names an
unknown tool stays text. The thinking and the <answer> tags are the reasoning parser's (reasoning/hunyuan.py).
"""

from __future__ import annotations

from rostra.parsing.tools.nemotron import NemotronToolParser


class HunyuanToolParser(NemotronToolParser):
    name = "hunyuan_a13b"
    reasoning = "hunyuan_a13b"
    start = "<tool_calls>"
    end = "</tool_calls>"
