"""Checks shared by the APIs that need the engine's facts (served names, vocabulary size)."""

from __future__ import annotations

from typing import Mapping, Sequence

from rostra.errors import InvalidRequest, NotFound


def check_model(model: str, served_names: list[str]) -> None:
    if model not in served_names:
        raise NotFound(f"The model '{model}' does not exist. Served: {', '.join(served_names)}.",
                       param="model", code="model_not_found")


def check_generative(task: str, model: str | None) -> None:
    """A model served for another task (--task embed, --task rerank) has no chat template nor generation: every
    route but its own, counting routes included, is a 400 naming the model."""
    if task == "rerank":
        raise InvalidRequest(f"the model '{model}' is a reranker (served with --task rerank): it answers POST "
                             "/v1/rerank, /v2/rerank and /v1/score only", param="model", code="model_not_generative")
    if task != "generate":
        raise InvalidRequest(f"the model '{model}' is an embedding model (served with --task embed): it "
                             "answers POST /v1/embeddings only", param="model", code="model_not_generative")


def check_logit_bias(logit_bias: Mapping[int, float], vocab_size: int) -> None:
    for key in logit_bias:
        if not 0 <= key < vocab_size:
            raise InvalidRequest(f"logit_bias token id {key} is outside the vocabulary (0..{vocab_size - 1})",
                                 param="logit_bias")


def check_stop_token_ids(stop_token_ids: Sequence[int], vocab_size: int) -> None:
    for token_id in stop_token_ids:
        if not 0 <= token_id < vocab_size:
            raise InvalidRequest(f"stop_token_ids: {token_id} is outside the vocabulary", param="stop_token_ids")
