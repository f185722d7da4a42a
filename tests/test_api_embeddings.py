"""/v1/embeddings end to end: the transformers engine on all-MiniLM-L6-v2 (`--engine transformers
--matryoshka`), the app in-process (tests/harness.py), every body validated against the spec
(CreateEmbeddingResponse) and the SDK's type, every vector checked against sentence-transformers' own encode() on
the same files (cosine >= 0.9999, float and base64). One smoke goes through a real `rostra serve` over loopback."""

from __future__ import annotations

import base64
import struct
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest
from openai import BadRequestError, OpenAI
from openai.types import CreateEmbeddingResponse

from harness import BASE_URL, served
from spec import validate
from servers import RunningServer
from wire import check_error
from wire import post as post_over_http

MODEL = "minilm"
TEXTS = ["The quick brown fox jumps over the lazy dog.", "  Embeddings map text to vectors.  ",
         "Ünïcödé and emoji 🦊 work too", "short", "A much longer sentence that goes on for a while, so that "
         "padding in a batch of different lengths matters: " + "more words " * 20]
COSINE = 0.9999


@pytest.fixture(scope="module")
def reference(minilm_checkpoint):
    """sentence-transformers on the same checkpoint files, on the CPU in float32."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(minilm_checkpoint), device="cpu")


@pytest.fixture(scope="module")
def server(minilm_checkpoint, tmp_path_factory):
    with served(tmp_path_factory.mktemp("embeddings"), [], engine="transformers", model=str(minilm_checkpoint),
                served_model_name=[MODEL], matryoshka=True) as http:
        yield http


@pytest.fixture(scope="module")
def client(server) -> OpenAI:
    return OpenAI(base_url=f"{BASE_URL}/v1", api_key="unused", max_retries=0, http_client=server)


def post(server: httpx.Client | RunningServer, path: str, body: dict) -> httpx.Response:
    """In-process (the harness's client) or to a real server (other files' RunningServer fixtures)."""
    if isinstance(server, RunningServer):
        return post_over_http(server.base_url, path, body)
    return server.post(path, json=body)


def embeddings(server, body: dict) -> dict:
    response = post(server, "/v1/embeddings", {"model": MODEL, **body})
    assert response.status_code == 200, response.text
    answer = response.json()
    if body.get("encoding_format") == "base64":  # the spec and the SDK type the floats; base64 is their bytes
        assert all(isinstance(item["embedding"], str) for item in answer["data"])
        answer = {**answer, "data": [{**item, "embedding": decode_base64(item["embedding"])}
                                     for item in answer["data"]]}
    validate("CreateEmbeddingResponse", answer)
    CreateEmbeddingResponse.model_validate(answer, strict=True)
    assert [item["index"] for item in answer["data"]] == list(range(len(answer["data"])))
    return answer


def decode_base64(text: str) -> list[float]:
    data = base64.b64decode(text)
    return list(struct.unpack(f"<{len(data) // 4}f", data))


def assert_close(vectors, expected) -> None:
    vectors, expected = np.asarray(vectors, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    assert vectors.shape == expected.shape
    cosines = (vectors * expected).sum(1) / (np.linalg.norm(vectors, axis=1) * np.linalg.norm(expected, axis=1))
    assert cosines.min() >= COSINE, cosines


def vectors_of(answer: dict) -> list[list[float]]:
    return [item["embedding"] for item in answer["data"]]


@pytest.mark.parametrize("encoding_format", ["float", "base64"])
def test_vectors_are_sentence_transformers_own(server, reference, encoding_format):
    answer = embeddings(server, {"input": TEXTS, "encoding_format": encoding_format})
    assert_close(vectors_of(answer), reference.encode(TEXTS, batch_size=32))
    assert answer["model"] == MODEL and answer["object"] == "list"
    lengths = reference.tokenize(TEXTS)["attention_mask"].sum(1).tolist()
    assert answer["usage"] == {"prompt_tokens": sum(lengths), "total_tokens": sum(lengths)}


def test_real_process_smoke(minilm_server, reference):
    """`rostra serve --engine transformers` over loopback: the SDK's default (base64) request."""
    answer = OpenAI(base_url=minilm_server.v1, api_key="unused", max_retries=0).embeddings.create(
        model=MODEL, input=TEXTS[0])
    assert_close([answer.data[0].embedding], reference.encode([TEXTS[0]]))


def test_one_string_and_the_sdks_default_base64(client, reference):
    # The SDK asks for base64 when encoding_format is not given, and decodes it to floats itself.
    answer = client.embeddings.create(model=MODEL, input=TEXTS[0])
    assert len(answer.data) == 1 and len(answer.data[0].embedding) == 384
    assert_close([answer.data[0].embedding], reference.encode([TEXTS[0]]))
    floats = client.embeddings.create(model=MODEL, input=[TEXTS[0]], encoding_format="float", user="user-1")
    assert_close([floats.data[0].embedding], [answer.data[0].embedding])
    assert floats.usage.prompt_tokens == floats.usage.total_tokens == answer.usage.prompt_tokens


def test_token_id_inputs_embed_as_their_text(server, reference):
    ids = [list(map(int, row[row > 0])) for row in reference.tokenize(TEXTS[:2])["input_ids"]]
    one = embeddings(server, {"input": ids[0]})
    many = embeddings(server, {"input": ids})
    assert_close(vectors_of(one), reference.encode(TEXTS[:1]))
    assert_close(vectors_of(many), reference.encode(TEXTS[:2]))
    assert many["usage"]["prompt_tokens"] == len(ids[0]) + len(ids[1])


