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
    if name == "transformers_embed":
        from rostra.engines.transformers_embed import TransformersEmbeddingEngine

        return TransformersEmbeddingEngine(**options)
    if name == "transformers_rerank":
        from rostra.engines.transformers_rerank import TransformersRerankEngine

        return TransformersRerankEngine(**options)
    if name == "remote":
        from rostra.engines.remote import RemoteEngine

        return RemoteEngine(**options)
    if name == "vllm":
        from rostra.engines.vllm import VllmEngine  # imports vLLM itself only when built

        return VllmEngine(**options)
    raise ValueError(f"unknown engine {name!r} (choose llamacpp, scripted, transformers, vllm or remote)")
