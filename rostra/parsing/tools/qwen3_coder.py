"""qwen3_coder: the XML-like call format of Qwen3-Coder (templates that render `<function=…>`).

    <tool_call>
    <function=get_weather>
    <parameter=city>
    Oslo
    </parameter>
    <parameter=days>
    3
    </parameter>
    </function>
    </tool_call>

Several <tool_call> blocks are parallel calls. A parameter's value is raw text, not JSON: the
newline after <parameter=…> and the one before </parameter> belong to the markup, and the value
is converted by the type the tool's JSON schema gives that parameter (a string stays exactly
as written, so code with quotes or newlines needs no escaping).

A block that begins with `<function=NAME>` of a known tool streams (tagged_calls_stream): the
call starts there and its arguments are written as JSON while the parameters arrive. Any other
block is parsed whole at its end.

Tolerated: a block closed by </tool_call> whose </function> (or last </parameter>) is missing,
and a block cut off by the end of the output after a complete </function>. A block cut off
earlier is text, like every other malformed block.
"""

from __future__ import annotations

from rostra.parsing.tools.param_values import convert, schema_types
from rostra.parsing.tools.tagged_calls import QWEN3_CODER_TAGS, TaggedCallsToolParser

__all__ = ["Qwen3CoderToolParser", "convert", "schema_types"]


class Qwen3CoderToolParser(TaggedCallsToolParser):
    name = "qwen3_coder"
    start = "<tool_call>"
    end = "</tool_call>"
    tags = QWEN3_CODER_TAGS
