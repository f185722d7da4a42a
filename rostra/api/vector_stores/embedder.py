"""The embedding model vector stores use, and what they do with it: cut a text into chunks counted in its tokens,
embed chunks and queries.

The model is `--vector-store-model NAME` where given, else the first served model whose task is `embed` (`--task
embed`, or `task: embed` in --models-config; a model loaded already and detected as one counts too). A server
with none answers a 400 that says so. Its work goes through a lease on the model (loading it if need be), as a
request's does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from rostra.api.vector_stores.index import unit
from rostra.errors import InvalidRequest
from rostra.models.bundle import ModelBundle
from rostra.models.manager import ModelManager
from rostra.store.vector_objects import ChunkingStrategy

EMBED_BATCH = 32  # chunks per engine call
_PIECE = re.compile(r"\s*\S+\s*")  # a word and the space after it (leading space on the first)


class NoEmbeddingModel(InvalidRequest):
    def __init__(self, detail: str):
        super().__init__(f"{detail}: vector stores embed with one of the server's embedding models. Serve one (`rostra "
                         "serve --task embed MODEL`, or an entry with `task: embed` in --models-config) and name it "
                         "with --vector-store-model if there are several", param="model",
                         code="no_embedding_model")


class Embedder:
    def __init__(self, models: ModelManager, name: str | None):
        self.models, self.name = models, name

    def model_name(self) -> str:
        """The embedding model's name; NoEmbeddingModel when the server has none."""
        if self.name is not None:
            if self.name not in self.models.names():
                raise NoEmbeddingModel(f"--vector-store-model names {self.name!r}, which this server does not serve")
            return self.name
        for slot in self.models.slots:
            task = slot.bundle.engine.task if slot.bundle is not None else slot.spec.settings.task
            if task == "embed":
                return slot.spec.name
        raise NoEmbeddingModel("this server serves no embedding model")

    async def chunks(self, text: str, strategy: ChunkingStrategy) -> list[str]:
        """`text` in windows of at most max_chunk_size_tokens of the model's tokens (cut between words, the text
        kept as written), each starting max - overlap tokens after the one before."""
        pieces = _PIECE.findall(text)
        if not pieces:
            return []
        lease = await self.models.acquire(self.model_name())
        async with lease as bundle:
            counts = [len(ids) for ids in await bundle.engine.tokenize_texts(pieces, False, None)]
        return windows(pieces, counts, strategy)

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 rows, one per text (each cut to the model's context)."""
        lease = await self.models.acquire(self.model_name())
        async with lease as bundle:
            rows: list[list[float]] = []
            for start in range(0, len(texts), EMBED_BATCH):
                rows += await _embedded(bundle, list(texts[start:start + EMBED_BATCH]))
        return unit(rows) if rows else np.zeros((0, 1), dtype=np.float32)


async def _embedded(bundle: ModelBundle, texts: list[str]) -> list[list[float]]:
    engine = bundle.engine
    ids = await engine.tokenize_texts(texts, True, engine.model.context_length)
    return await engine.embed(ids)


def windows(pieces: list[str], counts: list[int], strategy: ChunkingStrategy) -> list[str]:
    """The pieces (with their token counts) grouped into chunks of at most `max_chunk_size_tokens` tokens (a piece
    longer than that is a chunk of its own), each chunk starting at the first piece past `max - overlap` tokens
    of the one before."""
    size = strategy.static.max_chunk_size_tokens
    step = size - strategy.static.chunk_overlap_tokens
    chunks: list[str] = []
    start = 0
    while start < len(pieces):
        end, used = start, 0
        while end < len(pieces) and (end == start or used + counts[end] <= size):
            used += counts[end]
            end += 1
        chunks.append("".join(pieces[start:end]).strip())
        if end >= len(pieces):
            break
        advanced, next_start = 0, start
        while next_start < end - 1 and advanced + counts[next_start] <= step:
            advanced += counts[next_start]
            next_start += 1
        start = max(next_start, start + 1)
    return [chunk for chunk in chunks if chunk]
