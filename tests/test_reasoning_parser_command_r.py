"""command_r: Command R7B / Command A thinking (`<|START_THINKING|>…<|END_THINKING|>`) and its answer markers
(`<|START_RESPONSE|>…<|END_RESPONSE|>`), never content. Outputs from llama.cpp's tests/test-chat.cpp for
CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja (an answer with and without its markers, thinking then the
answer, thinking then an action), each whole, one character at a time and under random splits."""

import random

import pytest

from rostra.parsing.reasoning import reasoning_parser_class
from toolparse import run_reasoning_parser, splits

PROMPT = "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"  # the template's generation prompt: it opens nothing
ACTION = ('<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "special_function", "parameters": {"arg1": 1}}\n'
          "]<|END_ACTION|>")

CASES = [
    ("Hello, world!\nWhat's up?", True, "", "Hello, world!\nWhat's up?"),
    ("<|START_RESPONSE|>Hello, world!\nWhat's up?<|END_RESPONSE|>", True, "", "Hello, world!\nWhat's up?"),
    ("Hello, world!\nWhat's up?<|END_RESPONSE|>", True, "", "Hello, world!\nWhat's up?"),
    ("<|START_THINKING|>I'm\nthinking<|END_THINKING|><|START_RESPONSE|>Hello, world!\nWhat's up?<|END_RESPONSE|>",
     True, "I'm\nthinking", "Hello, world!\nWhat's up?"),
    ("<|START_THINKING|>I'm not so sure<|END_THINKING|>" + ACTION, True, "I'm not so sure", ACTION),
    ("<|START_THINKING|>cut off in the plan", True, "cut off in the plan", ""),
    ("<|START_RESPONSE|>cut off in the answer <|END_RESP", True, "", "cut off in the answer <|END_RESP"),
    ("<|START_RESPONSE|>日本 <b>ok</b><|END_RESPONSE|>", False, "", "日本 <b>ok</b>"),
]


@pytest.mark.parametrize("output,enabled,thinking,answer", CASES)
def test_command_r_reasoning(output, enabled, thinking, answer):
    def run(pieces):
        return run_reasoning_parser(reasoning_parser_class("command_r")(PROMPT, enabled), pieces)[:2]

    assert run([output]) == (thinking, answer)
    assert run(list(output)) == (thinking, answer)
    rng = random.Random(output)
    for _ in range(100):
        assert run(splits(output, rng)) == (thinking, answer)
