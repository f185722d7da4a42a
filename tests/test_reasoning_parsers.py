"""Reasoning parsers, data-driven: each case whole, one character at a time and under random
splits (markers split in every position); the streamed result equals the non-streamed one."""

import random

import pytest

from rostra.parsing.reasoning import reasoning_parser_class
from toolparse import run_reasoning_parser, splits

# (parser, prompt tail, enabled, output, expected reasoning, expected answer)
CASES = [
    ("qwen3", "", True, "<think>\nLet me think.\n</think>\n\nThe answer is 4.", "\nLet me think.\n", "The answer is 4."),
    ("qwen3", "", True, "The answer is 4.", "", "The answer is 4."),
    ("qwen3", "", True, "  <think>hm</think>ok", "hm", "ok"),
    ("qwen3", "", False, "<think>no</think>x", "", "<think>no</think>x"),
    ("qwen3", "<|im_start|>assistant\n<think>\n\n</think>\n\n", True, "Answer only.", "", "Answer only."),
    ("qwen3", "<|im_start|>assistant\n<think>\n", True, "thinking...</think>Answer.", "thinking...", "Answer."),
    ("qwen3", "", True, "<think>cut off by max_tok", "cut off by max_tok", ""),
    ("qwen3", "", True, "<thin", "", "<thin"),
    ("qwen3", "", True, "<think>a</think>\n\n<tool_call>{}</tool_call>", "a", "<tool_call>{}</tool_call>"),
    ("qwen3", "", True, "<think>x < y and </thinking> is not the end</think>done", "x < y and </thinking> is not the end",
     "done"),
    ("deepseek_r1", "", True, "Okay, so 2+2.\n</think>\n\n4", "Okay, so 2+2.\n", "4"),
    ("deepseek_r1", "", True, "<think>hm</think>4", "hm", "4"),
    ("deepseek_r1", "", True, "never closed", "never closed", ""),
    ("deepseek_r1", "", True, "", "", ""),
    ("granite", "", True, "Here is my thought process:\nsteps\nHere is my response:\nfinal", "\nsteps\n", "final"),
    ("granite", "", True, "Just an answer.", "", "Just an answer."),
    ("qwen3", "", True, "<think>日本語 🎉</think>Grüße", "日本語 🎉", "Grüße"),
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
