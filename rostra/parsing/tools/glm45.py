"""glm45: the tool-call markup of Zhipu GLM-4.5, GLM-4.6 and GLM-4.7 (`<tool_call>NAME` with key/value pairs).

    <tool_call>get_weather
    <arg_key>city</arg_key>
    <arg_value>Oslo</arg_value>
    <arg_key>days</arg_key>
    <arg_value>3</arg_value>
    </tool_call>

GLM-4.5 and 4.6 put a newline after the name and after each tag pair (their chat template's own rendering,
llama.cpp models/templates/GLM-4.6.jinja); GLM-4.7 writes them without any
(`<tool_call>get_weather<arg_key>city</arg_key><arg_value>Oslo</arg_value></tool_call>`, vLLM's glm47
parser tests). Both read alike: the name runs to the first `<` or newline. A value is the raw text between
its tags: a string exactly as written, anything else as the template wrote it (`tojson`), so a value is
JSON-decoded unless the tool's schema says the parameter is a string (what vLLM's glm4_moe parser does).
One call per block; several calls are several blocks. Calls stream from their name on (tagged_calls).
"""

from __future__ import annotations

import re

from rostra.parsing.tools.tagged_calls import CallTags, TaggedCallsToolParser

GLM45_TAGS = CallTags(
    function_open="", function_head=re.compile(r"\s*([^\s<>]+)(?=\s|<|\Z)"),
    parameter_open="<arg_key>", parameter_head=re.compile(r"\s*<arg_key>([^<\n]*)</arg_key>\s*<arg_value>"),
    head_end="<arg_value>", parameter_close="</arg_value>", function_close="",
    value_newlines=False, name_needs_follower=True)


class Glm45ToolParser(TaggedCallsToolParser):
    name = "glm45"
    reasoning = "glm45"
    start = "<tool_call>"
    end = "</tool_call>"
    tags = GLM45_TAGS
