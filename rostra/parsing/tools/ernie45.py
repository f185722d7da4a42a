"""ernie45: Baidu ERNIE 4.5 (ERNIE-4.5-21B-A3B-Thinking and its siblings), hermes's calls after its thinking.

    I need to call two tools to handle these two issues separately.
    </think>

    <tool_call>
    {"name": "get_current_temperature", "arguments": {"location": "Beijing"}}
    </tool_call>

(vLLM's tests/tool_parsers/test_ernie45_moe_tool_parser.py: one call, several, thinking before them.) The blocks
are hermes's (hermes.py); the thinking, and the <response> tags its answers may come in, are the ernie45 reasoning
parser's (reasoning/ernie45.py).
"""

from __future__ import annotations

from rostra.parsing.tools.hermes import HermesToolParser


class Ernie45ToolParser(HermesToolParser):
    name = "ernie45"
    reasoning = "ernie45"
    probed = False  # (hermes reads the same probe; no ERNIE chat template with tools was found to detect it by)
