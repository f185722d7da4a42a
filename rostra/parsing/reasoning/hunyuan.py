"""Hunyuan-A13B: `<think>\\n…\\n</think>\\n<answer>\\n…\\n</answer>` (vLLM's tests/reasoning/
test_hunyuan_reasoning_parser.py: START_REASONING "<think>\\n", START_RESPONSE "\\n</think>\\n<answer>\\n",
END_RESPONSE "\\n</answer>"; a "quick thought" leaves the thinking empty). The model opens the thinking itself; with
`enable_thinking` false the template closes an empty block in the prompt (`<think>\\n\\n</think>\\n`, vLLM's
examples/tool_chat_template_hunyuan_a13b.jinja), and the output is all answer. The answer's tags, with the newline
each puts beside the answer, are never content; its tool calls (<tool_calls>…) go on to the hunyuan_a13b tool parser.
"""

from __future__ import annotations

from rostra.parsing.reasoning.marked_answer import MarkedAnswerReasoningParser


class HunyuanReasoningParser(MarkedAnswerReasoningParser):
    name = "hunyuan_a13b"
    start = "<think>"
    end = "</think>"
    answer_markers = ("<answer>\n", "\n</answer>", "<answer>", "</answer>")
