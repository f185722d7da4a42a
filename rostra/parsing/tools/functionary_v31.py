"""functionary_v31: MeetKai Functionary v3.1 (Llama 3.1 based), one call per `<function=NAME>` tag, JSON arguments.

    <function=get_weather>{"city": "Oslo", "days": 3}</function><function=add>{"a": 1, "b": 2}</function>

The chat template teaches it ("If a you choose to call a function ONLY reply in the following format:
<{start_tag}={function_name}>{parameters}{end_tag} … start_tag => `<function` … parameters => a JSON dict …
end_tag => `</function>`") and writes past calls back that way (llama.cpp models/templates/
meetkai-functionary-medium-v3.1.jinja; the outputs in llama.cpp's tests/test-chat.cpp,
`<function=special_function>{"arg1": 1}</function>`). Unlike Qwen3-Coder's `<function=…>` (qwen3_coder.py)
the body is a JSON object, not <parameter> tags. A call streams its arguments once `NAME>{` is read (CallStream);
a block that cannot stream is parsed whole at `</function>` (or at the end of the output): a call, or text if its
body is not a JSON object or names an unknown tool. Text around the calls is content. (The template also writes
calls to its built-in `python` tool as `<|python_tag|>CODE`: left to the lenient layers.)
"""

from __future__ import annotations

import re

from rostra.parsing.tools.base import BlockStream, MarkupToolParser, ParsedCall, loads_strict
from rostra.parsing.tools.call_stream import CallStream

HEAD = re.compile(r'\s*([^\s<>"\\]+)>\s*(\S)')  # NAME> then the arguments' first character


class FunctionaryV31ToolParser(MarkupToolParser):
    name = "functionary_v31"
    start = "<function="
    end = "</function>"
    end_optional = True  # the model stopped at <|eom_id|> before closing the call

    def parse_block(self, block: str) -> list[ParsedCall] | None:
        name, bracket, body = block.partition(">")
        if not bracket or not name.strip() or any(c.isspace() or c in '<"' for c in name.strip()):
            return None
        try:
            arguments = loads_strict(body) if body.strip() else {}
        except (ValueError, RecursionError):
            return None
        return [ParsedCall(name.strip(), arguments)] if isinstance(arguments, dict) else None

    def new_stream(self) -> BlockStream | None:
        return CallStream(self, head=HEAD, opening="")
