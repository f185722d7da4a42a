"""Reranking on vLLM's pooling runner, as vLLM's own /score and /rerank run a cross-encoder: each pair through the
checkpoint's tokenizer as a text pair (its token types too, where the tokenizer gives them: vLLM passes them to
BERT-like models), then `.encode(prompt, PoolingParams(task="classify"), request_id)` (vLLM 0.32 removed the
`score` task: "use `classify` instead"); the final PoolingRequestOutput's one value is the score, vLLM's pooler having
applied the model's activation (a sigmoid for a one-label classifier). A decoder reranker is served as vLLM serves one: converted to a classifier
by its hf_overrides (`--vllm-arg hf_overrides=...`, as the Qwen3-Reranker card's vLLM recipe gives them).
Tested on a stand-in (tests/test_engine_vllm.py) and against vLLM's own /score and /rerank on the real engine
(tests/test_vllm_rerank.py, a cross-encoder of head_dim 64: vLLM's CPU attention takes no 16)."""

from __future__ import annotations

from typing import Any

from rostra.engines.base import PairTooLong


def pair_rows(tokenizer: Any, pairs: list[tuple[str, str]], limit: int) -> list[dict[str, list[int]]]:
    """Each pair's prompt_token_ids (and token_type_ids where the tokenizer makes them); PairTooLong past `limit`."""
    encoded = tokenizer([query for query, _ in pairs], [document for _, document in pairs])
    rows = []
    for index in range(len(pairs)):
        row = {"prompt_token_ids": list(encoded["input_ids"][index])}
        if "token_type_ids" in encoded:
            row["token_type_ids"] = list(encoded["token_type_ids"][index])
        if len(row["prompt_token_ids"]) > limit:
            raise PairTooLong(index, len(row["prompt_token_ids"]), limit)
        rows.append(row)
    return rows


def score_of(data: Any) -> float:
    """A score PoolingOutput's `data` (a one-element tensor on vLLM, or a list) as a float."""
    values = data.float().reshape(-1).cpu().tolist() if hasattr(data, "reshape") else list(data)
    return float(values[0])
