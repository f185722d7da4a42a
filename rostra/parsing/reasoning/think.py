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


class DeepSeekV3ReasoningParser(ReasoningParser):
    """DeepSeek V3.1 (and its hybrid successors): the template ends the prompt with `<think>` when thinking is on
    (`thinking` / `enable_thinking`, off by default) and with `</think>` when it is off; the model writes only the
    close. So the prompt decides: after `<think>` the output is thinking until `</think>`, else it is all answer
    (unlike R1, an output that does not open a block is answer)."""

    name = "deepseek_v3"
    start = "<think>"
    end = "</think>"


class KimiK2ReasoningParser(ReasoningParser):
    """Kimi K2 Thinking: `<think>…</think>` then the answer and/or its tool-call section. The model sometimes opens
    the tool-call section without closing the thinking first (vLLM's kimi_k2 reasoning parser handles the same):
    the section begin then ends the thinking and goes on, whole, to the tool parser."""

    name = "kimi_k2"
    start = "<think>"
    end = "</think>"
    answer_starts = ("<|tool_calls_section_begin|>",)