def test_concurrent_requests_are_batched_and_each_gets_its_own(client, reference):
    """Many clients at once (the batcher mixes their inputs and sorts them by length): each answer is its own.
    (Threads: each request runs on the app's event loop as it arrives.)"""
    inputs = [[text] if i % 2 else TEXTS[i % len(TEXTS):] for i, text in enumerate(TEXTS * 6)]
    with ThreadPoolExecutor(len(inputs)) as pool:
        answers = list(pool.map(lambda item: client.embeddings.create(model=MODEL, input=item), inputs))
    for item, answer in zip(inputs, answers):
        assert_close([d.embedding for d in answer.data], reference.encode(item))


def test_too_long_input_is_refused_naming_its_index(server):
    long_text = "word " * 400  # MiniLM's sentence-transformers limit is 256 tokens
    error = check_error(post(server, "/v1/embeddings", {"model": MODEL, "input": ["hi", long_text]}),
                        400, "input[1]")
    assert "256" in error["message"] and "truncate_prompt_tokens" in error["message"]
    check_error(post(server, "/v1/embeddings", {"model": MODEL, "input": long_text}), 400, "input")
    check_error(post(server, "/v1/embeddings", {"model": MODEL, "input": [5] * 300}), 400, "input")


def test_truncate_prompt_tokens_cuts_as_sentence_transformers_does(server, reference):
    long_text = "The tokenizer cuts this text, keeping its separator token at the end. " * 40
    answer = embeddings(server, {"input": [long_text, TEXTS[0]], "truncate_prompt_tokens": 16})
    reference.max_seq_length = 16
    try:
        expected = reference.encode([long_text, TEXTS[0]])
    finally:
        reference.max_seq_length = 256
    assert_close(vectors_of(answer), expected)
    assert answer["usage"]["prompt_tokens"] == 16 + min(16, len(reference.tokenize([TEXTS[0]])["input_ids"][0]))
    whole = embeddings(server, {"input": long_text, "truncate_prompt_tokens": -1})  # the model's 256
    assert whole["usage"]["prompt_tokens"] == 256
    check_error(post(server, "/v1/embeddings",
                     {"model": MODEL, "input": "x", "truncate_prompt_tokens": 1000}), 400, "truncate_prompt_tokens")


def test_dimensions_shorten_and_renormalize(server, reference):
    answer = embeddings(server, {"input": TEXTS[:2], "dimensions": 64})
    full = reference.encode(TEXTS[:2])[:, :64]
    assert_close(vectors_of(answer), full)
    assert np.allclose(np.linalg.norm(vectors_of(answer), axis=1), 1.0, atol=1e-6)
    for bad in (0, 385):
        body = {"model": MODEL, "input": "x", "dimensions": bad}
        check_error(post(server, "/v1/embeddings", body), 400, "dimensions")


@pytest.mark.parametrize("body, param", [
    ({"input": ""}, "input"),
    ({"input": []}, "input"),
    ({"input": ["ok", ""]}, "input[1]"),
    ({"input": [[1, 2], []]}, "input[1]"),
    ({"input": [[101, 999999, 102]]}, "input[0]"),
    ({"input": [101, -1]}, "input"),
    ({"input": ["x"] * 2049}, "input"),
    ({"input": [1.5]}, "input"),
    ({"input": "x", "encoding_format": "int8"}, "encoding_format"),
    ({"input": "x", "novel_field": 1}, "novel_field"),
    ({"input": "x", "truncate_prompt_tokens": 0}, "truncate_prompt_tokens"),
])
def test_bad_requests_are_400s_naming_the_field(server, body, param):
    check_error(post(server, "/v1/embeddings", {"model": MODEL, **body}), 400, param)


def test_unknown_model_is_404_and_the_server_keeps_serving(server, client):
    check_error(post(server, "/v1/embeddings", {"model": "nope", "input": "x"}), 404, "model")
    assert len(client.embeddings.create(model=MODEL, input="still here").data) == 1


def test_generation_endpoints_refuse_an_embedding_model(server, client):
    for path, body in (("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
                       ("/v1/completions", {"prompt": "hi"}), ("/v1/responses", {"input": "hi"})):
        error = check_error(post(server, path, {"model": MODEL, **body}), 400, "model")
        assert "/v1/embeddings" in error["message"]
    with pytest.raises(BadRequestError, match="embedding model"):
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])


def test_counting_routes_refuse_an_embedding_model(server):
    """Issue 42: an embedding model has no chat template to count through; its counting routes are a 400 naming
    the model, not a chat-template count (the Messages route in Anthropic's envelope)."""
    error = check_error(post(server, "/v1/responses/input_tokens", {"model": MODEL, "input": "hi"}), 400, "model")
    assert error["code"] == "model_not_generative" and "/v1/embeddings" in error["message"]
    counted = post(server, "/v1/messages/count_tokens", {"model": MODEL, "messages": [{"role": "user",
                                                                                      "content": "hi"}]})
    assert counted.status_code == 400, counted.text
    assert counted.json()["type"] == "error" and "/v1/embeddings" in counted.json()["error"]["message"]


def test_a_generation_model_refuses_embeddings_naming_the_flag(tmp_path):
    with served(tmp_path, []) as generative:
        error = check_error(post(generative, "/v1/embeddings", {"model": "scripted", "input": "x"}), 400, "model")
    assert "--task embed" in error["message"]
