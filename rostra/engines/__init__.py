"""Engines are adapters behind one async interface (base.Engine).

Nothing outside `rostra/engines/<name>.py` imports an engine library; `load_engine` imports
the chosen adapter lazily so an unused engine's dependencies are never needed.
"""

from __future__ import annotations

from rostra.engines.base import Engine


def load_engine(name: str, **options) -> Engine:
    if name == "llamacpp":
        from rostra.engines.llamacpp import LlamaCppEngine

        return LlamaCppEngine(**options)
    if name == "scripted":
        from rostra.engines.scripted import ScriptedEngine

        return ScriptedEngine(**options)
    if name == "transformers":
        from rostra.engines.transformers import TransformersEngine

        return TransformersEngine(**options)
    raise ValueError(f"unknown engine {name!r} (choose llamacpp, transformers or scripted)")
