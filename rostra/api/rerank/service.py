"""/v1/rerank, /v2/rerank and /v1/score: a validated request -> (query, document) pairs -> the engine's scores ->
the vendor's response.

What is the same for every engine happens here, once: the request's shapes and limits, the pairs, the order
(results sorted by relevance_score, highest first, each with the `index` of its document), `top_n`,
`return_documents` and usage. Engines only score pairs (Engine.score_pairs), each as its reference
implementation does: llama.cpp as its own server's rank pooling (the classifier's raw output), transformers as
sentence-transformers' CrossEncoder and vLLM (a one-label classifier's logit through a sigmoid; a decoder reranker:
P(yes) from its yes/no logits, as the Qwen3-Reranker card computes it), vLLM as its own score API. A gateway relays
the request whole to the upstream that serves the model.
"""

from __future__ import annotations

import secrets
import time
from typing import Callable

from rostra.api.rerank.request import MAX_DOCUMENTS, RerankRequest, ScoreRequest
from rostra.engines.base import Engine, PairScores, PairTooLong
from rostra.errors import InvalidRequest
from rostra.serving.validation import check_model, check_rerank


class RerankService:
    def __init__(self, engine: Engine, served_names: Callable[[], list[str]]):
        self.engine = engine
        self.served_names = served_names

    async def rerank(self, body: RerankRequest) -> dict[str, object]:
        model = self.model_name(body.model)
        if self.engine.relays_scoring:
            return await self.engine.relay_scoring(model, "rerank", {**body.model_dump(exclude_unset=True),
                                                                     "model": model})
        self.check_reranker(model)
        texts = body.texts()
        if not texts:
            raise InvalidRequest("documents must not be empty", param="documents")
        if len(texts) > MAX_DOCUMENTS:
            raise InvalidRequest(f"documents may hold at most {MAX_DOCUMENTS} items, not {len(texts)}",
                                 param="documents")
        check_texts([body.query], "query", single=True)
        check_texts(texts, "documents", single=False)
        scored = await self.score([(body.query, text) for text in texts], lambda index: f"documents[{index}]")
        order = sorted(range(len(texts)), key=lambda index: scored.scores[index], reverse=True)
        if body.top_n:
            order = order[:body.top_n]
        results: list[dict[str, object]] = []
        for index in order:
            result: dict[str, object] = {"index": index, "relevance_score": scored.scores[index]}
            if body.return_documents:
                result["document"] = {"text": texts[index]}
            results.append(result)
        return {"id": f"rerank-{secrets.token_hex(12)}", "model": model, "results": results,
                "usage": {"prompt_tokens": scored.prompt_tokens, "total_tokens": scored.prompt_tokens}}

    async def score_texts(self, body: ScoreRequest) -> dict[str, object]:
        model = self.model_name(body.model)
        if self.engine.relays_scoring:
            return await self.engine.relay_scoring(model, "score", {**body.model_dump(exclude_unset=True),
                                                                    "model": model})
        self.check_reranker(model)
        pairs = score_pairs(body.text_1, body.text_2)
        scored = await self.score(pairs, lambda index: f"text_2[{index}]" if isinstance(body.text_2, list)
                                  else "text_2")
        return {"id": f"score-{secrets.token_hex(12)}", "object": "list", "created": int(time.time()),
                "model": model,
                "data": [{"index": index, "object": "score", "score": score}
                         for index, score in enumerate(scored.scores)],
                "usage": {"prompt_tokens": scored.prompt_tokens, "total_tokens": scored.prompt_tokens,
                          "completion_tokens": 0}}

    def model_name(self, model: str | None) -> str:
        """The model the request names; none named: the served model (as vLLM's and llama.cpp's servers read it)."""
        return model if model is not None else self.served_names()[0]

    def check_reranker(self, model: str) -> None:
        check_model(model, self.served_names())
        check_rerank(self.engine.capabilities(), model)

    async def score(self, pairs: list[tuple[str, str]], part: Callable[[int], str]) -> PairScores:
        try:
            return await self.engine.score_pairs(pairs)
        except PairTooLong as exc:
            where = part(exc.index)
            raise InvalidRequest(f"{where} with the query is {exc.tokens} tokens long, more than the model's context "
                                 f"length ({exc.limit}); shorten it", param=where,
                                 code="context_length_exceeded") from None


def score_pairs(text_1: str | list[str], text_2: str | list[str]) -> list[tuple[str, str]]:
    """vLLM's pairing: one to one, one to many (text_1 a string, or a list of one), or pairwise (equal lists)."""
    firsts = [text_1] if isinstance(text_1, str) else text_1
    seconds = [text_2] if isinstance(text_2, str) else text_2
    for name, texts in (("text_1", firsts), ("text_2", seconds)):
        if not texts:
            raise InvalidRequest(f"{name} must not be empty", param=name)
        check_texts(texts, name, single=isinstance(text_1 if name == "text_1" else text_2, str))
    if len(seconds) > MAX_DOCUMENTS:
        raise InvalidRequest(f"text_2 may hold at most {MAX_DOCUMENTS} items, not {len(seconds)}", param="text_2")
    if len(firsts) == 1:
        return [(firsts[0], second) for second in seconds]
    if len(firsts) != len(seconds):
        raise InvalidRequest(f"text_1 and text_2 must be lists of the same length to be scored pairwise (or text_1 "
                             f"one text), not {len(firsts)} and {len(seconds)}", param="text_2")
    return list(zip(firsts, seconds))


def check_texts(texts: list[str], name: str, single: bool) -> None:
    for index, text in enumerate(texts):
        if not text.strip():
            where = name if single else f"{name}[{index}]"
            raise InvalidRequest(f"{where} is empty: give text to score", param=where)
