"""Searching vector stores: a request's query, filters and ranking options checked, each store's index kept per
version (index.py), the queries embedded once, the hits of several stores merged best first."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from rostra.api.vector_stores.embedder import Embedder
from rostra.api.vector_stores.filters import Filter, parse_filter
from rostra.api.vector_stores.index import Hit, SearchIndex, Weights
from rostra.api.vector_stores.reranker import Reranker, candidates
from rostra.errors import InvalidRequest
from rostra.store.vector_store import VectorStores

# OpenAI's rankers: "none" is the embeddings' cosine alone; "auto" and its named (dated) rankers are its best
# ranking, here the hybrid index reranked by the served reranker where one is configured (reranker.py).
RANKERS = ("none", "auto", "default-2024-11-15", "default_2024_08_21")


@dataclass(frozen=True)
class SearchOptions:
    queries: tuple[str, ...]
    max_results: int = 10
    filter: Filter | None = None
    threshold: float = 0.0
    weights: Weights | None = Weights()  # None: the embeddings' cosine alone (ranker "none")
    rerank: bool = True  # by the served reranker, if there is one (not for ranker "none")


def search_options(query: Any, max_results: int | None, filters: Any, ranking: Any, prefix: str = "") -> SearchOptions:
    """A search request's (or a file_search tool's) options, each checked; `prefix`: where they sit (tools[0].)."""
    queries = [query] if isinstance(query, str) else query
    if not isinstance(queries, list) or not queries or not all(isinstance(text, str) and text.strip()
                                                                for text in queries):
        raise InvalidRequest("query must be a non-empty string or a list of them", param=f"{prefix}query")
    limit = 10 if max_results is None else max_results
    if not 1 <= limit <= 50:
        raise InvalidRequest(f"max_num_results must be between 1 and 50, not {limit}",
                             param=f"{prefix}max_num_results")
    parsed = None if filters is None else parse_filter(filters, f"{prefix}filters")
    threshold, weights = _ranking(ranking or {}, f"{prefix}ranking_options")
    return SearchOptions(tuple(queries), limit, parsed, threshold, weights, rerank=weights is not None)


def _ranking(ranking: Any, param: str) -> tuple[float, Weights | None]:
    if not isinstance(ranking, dict) or set(ranking) - {"ranker", "score_threshold", "hybrid_search"}:
        raise InvalidRequest("ranking_options has ranker, score_threshold and hybrid_search", param=param)
    ranker = ranking.get("ranker") or "auto"
    if ranker not in RANKERS:
        raise InvalidRequest(f"ranker must be one of {', '.join(RANKERS)}, not {ranker!r}", param=f"{param}.ranker")
    threshold = ranking.get("score_threshold") or 0.0
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 <= threshold <= 1:
        raise InvalidRequest("score_threshold must be a number between 0 and 1", param=f"{param}.score_threshold")
    hybrid = ranking.get("hybrid_search")
    if ranker == "none":
        return float(threshold), None
    if hybrid is None:
        return float(threshold), Weights()
    weights = (hybrid.get("embedding_weight"), hybrid.get("text_weight")) if isinstance(hybrid, dict) else ()
    if len(weights) != 2 or not all(isinstance(w, (int, float)) and not isinstance(w, bool) and w >= 0
                                    for w in weights) or sum(weights) <= 0:  # type: ignore[arg-type]
        raise InvalidRequest("hybrid_search needs embedding_weight and text_weight, numbers of at least 0 that are "
                             "not both 0", param=f"{param}.hybrid_search")
    return float(threshold), Weights(float(weights[0]), float(weights[1]))  # type: ignore[arg-type]


class Searcher:
    """Each store's index, kept while its version stands."""

    def __init__(self, store: VectorStores, embedder: Embedder, reranker: Reranker | None = None):
        self.store, self.embedder, self.reranker = store, embedder, reranker
        self._indexes: dict[str, tuple[int, SearchIndex]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def index(self, store_id: str) -> SearchIndex:
        async with self._locks.setdefault(store_id, asyncio.Lock()):  # one build per version, whoever asks
            version = await self.store.version(store_id)
            kept = self._indexes.get(store_id)
            if kept is not None and kept[0] == version:
                return kept[1]
            rows = await self.store.index_rows(store_id)
            built = await asyncio.to_thread(SearchIndex, rows)
            self._indexes[store_id] = (version, built)
            return built

    def forget(self, store_id: str) -> None:
        self._indexes.pop(store_id, None)

    async def search(self, store_ids: list[str], options: SearchOptions) -> list[Hit]:
        indexes = [await self.index(store_id) for store_id in store_ids]
        if not any(len(index) for index in indexes):
            return []
        reranker = self.reranker if options.rerank else None
        if reranker is not None:
            reranker.check()  # before the embedding's work, not after
        vectors = await self.embedder.embed(options.queries)
        keep = options.filter.matches if options.filter is not None else None
        # Reranked: the index's best candidates, whatever their first-stage score; the threshold is the reranker's.
        limit = options.max_results if reranker is None else candidates(options.max_results)
        threshold = options.threshold if reranker is None else 0.0
        hits: list[Hit] = []
        for index in indexes:
            hits += await asyncio.to_thread(index.search, vectors, options.queries, limit, threshold,
                                            options.weights, keep)
        hits.sort(key=lambda hit: -hit.score)
        if reranker is not None and hits:
            hits = hits[:limit]
            scores = await reranker.scores(options.queries, [hit.row.text for hit in hits])
            hits = [Hit(hit.row, score) for hit, score in zip(hits, scores) if score >= options.threshold]
            hits.sort(key=lambda hit: -hit.score)
        return hits[:options.max_results]
