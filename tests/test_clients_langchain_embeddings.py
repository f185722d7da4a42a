"""LangChain's OpenAIEmbeddings against `rostra serve` (all-MiniLM-L6-v2 on transformers), through
langchain-tests' standard embeddings suite, unmodified, plus a check of the vectors themselves.

OpenAIEmbeddings by default (check_embedding_ctx_length=True) tokenizes with tiktoken and sends OpenAI's token
ids; tiktoken downloads its encoding from the network, and the ids are not the served model's, so a local model
is used with check_embedding_ctx_length=False: LangChain then sends the texts, as here (README: Serving an
embedding model)."""

import numpy as np
import pytest
from langchain_openai import OpenAIEmbeddings
from langchain_tests.integration_tests import EmbeddingsIntegrationTests

MODEL = "minilm"
_server: dict[str, str] = {}


@pytest.fixture(scope="module", autouse=True)
def langchain_server(minilm_server):
    _server["v1"] = minilm_server.v1
    yield minilm_server


def embeddings_model() -> OpenAIEmbeddings:
    return OpenAIEmbeddings(model=MODEL, base_url=_server["v1"], api_key="unused", check_embedding_ctx_length=False,
                            max_retries=0)


class TestOpenAIEmbeddings(EmbeddingsIntegrationTests):
    @property
    def embeddings_class(self) -> type[OpenAIEmbeddings]:
        return OpenAIEmbeddings

    @property
    def embedding_model_params(self) -> dict:
        return {"model": MODEL, "base_url": _server["v1"], "api_key": "unused", "check_embedding_ctx_length": False,
                "max_retries": 0}


def test_langchain_vectors_are_sentence_transformers_own(minilm_checkpoint):
    from sentence_transformers import SentenceTransformer

    texts = ["LangChain sends these texts in one request.", "Each comes back in order."] * 3
    got = np.asarray(embeddings_model().embed_documents(texts))
    expected = SentenceTransformer(str(minilm_checkpoint), device="cpu").encode(texts)
    assert (got * expected).sum(1).min() >= 0.9999  # both unit length: the cosine
    query = np.asarray(embeddings_model().embed_query(texts[0]))
    assert float(query @ expected[0]) >= 0.9999
