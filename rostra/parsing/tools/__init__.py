"""Tool-call parsers: one small file per format over one base contract (base.ToolParser).

Select one with `--tool-call-parser NAME`; `tool_parser_class(NAME)` finds it in REGISTRY.
"""

from __future__ import annotations

import importlib

from rostra.parsing.tools.base import ToolParser

# name -> "module:Class" under rostra.parsing.tools, imported on first use.
REGISTRY: dict[str, str] = {
    "hermes": "hermes:HermesToolParser",
}


def tool_parser_names() -> list[str]:
    return sorted(REGISTRY)


def tool_parser_class(name: str) -> type[ToolParser]:
    if name not in REGISTRY:
        raise ValueError(f"unknown tool-call parser {name!r}; choose from {', '.join(tool_parser_names())}")
    module, cls = REGISTRY[name].split(":")
    return getattr(importlib.import_module(f"rostra.parsing.tools.{module}"), cls)
