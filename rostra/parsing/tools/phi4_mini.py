"""phi4_mini_json: Microsoft Phi-4-mini, the marker `functools` followed by a JSON list of calls.

    functools[{"name": "get_weather", "arguments": {"city": "Oslo"}}, {"name": "add", "arguments": {"a": 1}}]

`functools` is one special token of Phi-4-mini's vocabulary; the list has no closing marker ("prefix function
calls with functools marker (no closing marker required)", vLLM's examples/tool_chat_template_phi4_mini.jinja;
the outputs in vLLM's tests/tool_parsers/test_phi4mini_tool_parser.py). The list is read as Granite's is
(granite.py): text before the marker and after the list is content, a call streams its arguments once
`{"name": …, "arguments": {` is read, a list that does not parse or names an unknown tool stays text, and
`functools` not followed by `[` or `{` (the library's name in prose) is text.
"""

from __future__ import annotations

from rostra.parsing.tools.granite import GraniteToolParser

MARKER = "functools"


class Phi4MiniToolParser(GraniteToolParser):
    name = "phi4_mini_json"
    markers = (MARKER,)
