"""Magistral (Mistral's reasoning models, tokenizer v13): `[THINK]…[/THINK]` then the answer.

Both markers are special tokens. The chat template never opens the thinking in the prompt; its default system
prompt asks the model to think in `[THINK]…[/THINK]` first (unsloth-Magistral-Small-2509.jinja, as llama.cpp's
tests use it), so an output that does not open with `[THINK]` is all answer (a system prompt of the user's own
may ask for no thinking). Tool calls (`[TOOL_CALLS]name[ARGS]{…}`) follow the thinking, read by `mistral`.
"""

from __future__ import annotations

from rostra.parsing.reasoning.base import ReasoningParser


class MagistralReasoningParser(ReasoningParser):
    name = "magistral"
    start = "[THINK]"
    end = "[/THINK]"
