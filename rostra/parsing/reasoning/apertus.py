"""Apertus (swiss-ai) thinking: <|inner_prefix|>…<|inner_suffix|>, opened by the model after `<|assistant_start|>`
when the developer turn says `Deliberation: enabled` (its chat template, tests/data/templates/Apertus-8B-Instruct.jinja;
llama.cpp's Apertus handler treats a prompt ending in <|inner_prefix|> as thinking already open).

The template writes a turn's tool calls right after its thoughts without closing them (`<|inner_prefix|>…
<|tools_prefix|>[…]<|tools_suffix|>`), so a tool-call section ends the thinking and belongs to the answer, as
Kimi K2 Thinking's does."""

from __future__ import annotations

from rostra.parsing.reasoning.base import ReasoningParser


class ApertusReasoningParser(ReasoningParser):
    name = "apertus"
    start = "<|inner_prefix|>"
    end = "<|inner_suffix|>"
    answer_starts = ("<|tools_prefix|>",)
