"""minimax_m2: the tool-call markup of MiniMax-M2 (its chat template, llama.cpp
models/templates/unsloth-MiniMax-M2.jinja; MiniMax's own tool-calling guide).

    <minimax:tool_call>
    <invoke name="get_weather">
    <parameter name="city">Oslo</parameter>
    <parameter name="days">3</parameter>
    </invoke>
    </minimax:tool_call>

Several calls are several <invoke> elements in one block. A value is the raw text between its tags (the
template writes strings as they are and anything else with `tojson`): converted by the parameter's schema
type, JSON-decoded where the schema does not say string. Calls stream from their <invoke> on (tagged_calls).
"""

from __future__ import annotations

import re

from rostra.parsing.tools.tagged_calls import CallTags, TaggedCallsToolParser

MINIMAX_M2_TAGS = CallTags(
    function_open="<invoke name=", function_head=re.compile(r'\s*<invoke name="?([^">\n]+?)"?\s*>'),
    parameter_open="<parameter name=", parameter_head=re.compile(r'\s*<parameter name="?([^">\n]+?)"?\s*>'),
    head_end=">", parameter_close="</parameter>", function_close="</invoke>", value_newlines=False)


class MiniMaxM2ToolParser(TaggedCallsToolParser):
    name = "minimax_m2"
    reasoning = "minimax_m2_append_think"
    start = "<minimax:tool_call>"
    end = "</minimax:tool_call>"
    tags = MINIMAX_M2_TAGS
