"""hunyuan_a13b: <tool_calls>[…]</tool_calls>, and Hunyuan-A13B's thinking and answer tags. Outputs as the model
writes them: vLLM's tests/tool_parsers/test_hunyuan_a13b_tool_parser.py (one call, several, text before, text after,
nested and non-ASCII arguments, a call with empty arguments first or last, `\\n</answer>` after the block) and
tests/reasoning/test_hunyuan_reasoning_parser.py (`<think>\\n…\\n</think>\\n<answer>\\n…\\n</answer>`, an empty
"quick thought", no thinking at all)."""

import random

import pytest

from rostra.parsing.reasoning import reasoning_parser_class
from rostra.parsing.tools.base import ToolSpec
from toolparse import TOOLS, Case, check_case, run_reasoning_parser, splits

OSLO = ("get_weather", {"city": "Oslo", "days": 3})
NESTED = {"city": "北京", "days": 1, "extra": {"level1": {"level2": {"value": 123}}, "aliases": ["John", None, True]}}
SEARCH = ToolSpec("search", {"type": "object", "properties": {"q": {"type": "string"}}})


def block(*calls: str) -> str:
    return "<tool_calls>[" + ", ".join(calls) + "]</tool_calls>"


WEATHER = '{"name": "get_weather", "arguments": {"city": "Oslo", "days": 3}}'

CASES = [
    Case("none", "How can I help you today?", "How can I help you today?"),
    Case("one", block(WEATHER), "", [OSLO]),
    Case("parallel", block(WEATHER, '{"name": "add", "arguments": {"a": 1, "b": 2.5}}'), "",
         [OSLO, ("add", {"a": 1, "b": 2.5})]),
    Case("text-before", "I will call the tool now. " + block(WEATHER), "I will call the tool now. ", [OSLO]),
    Case("text-after", block(WEATHER) + "\nThank you!", "\nThank you!", [OSLO]),
    Case("nested-non-ascii", block('{"name": "get_weather", "arguments": {"city": "北京", "days": 1, "extra": '
                                   '{"level1": {"level2": {"value": 123}}, "aliases": ["John", null, true]}}}'), "",
         [("get_weather", NESTED)]),
    Case("empty-arguments-first", block('{"name": "now", "arguments": {}}', '{"name": "add", "arguments": {"a": 42}}'),
         "", [("now", {}), ("add", {"a": 42})]),
    Case("empty-arguments-last", block('{"name": "add", "arguments": {"a": 42}}', '{"name": "now", "arguments": {}}'),
         "", [("add", {"a": 42}), ("now", {})]),
    Case("unknown-tool-stays-text", block('{"name": "launch", "arguments": {}}'),
         block('{"name": "launch", "arguments": {}}')),
    Case("not-json-stays-text", "<tool_calls>get_weather(Oslo)</tool_calls>", "<tool_calls>get_weather(Oslo)</tool_calls>"),
    Case("cut-off-mid-arguments", '<tool_calls>[{"name": "get_weather", "arguments": {"city": "Os', "",
         [("get_weather", {"city": "Os"})]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_hunyuan_tool_calls(case):
    check_case("hunyuan_a13b", case, tools=[*TOOLS, SEARCH])


PROMPT = "<|startoftext|>…用户：hi<|extra_0|>"  # the template's prompt: it opens nothing
OFF = PROMPT + "<think>\n\n</think>\n"  # enable_thinking false

REASONING = [
    (PROMPT, "<think>\nThis is a reasoning section\n</think>\n<answer>\nThis is the rest\n</answer>",
     "\nThis is a reasoning section\n", "This is the rest"),
    (PROMPT, "<think>\n\n</think>\n<answer>\nThis is the rest\n</answer>", "\n\n", "This is the rest"),
    (PROMPT, "<think>\nThis\nThat\n</think>\n<answer>\nThis is the rest\nThat", "\nThis\nThat\n",
     "This is the rest\nThat"),
    (PROMPT, "This is content", "", "This is content"),
    (PROMPT, "<think>\ncut off", "\ncut off", ""),
    (PROMPT, "<think>\nCall it.\n</think>\n<answer>\n" + block(WEATHER) + "\n</answer>", "\nCall it.\n", block(WEATHER)),
    (OFF, "<answer>\n答案 <b>ok</b>\n</answer>", "", "答案 <b>ok</b>"),
]


@pytest.mark.parametrize("prompt,output,thinking,answer", REASONING)
def test_hunyuan_reasoning(prompt, output, thinking, answer):
    def run(pieces):
        return run_reasoning_parser(reasoning_parser_class("hunyuan_a13b")(prompt), pieces)[:2]

    assert run([output]) == (thinking, answer)
    assert run(list(output)) == (thinking, answer)
    rng = random.Random(output)
    for _ in range(100):
        assert run(splits(output, rng)) == (thinking, answer)
