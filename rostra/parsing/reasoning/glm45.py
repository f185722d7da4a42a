"""GLM-4.5 / 4.6 / 4.7 thinking: <think>…</think> at the start of the answer.

The chat template's generation prompt is `<|assistant|>` and the model opens the block itself; with
`enable_thinking=false` the template writes an empty `<think></think>` into the prompt and the output is
all answer (llama.cpp models/templates/GLM-4.6.jinja). So: Qwen3's rules."""

from __future__ import annotations

from rostra.parsing.reasoning.think import Qwen3ReasoningParser


class Glm45ReasoningParser(Qwen3ReasoningParser):
    name = "glm45"
