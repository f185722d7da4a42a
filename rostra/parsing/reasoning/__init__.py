"""Reasoning parsers: one small file per format over one base contract (base.ReasoningParser).

Select one with `--reasoning-parser NAME`. They run before the tool parser, which then sees
only the answer.
"""

from __future__ import annotations

import importlib

from rostra.parsing.reasoning.base import ReasoningParser

REGISTRY: dict[str, str] = {
    "deepseek_r1": "think:DeepSeekR1ReasoningParser",
    "qwen3": "think:Qwen3ReasoningParser",
    "granite": "granite:GraniteReasoningParser",
}


def reasoning_parser_names() -> list[str]:
    return sorted(REGISTRY)


def reasoning_parser_class(name: str) -> type[ReasoningParser]:
    if name not in REGISTRY:
        raise ValueError(f"unknown reasoning parser {name!r}; choose from {', '.join(reasoning_parser_names())}")
    module, cls = REGISTRY[name].split(":")
    return getattr(importlib.import_module(f"rostra.parsing.reasoning.{module}"), cls)
