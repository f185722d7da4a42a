"""gemma4: Google Gemma 4, FunctionGemma's call syntax in Gemma 4's own tokens.

    <|tool_call>call:get_weather{city:<|"|>Oslo<|"|>,days:3}<tool_call|>

The chat template writes past calls that way (`'<|tool_call>call:' + function['name'] + '{'`, each argument as
`key:` and `format_argument(value)`: strings between `<|"|>` tokens, numbers and booleans bare, objects and lists
nested, then `'}<tool_call|>'`: llama.cpp models/templates/gemma4.jinja). The arguments read as FunctionGemma's
(functiongemma.py, functiongemma_values.py) with `<|"|>` for `<escape>`; a call streams pair by pair once
`call:NAME{` is read. The thinking (`<|channel>thought\\n…<channel|>`) is the gemma4 reasoning parser's.
"""

from __future__ import annotations

from rostra.parsing.tools.functiongemma import FunctionGemmaToolParser


class Gemma4ToolParser(FunctionGemmaToolParser):
    name = "gemma4"
    reasoning = "gemma4"
    start = "<|tool_call>"
    end = "<tool_call|>"
    escape = '<|"|>'
