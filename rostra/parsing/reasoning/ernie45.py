"""ERNIE 4.5 thinking models: `abc\\n</think>\\n\\n<response>\\ndef\\n</response>\\n`, or `abc\\n</think>\\ndef`
(vLLM's ernie45 reasoning parser's description of the model's output; its tests/reasoning/
test_ernie45_reasoning_parser.py: `abc</think>def`, an output without `</think>` is all thinking, multi-line
thinking and answer). The model does not write `<think>`: an output that does not open it is thinking until
`</think>`. The answer's <response> tags, with the newlines around them, are never content; tool calls
(<tool_call>…) go on to the ernie45 tool parser.
"""

from __future__ import annotations

from rostra.parsing.reasoning.marked_answer import MarkedAnswerReasoningParser


class Ernie45ReasoningParser(MarkedAnswerReasoningParser):
    name = "ernie45"
    start = "<think>"
    end = "</think>"
    unopened_is_reasoning = True
    answer_markers = ("\n\n<response>\n", "\n<response>\n", "<response>\n", "\n</response>\n", "\n</response>",
                      "<response>", "</response>")
