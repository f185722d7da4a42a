"""The reasoning parsers of DeepSeek V3.1, Kimi K2 Thinking and Magistral, and the prompt that opens the thinking:
each case whole, one character at a time and under random splits; the streamed result equals the non-streamed one.

Prompt tails are what the real templates render (tests/data/templates): V3.1 ends the prompt with `<think>` when
thinking is on and `</think>` when off; R1 with `<think>\\n`; Nemotron Nano v2 with `<think>\\n\\n` (or
`<think></think>` for /no_think). Outputs follow the models: V3.1 writes only the close (llama.cpp's
test_deepseek_v3_1_parser), Kimi K2 Thinking opens its tool-call section inside the thinking now and then (vLLM's
tests/reasoning/test_kimi_k2_reasoning_parser.py), Magistral thinks in [THINK]…[/THINK] (llama.cpp's
test_magistral_parser: "[THINK]raisonnement[/THINK]Réponse")."""

import random

import pytest

from rostra.parsing.reasoning import reasoning_parser_class
from toolparse import run_reasoning_parser, splits

V31_ON, V31_OFF = "<｜User｜>hi<｜Assistant｜><think>", "<｜User｜>hi<｜Assistant｜></think>"
KIMI_SECTION = ("<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
                '{"city": "Oslo"}<|tool_call_end|><|tool_calls_section_end|>')

# (parser, prompt tail, enabled, output, expected reasoning, expected answer)
CASES = [
    ("deepseek_v3", V31_ON, True, "The user greets me.</think>Hello! 日本", "The user greets me.", "Hello! 日本"),
    ("deepseek_v3", V31_ON, True, "cut off while thin", "cut off while thin", ""),
    ("deepseek_v3", V31_OFF, True, "Hello, no thinking.", "", "Hello, no thinking."),
    ("deepseek_v3", V31_OFF, True, "A stray </think> is answer text.", "", "A stray </think> is answer text."),
    ("deepseek_v3", V31_ON, False, "Hello.", "", "Hello."),
    ("deepseek_v3", V31_ON, True, "Call it.</think>\n\n<｜tool▁calls▁begin｜>…", "Call it.", "<｜tool▁calls▁begin｜>…"),
    ("deepseek_r1", "<｜Assistant｜><think>\n", True, "Okay.\n</think>\n\n4", "Okay.\n", "4"),
    ("qwen3", "<SPECIAL_11>Assistant\n<think>\n\n", True, "Nemotron thinks.\n</think>\nAnswer.", "Nemotron thinks.\n",
     "Answer."),
    ("qwen3", "<SPECIAL_11>Assistant\n<think></think>", True, "Answer only.", "", "Answer only."),
    ("kimi_k2", "<|im_assistant|>assistant<|im_middle|>", True, "<think>Check Oslo.</think>It is sunny.",
     "Check Oslo.", "It is sunny."),
    ("kimi_k2", "", True, "<think>Need the weather.</think>" + KIMI_SECTION, "Need the weather.", KIMI_SECTION),
    ("kimi_k2", "", True, "<think>Need the weather." + KIMI_SECTION, "Need the weather.", KIMI_SECTION),
    ("kimi_k2", "", True, "<think>cut off <|tool_calls_sec", "cut off <|tool_calls_sec", ""),
    ("kimi_k2", "", True, "Plain answer.", "", "Plain answer."),
    ("magistral", "[INST]Bonjour[/INST]", True, "[THINK]raisonnement[/THINK]Réponse", "raisonnement", "Réponse"),
    ("magistral", "", True, "[THINK]Let me see.\n[/THINK]\n\n[TOOL_CALLS]get_weather[ARGS]{}", "Let me see.\n",
     "[TOOL_CALLS]get_weather[ARGS]{}"),
    ("magistral", "", True, "No thinking asked for.", "", "No thinking asked for."),
    ("magistral", "", True, "[THINK]never closed", "never closed", ""),
    ("magistral", "", True, "[THIN", "", "[THIN"),
    ("magistral", "", False, "[THINK]x[/THINK]y", "", "[THINK]x[/THINK]y"),
]


def run(name, prompt, enabled, pieces):
    reasoning, answer, _ = run_reasoning_parser(reasoning_parser_class(name)(prompt, enabled), pieces)
    return reasoning, answer


@pytest.mark.parametrize("name,prompt,enabled,output,reasoning,answer", CASES)
def test_reasoning_parser(name, prompt, enabled, output, reasoning, answer):
    assert run(name, prompt, enabled, [output]) == (reasoning, answer)
    assert run(name, prompt, enabled, list(output)) == (reasoning, answer)
    rng = random.Random(output)
    for _ in range(200):
        assert run(name, prompt, enabled, splits(output, rng)) == (reasoning, answer)
