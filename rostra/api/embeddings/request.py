"""The /v1/embeddings request body, as OpenAI's spec (CreateEmbeddingRequest) and SDK define it, plus two of
vLLM's extensions: `truncate_prompt_tokens` and `add_special_tokens`."""

from __future__ import annotations

from typing import Literal, Union

from pydantic import Field

from rostra.protocol.strict import RequestModel

# One text, texts, one token-id sequence, or token-id sequences (the spec's oneOf, in its order).
EmbeddingInput = Union[str, list[str], list[int], list[list[int]]]
MAX_INPUTS = 2048  # the spec's maxItems


class EmbeddingRequest(RequestModel):
    model: str
    input: EmbeddingInput
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = None
    user: str | None = None
    # vLLM's: cut each input to its first N tokens instead of refusing it (-1: to the model's length).
    truncate_prompt_tokens: int | None = Field(default=None, ge=-1)
    # vLLM's: the tokenizer's special tokens around each text (BOS, [CLS] ... [SEP]); token-id inputs are taken
    # as they are.
    add_special_tokens: bool = True
