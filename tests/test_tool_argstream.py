"""Argument streaming in every tool-call format: the work per delta is proportional to the delta,
not to everything written so far (a long file write fed in small deltas scales linearly)."""

import json
import time

import pytest

from rostra.parsing.events import Text
from rostra.parsing.reasoning.gpt_oss import GptOssReasoningParser
from rostra.parsing.tools import deepseek_v3, kimi_k2, tool_parser_class
from toolparse import TOOLS


def long_call(parser: str, text: str) -> str:
    """A get_weather call whose `city` is `text`, as each format writes it."""
    args = json.dumps({"city": text})
    return {
        "hermes": f'<tool_call>{{"name": "get_weather", "arguments": {args}}}</tool_call>',
        "llama3_json": f'<|python_tag|>{{"name": "get_weather", "parameters": {args}}}',
        "granite": f'<|tool_call|>[{{"name": "get_weather", "arguments": {args}}}]',
        "mistral": f"[TOOL_CALLS]get_weather[ARGS]{args}",
        "deepseek_v3": (f"{deepseek_v3.CALLS_BEGIN}{deepseek_v3.CALL_BEGIN}function{deepseek_v3.SEP}get_weather\n"
                        f"```json\n{args}\n```{deepseek_v3.CALL_END}{deepseek_v3.CALLS_END}"),
        "kimi_k2": (f"{kimi_k2.SECTION_BEGIN}{kimi_k2.CALL_BEGIN}functions.get_weather:0{kimi_k2.ARGUMENTS_BEGIN}"
                    f"{args}{kimi_k2.CALL_END}{kimi_k2.SECTION_END}"),
        "qwen3_coder": f"<tool_call>\n<function=get_weather>\n<parameter=city>\n{text}\n</parameter>\n</function>\n</tool_call>",
        "pythonic": f"[get_weather(city={json.dumps(text)})]",
    }[parser]


def feed_time(parser_name: str, size: int, step: int = 8) -> float:
    output = long_call(parser_name, ("x = 1  # line\n" * size)[:size])
    parser = tool_parser_class(parser_name)(TOOLS)
    started = time.perf_counter()
    for at in range(0, len(output), step):
        parser.feed([Text(output[at: at + step])])
    parser.finish()
    return time.perf_counter() - started


def gpt_oss_time(size: int, step: int = 8) -> float:
    output = ("<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
              + json.dumps({"city": ("x = 1  # line\n" * size)[:size]}) + "<|call|>")
    parser = GptOssReasoningParser()
    started = time.perf_counter()
    for at in range(0, len(output), step):
        parser.feed([Text(output[at: at + step])])
    parser.finish()
    return time.perf_counter() - started


@pytest.mark.parametrize("parser_name", ["hermes", "llama3_json", "granite", "mistral", "deepseek_v3", "kimi_k2",
                                         "qwen3_coder", "pythonic", "gpt_oss"])
def test_cost_per_delta_is_proportional_to_the_delta(parser_name):
    measure = gpt_oss_time if parser_name == "gpt_oss" else lambda size: feed_time(parser_name, size)
    measure(2_000)  # warm up
    small = min(measure(20_000) for _ in range(3))
    large = min(measure(80_000) for _ in range(3))
    # Linear work gives 4x for 4x the text; work that rescans what was written gives 16x.
    assert large / small < 8, (parser_name, small, large)
