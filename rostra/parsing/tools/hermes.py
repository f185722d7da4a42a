"""hermes: <tool_call>{"name": …, "arguments": {…}}</tool_call> (Hermes, Qwen2.5, Qwen3, SmolLM3).

Several calls are several blocks. A block cut off by the end of the output (max_tokens) is
still a call if its JSON is complete. Markup never reaches the content: an empty block and a
stray `</tool_call>` are dropped; a block that is not a call stays text whole (issue 45).
"""

from __future__ import annotations

from rostra.parsing.tools.base import MarkupToolParser, ParsedCall, calls_from_json


class HermesToolParser(MarkupToolParser):
    name = "hermes"
    start = "<tool_call>"
    end = "</tool_call>"
    end_optional = True
    stream_calls = True  # {"name": …, "arguments": {…}} blocks stream their arguments
    restarts = True  # <tool_call>{…}<tool_call>{…}: the first block's end tag was left out
    drops_stray_end = True  # <tool_call>{…}</tool_call></tool_call>: the second end tag is markup
    drops_empty = True  # Qwen-family models write <tool_call>\n\n</tool_call>: no call, no text

    def parse_block(self, block: str) -> list[ParsedCall] | None:
        return calls_from_json(block.strip())
