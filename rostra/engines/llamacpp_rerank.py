"""Reranking on llama.cpp: a GGUF with rank pooling (`{arch}.pooling_type` 4: a cross-encoder's classifier head,
or a decoder reranker converted with its yes/no head, as ggml-org's Qwen3-Reranker GGUFs are) served as
llama.cpp's own server serves it with `--reranking` (embedding on, rank pooling), and scored by that server's
/rerank: each pair read as the GGUF's rerank prompt (its `tokenizer.chat_template.rerank`, else
[BOS] query [EOS] [SEP] document [EOS], llama.cpp's format_prompt_rerank), the score the head's raw output, as
llama.cpp returns it. Pairs are grouped by query, one /rerank request per query, in order."""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from rostra.engines.base import EngineError, PairScores, PairTooLong

RANK_POOLING = 4  # llama.cpp's LLAMA_POOLING_TYPE_RANK, as GGUF metadata stores it


def declares_rank_pooling(metadata: dict) -> bool:
    return metadata.get(f"{metadata.get('general.architecture', '')}.pooling_type") == RANK_POOLING


def pair_overhead(metadata: dict) -> int:
    """The tokens llama.cpp's rerank prompt adds around a query and a document without a rerank template."""
    adds_bos = metadata.get("tokenizer.ggml.add_bos_token", True)
    adds_eos = metadata.get("tokenizer.ggml.add_eos_token", False)
    adds_sep = metadata.get("tokenizer.ggml.add_sep_token", False)
    return int(bool(adds_bos)) + 2 * int(bool(adds_eos)) + int(bool(adds_sep))


async def rerank_pairs(post: Callable[[str, dict], Awaitable[Any]],
                       tokenize: Callable[[list[str]], Awaitable[list[list[int]]]],
                       pairs: list[tuple[str, str]], overhead: int, limit: int) -> PairScores:
    """Each pair's score by llama.cpp's /rerank; a pair longer than `limit` is refused first (PairTooLong), as
    llama.cpp's server would refuse it without saying which."""
    lengths = [len(ids) for ids in await tokenize([text for pair in pairs for text in pair])]
    for index in range(len(pairs)):
        tokens = lengths[2 * index] + lengths[2 * index + 1] + overhead
        if tokens > limit:
            raise PairTooLong(index, tokens, limit)
    by_query: dict[str, list[int]] = {}
    for index, (query, _) in enumerate(pairs):
        by_query.setdefault(query, []).append(index)
    scores = [0.0] * len(pairs)
    used = 0
    for query, indices in by_query.items():
        reply = await post("/rerank", {"query": query, "documents": [pairs[i][1] for i in indices],
                                       "top_n": len(indices)})
        if not isinstance(reply, dict) or "results" not in reply:
            raise EngineError(f"llama.cpp could not rerank: {reply}")
        for result in reply["results"]:
            scores[indices[result["index"]]] = float(result["relevance_score"])
        used += int(reply.get("usage", {}).get("prompt_tokens", 0))
    return PairScores(scores, used)
