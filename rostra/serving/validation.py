"""Checks shared by the APIs that need the engine's facts (served names, vocabulary size)."""

from __future__ import annotations

from typing import Mapping, Sequence

from rostra.engines.base import Capabilities
from rostra.errors import InvalidRequest, NotFound


def check_model(model: str, served_names: list[str]) -> None:
    if model not in served_names:
        raise NotFound(f"The model '{model}' does not exist. Served: {', '.join(served_names)}.",
                       param="model", code="model_not_found")


def check_generative(capabilities: Capabilities, model: str | None) -> None:
    """A model served for another task (--task embed, --task rerank) has no chat template nor generation: every
    route but its own, counting routes included, is a 400 naming the model."""
    if capabilities.text:
        return
    if capabilities.rerank:
        raise InvalidRequest(f"the model '{model}' is a reranker (served with --task rerank): it answers POST "
                             "/v1/rerank, /v2/rerank and /v1/score only", param="model", code="model_not_generative")
    raise InvalidRequest(f"the model '{model}' is an embedding model (served with --task embed): it "
                         "answers POST /v1/embeddings only", param="model", code="model_not_generative")


def check_embedding(capabilities: Capabilities, model: str) -> None:
    """/v1/embeddings on a model that has no embedding capability: a 400 naming the flag that gives it one."""
    if not capabilities.embedding:
        raise InvalidRequest(f"the model '{model}' is served for generation, not embeddings: start "
                             "rostra with `--task embed` to serve it for /v1/embeddings", param="model",
                             code="model_not_embedding")


def check_rerank(capabilities: Capabilities, model: str) -> None:
    """The rerank and score routes on a model that has no rerank capability: a 400 saying what it is."""
    if not capabilities.rerank:
        what = "an embedding model" if capabilities.embedding else "served for generation"
        raise InvalidRequest(f"the model '{model}' is {what}, not a reranker: it cannot rerank or score. Serve a "
                             "reranker (a cross-encoder, or a decoder reranker with `--task rerank`)",
                             param="model", code="model_not_reranker")


def check_logit_bias(logit_bias: Mapping[int, float], vocab_size: int) -> None:
    for key in logit_bias:
        if not 0 <= key < vocab_size:
            raise InvalidRequest(f"logit_bias token id {key} is outside the vocabulary (0..{vocab_size - 1})",
                                 param="logit_bias")


def check_stop_token_ids(stop_token_ids: Sequence[int], vocab_size: int) -> None:
    for token_id in stop_token_ids:
        if not 0 <= token_id < vocab_size:
            raise InvalidRequest(f"stop_token_ids: {token_id} is outside the vocabulary", param="stop_token_ids")
