"""<think>…</think> reasoning (DeepSeek-R1, Qwen3, QwQ and their distillations)."""

from __future__ import annotations

from rostra.parsing.reasoning.base import ReasoningParser


class DeepSeekR1ReasoningParser(ReasoningParser):
    """DeepSeek-R1: the chat template usually writes <think> itself, so an output that does not
    open with it is thinking until </think>."""

    name = "deepseek_r1"
    start = "<think>"
    end = "</think>"
    unopened_is_reasoning = True


class Qwen3ReasoningParser(ReasoningParser):
    """Qwen3: thinks in <think>…</think> unless `enable_thinking=false` (then the template closes an
    empty block itself, and the output is all answer); an output that does not open a block is answer."""

    name = "qwen3"
    start = "<think>"
    end = "</think>"
