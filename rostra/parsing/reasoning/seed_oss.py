"""Seed-OSS thinking: <seed:think>…</seed:think>, opened by the model after the generation prompt
`<seed:bos>assistant\n` (llama.cpp models/templates/ByteDance-Seed-OSS.jinja). The budget reflections the
model writes inside it (<seed:cot_budget_reflect>…) are part of the thinking."""

from __future__ import annotations

from rostra.parsing.reasoning.base import ReasoningParser


class SeedOssReasoningParser(ReasoningParser):
    name = "seed_oss"
    start = "<seed:think>"
    end = "</seed:think>"
