"""xlam: Salesforce xLAM-2 (Llama- and Qwen-based), a JSON list of calls, bare or in a block.

    [{"name": "get_weather", "arguments": {"city": "Oslo"}}, {"name": "add", "arguments": {"a": 1}}]

The chat template teaches the bare list ("When using tools, make calls in a single JSON array: [{"name":
"tool_call_name", "arguments": {...}}, ...]") and writes past calls back that way (vLLM's
examples/tool_chat_template_xlam_llama.jinja, the template Salesforce's model card points to). The model also puts
the list in a ```json block after some text, after `[TOOL_CALLS]`, or in <tool_call>…</tool_call> (vLLM's
tests/tool_parsers/test_xlam_tool_parser.py): each is read, its closing fence or tag dropped. The list reads as
Granite's does (granite.py): a call streams its arguments once `{"name": …, "arguments": {` is read, and a list that
does not parse or names an unknown tool stays text.
"""

from __future__ import annotations

from rostra.parsing.tools.granite import GraniteToolParser

FENCE = "```json"


class XlamToolParser(GraniteToolParser):
    name = "xlam"
    markers = (FENCE, "[TOOL_CALLS]", "<tool_call>")
    closers = {FENCE: "```", "<tool_call>": "</tool_call>"}
