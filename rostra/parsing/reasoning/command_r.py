"""Command R7B / Command A: `<|START_THINKING|>plan<|END_THINKING|>`, then calls (<|START_ACTION|>…, read by the
command_r tool parser) or the answer in `<|START_RESPONSE|>…<|END_RESPONSE|>`.

The chat template asks for exactly this ("Start by writing <|START_THINKING|> followed by a detailed step by step
plan … close it out with <|END_THINKING|>", "write <|START_RESPONSE|> followed by a piece of text which serves as
a response … close it out with <|END_RESPONSE|>"; llama.cpp models/templates/
CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja) and its generation prompt opens neither: an output that does
not begin with the thinking is answer. The thinking is optional, and llama.cpp's tests (tests/test-chat.cpp) read
an answer with and without its response markers: both give the text between them.
"""

from __future__ import annotations

from rostra.parsing.reasoning.marked_answer import MarkedAnswerReasoningParser


class CommandRReasoningParser(MarkedAnswerReasoningParser):
    name = "command_r"
    start = "<|START_THINKING|>"
    end = "<|END_THINKING|>"
    answer_markers = ("<|START_RESPONSE|>", "<|END_RESPONSE|>")
