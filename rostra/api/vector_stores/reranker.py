"""The served reranker vector store searches are reranked by (`--vector-store-reranker NAME`): a model of this
server whose task is `rerank` (a cross-encoder, a decoder reranker with `--task rerank`, a reranking GGUF, or a
gateway's upstream reranker). The search's first stage (the hybrid index, index.py) proposes candidates; the
reranker scores each (query, chunk) pair as /v1/rerank does (rostra/api/rerank/), and its scores become the
results' `score`: the best over the search's queries, compared with `score_threshold`.

A chunk longer than the reranker's context is read as far as it reaches (its text cut, not the search refused): a
chunk is sized in the embedding model's tokens, which may hold more than the reranker's context.
"""

from __future__ import annotations

from collections.abc import Sequence

from rostra.engines.base import Engine, PairTooLong
from rostra.errors import InvalidRequest
from rostra.models.manager import ModelManager

# The first stage's candidates for `n` results: enough that the reranker can lift a chunk the index ranked low,
# few enough that a search costs a bounded number of reranker passes.
RERANK_CANDIDATES_PER_RESULT, MIN_CANDIDATES, MAX_CANDIDATES = 3, 20, 100


def candidates(results: int) -> int:
    return min(max(RERANK_CANDIDATES_PER_RESULT * results, MIN_CANDIDATES, results), MAX_CANDIDATES)


class Reranker:
    def __init__(self, models: ModelManager, name: str):
        self.models, self.name = models, name

    def check(self) -> None:
        """A 400 when the named model is not served, or is not a reranker (checked at each search: models come and
        go with --models-dir)."""
        if self.name not in self.models.names():
            raise InvalidRequest(f"--vector-store-reranker names {self.name!r}, which this server does not serve",
                                 param="ranking_options.ranker", code="no_reranker")
        for slot in self.models.slots:
            task = slot.bundle.engine.task if slot.bundle is not None else slot.spec.settings.task
            if slot.spec.name == self.name and task not in ("rerank", None, "auto"):
                raise InvalidRequest(f"--vector-store-reranker names {self.name!r}, a model whose task is {task}, "
                                     "not rerank", param="ranking_options.ranker", code="no_reranker")

    async def scores(self, queries: Sequence[str], texts: Sequence[str]) -> list[float]:
        """Each text's relevance: the best of its scores against the queries."""
        self.check()
        lease = await self.models.acquire(self.name)
        async with lease as bundle:
            best = [float("-inf")] * len(texts)
            for query in queries:
                scored = await _scored(bundle.engine, self.name, query, list(texts))
                best = [max(old, new) for old, new in zip(best, scored)]
        return best


async def _scored(engine: Engine, name: str, query: str, texts: list[str]) -> list[float]:
    if engine.relays_scoring:  # a gateway: its upstream's /v1/rerank
        body = await engine.relay_scoring(name, "rerank", {"model": name, "query": query, "documents": texts})
        scores = [0.0] * len(texts)
        for result in body.get("results", []):
            scores[int(result["index"])] = float(result["relevance_score"])
        return scores
    if engine.task != "rerank":
        raise InvalidRequest(f"--vector-store-reranker names {name!r}, which is not a reranker",
                             param="ranking_options.ranker", code="no_reranker")
    pairs = [(query, text) for text in texts]
    for _ in range(4 * len(pairs)):  # each retry shortens one pair; a few per pair at most
        try:
            return (await engine.score_pairs(pairs)).scores
        except PairTooLong as exc:
            document = pairs[exc.index][1]
            keep = max(1, min(len(document) - 1, int(len(document) * exc.limit / exc.tokens * 0.9)))
            pairs[exc.index] = (query, document[:keep])
    raise InvalidRequest("the query is too long for the reranker's context", param="query",
                         code="context_length_exceeded")
