"""/v1/embeddings: a validated request -> token ids -> the engine's vectors -> OpenAI's list of embeddings.

Everything that is the same for every engine happens here, once: the inputs' shapes and limits (an input longer
than the model's context is refused naming its index, unless truncate_prompt_tokens cuts it), token-id checks,
`dimensions` (a Matryoshka vector cut, then normalized again), usage, and the float / base64 encodings. Engines
only turn token ids into full vectors (Engine.embed); a gateway relays the request whole.

Token ids given as input are the served model's own (as OpenAI's and vLLM's are): ids from another tokenizer
(LangChain's OpenAIEmbeddings sends tiktoken's unless check_embedding_ctx_length=False) cannot be told apart
when they fall inside the vocabulary, so only those outside it are refused.
"""

from __future__ import annotations

import base64
import math
import sys
from array import array
from typing import Callable, Sequence

from rostra.api.embeddings.request import MAX_INPUTS, EmbeddingRequest
from rostra.engines.base import Engine
from rostra.errors import InvalidRequest
from rostra.serving.validation import check_embedding, check_model


class EmbeddingsService:
    def __init__(self, engine: Engine, served_names: Callable[[], list[str]]):
        self.engine = engine
        self.served_names = served_names

    async def create(self, body: EmbeddingRequest) -> dict[str, object]:
        engine = self.engine
        if engine.relays_embeddings:  # a gateway: the upstream that serves the model answers
            return await engine.relay_embeddings(body.model, body.model_dump(exclude_unset=True))
        check_model(body.model, self.served_names())
        check_embedding(engine.capabilities(), body.model)
        self.check_dimensions(body.dimensions)
        texts, token_ids = split_input(body.input)
        limit = engine.model.context_length
        truncate_to = self.truncation(body.truncate_prompt_tokens, limit)
        if texts is not None:
            token_ids = await engine.tokenize_texts(texts, body.add_special_tokens, truncate_to)
        else:
            check_vocabulary(token_ids, engine.vocab_size, single=isinstance(body.input[0], int))
            if truncate_to:
                token_ids = [ids[:truncate_to] for ids in token_ids]
        check_lengths(token_ids, limit, single=not isinstance(body.input, list) or isinstance(body.input[0], int))
        vectors = await engine.embed(token_ids)
        if body.dimensions is not None:
            vectors = [shortened(vector, body.dimensions, engine.normalizes_embeddings) for vector in vectors]
        encode = base64_floats if body.encoding_format == "base64" else list
        tokens = sum(len(ids) for ids in token_ids)
        return {"object": "list", "model": body.model,
                "data": [{"object": "embedding", "index": index, "embedding": encode(vector)}
                         for index, vector in enumerate(vectors)],
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}

    def check_dimensions(self, dimensions: int | None) -> None:
        if dimensions is None:
            return
        full, allowed = self.engine.embedding_dimensions, self.engine.matryoshka_dimensions
        if allowed is None:
            raise InvalidRequest(f"dimensions is not supported by this model: its {full}-dimensional embeddings "
                                 "cannot be shortened (start rostra with --matryoshka if the model was trained "
                                 "for it)", param="dimensions")
        if not 1 <= dimensions <= full or (allowed and dimensions not in allowed):
            widths = ", ".join(map(str, allowed)) if allowed else f"1 to {full}"
            raise InvalidRequest(f"dimensions must be one of this model's embedding widths ({widths}), "
                                 f"not {dimensions}", param="dimensions")

    @staticmethod
    def truncation(truncate_prompt_tokens: int | None, limit: int) -> int | None:
        if truncate_prompt_tokens is None:
            return None
        if truncate_prompt_tokens == 0:
            raise InvalidRequest("truncate_prompt_tokens must be -1 (the model's length) or at least 1",
                                 param="truncate_prompt_tokens")
        if truncate_prompt_tokens > limit:
            raise InvalidRequest(f"truncate_prompt_tokens ({truncate_prompt_tokens}) is more than the model's "
                                 f"context length ({limit})", param="truncate_prompt_tokens")
        return limit if truncate_prompt_tokens == -1 else truncate_prompt_tokens


def split_input(value: str | list[str] | list[int] | list[list[int]]) -> tuple[list[str] | None, list[list[int]]]:
    """The input as texts, or as token-id sequences; empty ones refused (as OpenAI refuses them)."""
    if value == "":
        raise InvalidRequest("input is empty: give text or token ids to embed", param="input")
    if isinstance(value, str):
        value = [value]
    if not value:
        raise InvalidRequest("input must not be empty", param="input")
    if len(value) > MAX_INPUTS:
        raise InvalidRequest(f"input may hold at most {MAX_INPUTS} items, not {len(value)}", param="input")
    if isinstance(value[0], int):  # one token-id sequence
        return None, [list(value)]  # type: ignore[arg-type]
    items: list[str] | list[list[int]] = value  # type: ignore[assignment]  # (not token ids: checked above)
    for index, item in enumerate(items):
        if len(item) == 0:
            raise InvalidRequest(f"input[{index}] is empty: give text or token ids to embed", param=f"input[{index}]")
    if isinstance(value[0], str):
        return list(value), []  # type: ignore[arg-type]
    return None, [list(item) for item in value]  # type: ignore[arg-type]


def check_vocabulary(token_ids: list[list[int]], vocab_size: int, single: bool) -> None:
    for index, ids in enumerate(token_ids):
        for token_id in ids:
            if not 0 <= token_id < vocab_size:
                where = "input" if single else f"input[{index}]"
                raise InvalidRequest(f"{where}: token id {token_id} is outside the model's vocabulary "
                                     f"(0..{vocab_size - 1}); token ids must be the served model's own",
                                     param=where)


def check_lengths(token_ids: list[list[int]], limit: int, single: bool) -> None:
    for index, ids in enumerate(token_ids):
        if len(ids) > limit:
            where = "input" if single else f"input[{index}]"
            raise InvalidRequest(f"{where} is {len(ids)} tokens long, more than the model's context length "
                                 f"({limit}); shorten it, or set truncate_prompt_tokens to cut it", param=where,
                                 code="context_length_exceeded")
        if not ids:  # a text whose tokenization is empty (no special tokens added)
            where = "input" if single else f"input[{index}]"
            raise InvalidRequest(f"{where} has no tokens to embed", param=where)


def shortened(vector: Sequence[float], dimensions: int, normalized: bool) -> list[float]:
    """A Matryoshka vector's first `dimensions` values, normalized again if the full one was."""
    head = list(vector[:dimensions])
    if not normalized:
        return head
    norm = math.sqrt(math.fsum(value * value for value in head))
    return [value / norm for value in head] if norm > 0 else head


def base64_floats(vector: Sequence[float]) -> str:
    """OpenAI's base64 encoding: the little-endian float32 values."""
    values = array("f", vector)
    if sys.byteorder != "little":
        values.byteswap()
    return base64.b64encode(values.tobytes()).decode("ascii")
