"""/v1/embeddings on the other engines: llama.cpp (a generative GGUF with --pooling, checked against transformers
on the same weights), transformers on a decoder checkpoint (last-token pooling), and the remote gateway
(passthrough to upstreams, with retries past a dead one)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import torch
from openai import OpenAI

from servers import RunningServer, free_port
from test_api_embeddings import TEXTS, assert_close, embeddings, vectors_of
from wire import check_error, post

SMOLLM = "smollm2-embed"


def cosines(a, b) -> np.ndarray:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.fixture(scope="module")
def llamacpp_embed_server():
    """The embedded SmolLM2 GGUF on llama.cpp, embedding with mean pooling (`--pooling` implies --task embed)."""
    server = RunningServer(["--pooling", "mean", "--served-model-name", SMOLLM, "--max-model-len", "256",
                            "--parallel", "2"])
    yield server
    server.stop()


@pytest.fixture(scope="module")
def hidden_states(transformers_checkpoint):
    """The embedded model's last hidden states per text, by transformers (the GGUF's weights, dequantized)."""
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(transformers_checkpoint, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(transformers_checkpoint)

    def states(text: str) -> torch.Tensor:
        ids = tokenizer(text, return_tensors="pt")["input_ids"]
        with torch.inference_mode():
            return model(input_ids=ids).last_hidden_state[0]

    return states


def test_llamacpp_pools_a_generative_gguf_as_transformers_does(llamacpp_embed_server, hidden_states):
    sdk = OpenAI(base_url=llamacpp_embed_server.v1, api_key="unused", max_retries=0)
    texts = [text.strip() for text in TEXTS]
    answer = sdk.embeddings.create(model=SMOLLM, input=texts, encoding_format="float")
    vectors = [item.embedding for item in answer.data]
    expected = [torch.nn.functional.normalize(hidden_states(text).mean(0), dim=0).tolist() for text in texts]
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)  # llama.cpp normalizes
    # The GGUF's weights are 4-bit (Q4_1) and llama.cpp multiplies them with 8-bit activations; transformers runs
    # the dequantized weights in float32. Measured: cosine 0.99+ per text.
    assert cosines(vectors, expected).min() >= 0.98, cosines(vectors, expected)
    assert answer.usage.prompt_tokens > len(TEXTS)
    # Alone, an input gets the vector it got among others (inputs share llama.cpp's batches and slots).
    for index in (0, 3):
        alone = embeddings(llamacpp_embed_server, {"model": SMOLLM, "input": texts[index],
                                                   "encoding_format": "base64"})
        assert cosines(vectors_of(alone), [vectors[index]]).min() >= 0.9999


def test_llamacpp_embedding_errors(llamacpp_embed_server):
    base = llamacpp_embed_server.base_url
    error = check_error(post(base, "/v1/embeddings", {"model": SMOLLM, "input": "x", "dimensions": 64}), 400,
                        "dimensions")
    assert "--matryoshka" in error["message"]
    check_error(post(base, "/v1/embeddings", {"model": SMOLLM, "input": ["ok", "word " * 300]}), 400, "input[1]")
    cut = post(base, "/v1/embeddings", {"model": SMOLLM, "input": "word " * 300, "truncate_prompt_tokens": 8})
    assert cut.status_code == 200 and cut.json()["usage"]["prompt_tokens"] == 8
    check_error(post(base, "/v1/chat/completions", {"model": SMOLLM, "messages": [{"role": "user", "content": "x"}]}),
                400, "model")


def test_transformers_decoder_checkpoint_pools_its_last_token(transformers_checkpoint, hidden_states):
    from rostra.engines.transformers_embed import TransformersEmbeddingEngine

    engine = TransformersEmbeddingEngine(str(transformers_checkpoint), model_name="smollm2", device="cpu")
    assert engine.recipe.pooling == ("lasttoken",) and engine.embedding_dimensions == 576

    async def run():
        await engine.start()
        try:
            ids = await engine.tokenize_texts(TEXTS, add_special=True, truncate_to=None)
            return await engine.embed(ids)
        finally:
            await engine.close()

    vectors = asyncio.run(run())
    expected = [torch.nn.functional.normalize(hidden_states(text)[-1], dim=0).tolist() for text in TEXTS]
    assert cosines(vectors, expected).min() >= 0.9999


def test_gateway_passes_embeddings_through_and_retries_past_a_dead_upstream(minilm_server, reference):
    dead = f"http://127.0.0.1:{free_port()}/v1,model=minilm"  # nothing listens there
    server = RunningServer(["--engine", "remote", "--health-check-interval", "0.5", "--upstream", dead,
                            "--upstream", minilm_server.v1])
    try:
        for encoding_format in ("float", "base64", "float"):
            answer = embeddings(server, {"input": TEXTS, "encoding_format": encoding_format})
            assert_close(vectors_of(answer), reference.encode(TEXTS))
        shortened = embeddings(server, {"input": TEXTS[0], "dimensions": 32})
        assert len(vectors_of(shortened)[0]) == 32
        # The upstream's own 4xx is relayed as it is.
        check_error(post(server.base_url, "/v1/embeddings", {"model": "minilm", "input": ""}), 400, "input")
    finally:
        server.stop()


@pytest.fixture(scope="module")
def reference(minilm_checkpoint):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(minilm_checkpoint), device="cpu")
