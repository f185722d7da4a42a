"""A request's `chunking_strategy`: OpenAI's static strategy (defaults 800 tokens, 400 overlap: OpenAI's `auto`);
embedder.py cuts the text by it."""

from __future__ import annotations

from typing import Any

from rostra.errors import InvalidRequest
from rostra.store.vector_objects import ChunkingStrategy, StaticChunking


def chunking_strategy(value: dict[str, Any] | None, param: str) -> ChunkingStrategy:
    """A request's `chunking_strategy` (None or auto: static 800/400), within OpenAI's bounds."""
    if value is None or value.get("type") == "auto":
        if value is not None and set(value) != {"type"}:
            raise InvalidRequest("an auto chunking_strategy takes no other fields", param=param)
        return ChunkingStrategy()
    if value.get("type") != "static" or not isinstance(value.get("static"), dict):
        raise InvalidRequest("chunking_strategy must be {\"type\": \"auto\"} or {\"type\": \"static\", \"static\": "
                             "{\"max_chunk_size_tokens\": N, \"chunk_overlap_tokens\": M}}", param=param)
    static = value["static"]
    size, overlap = static.get("max_chunk_size_tokens"), static.get("chunk_overlap_tokens")
    if set(static) != {"max_chunk_size_tokens", "chunk_overlap_tokens"} or not all(
            isinstance(number, int) and not isinstance(number, bool) for number in (size, overlap)):
        raise InvalidRequest("chunking_strategy.static needs whole numbers max_chunk_size_tokens and "
                             "chunk_overlap_tokens", param=f"{param}.static")
    if not 100 <= size <= 4096:
        raise InvalidRequest(f"max_chunk_size_tokens must be between 100 and 4096, not {size}",
                             param=f"{param}.static.max_chunk_size_tokens")
    if not 0 <= overlap <= size // 2:
        raise InvalidRequest(f"chunk_overlap_tokens must be between 0 and half of max_chunk_size_tokens "
                             f"({size // 2}), not {overlap}", param=f"{param}.static.chunk_overlap_tokens")
    return ChunkingStrategy(static=StaticChunking(max_chunk_size_tokens=size, chunk_overlap_tokens=overlap))
