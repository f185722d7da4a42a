"""jamba: AI21 Jamba (1.5, 1.6, 1.7), a JSON list of calls between <tool_calls> tags.

    <tool_calls>[
    {"name": "get_weather", "arguments": {"city": "Oslo"}},
    {"name": "add", "arguments": {"a": 1}}
    ]</tool_calls>

The chat template writes past calls back that way (`tool_calls_prefix + "[\\n"`, one `{"name": …, "arguments": …}`
per call, `"\\n]" + tool_calls_suffix`: the Jamba Mini 1.7 template, tests/data/templates/
ai21labs-AI21-Jamba-Mini-1.7.jinja); vLLM's tests/tool_parsers/test_jamba_tool_parser.py has the model's outputs
(a space before the block, text before it, several calls). The block reads as Hunyuan-A13B's and Nemotron's do
(nemotron.py): each call streams its arguments once `{"name": …, "arguments": {` is read; a block that cannot
stream is parsed whole at </tool_calls> or at the end of the output, and one that does not parse or names an
unknown tool stays text. Jamba does not think: no reasoning parser.

Hunyuan's calls read alike, so detection tells the two apart by the family's turn markup in the template
(`family_markers`: Jamba's `<|bom|>` / `<|eom|>`).
"""

from __future__ import annotations

from rostra.parsing.tools.nemotron import NemotronToolParser


class JambaToolParser(NemotronToolParser):
    name = "jamba"
    start = "<tool_calls>"
    end = "</tool_calls>"
    family_markers = ("<|bom|>", "<|eom|>")
