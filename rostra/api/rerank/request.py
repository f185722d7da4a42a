"""The rerank and score request bodies.

Rerank, as Cohere's v1/v2 and Jina's APIs define it and vLLM's and llama.cpp's servers take it: `query`,
`documents` as strings or as objects with a `text` (Jina's and Cohere v1's; other keys of such an object are
refused), `top_n` (0 or absent: every document, as vLLM reads 0), `return_documents` (default true, as Jina's and
vLLM's responses carry each document). Score, as vLLM's `/v1/score`: `text_1` and `text_2`, each a string or a
list: one to one, one to many (a string and a list), or pairwise (two lists of the same length).
"""

from __future__ import annotations

from typing import Union

from pydantic import Field

from rostra.protocol.strict import RequestModel, StrictModel

MAX_DOCUMENTS = 1000  # Cohere's limit on documents per request


class RerankDocument(StrictModel):
    text: str


RerankItem = Union[str, RerankDocument]


class RerankRequest(RequestModel):
    model: str | None = None  # vLLM's and llama.cpp's servers take it as optional: the served model
    query: str
    documents: list[RerankItem]
    top_n: int | None = Field(default=None, ge=0)
    return_documents: bool = True

    def texts(self) -> list[str]:
        return [item if isinstance(item, str) else item.text for item in self.documents]


class ScoreRequest(RequestModel):
    model: str | None = None
    text_1: Union[str, list[str]]
    text_2: Union[str, list[str]]
