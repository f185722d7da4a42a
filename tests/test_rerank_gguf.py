"""/v1/rerank, /v2/rerank and /v1/score on the llama.cpp engine with a reranking GGUF (tests/reranker_models.py: a
tiny BERT cross-encoder in llama.cpp's layout, rank pooling), served with no flag but the file: every score equal
to llama.cpp's own server started as `--reranking` starts it (xllamacpp's server in this process, embedding on,
rank pooling), and, on the same weights, to transformers' forward pass (the classifier's raw logit, which is what
llama.cpp's rank pooling returns)."""

from __future__ import annotations

import json
import urllib.request

import pytest

from reranker_models import cross_encoder_checkpoint, cross_encoder_gguf
from servers import RunningServer
from wire import check_error, post

MODEL = "tiny-reranker"
QUERY = "what is a panda?"
DOCUMENTS = ["hi", "The giant panda is a bear species endemic to China.", "pandas is a python library",
             "a bear", "Pandas eat bamboo for most of the day, up to fourteen hours."]


@pytest.fixture(scope="module")
def gguf_reranker():
    server = RunningServer([str(cross_encoder_gguf()), "--served-model-name", MODEL, "--parallel", "2",
                            "--threads", "1"])
    yield server
    server.stop()


@pytest.fixture(scope="module")
def llamacpp_reference():
    """llama.cpp's own server on the GGUF, as `llama-server -m FILE --reranking` starts it: the scores of its
    /v1/rerank by document index, and its usage."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(cross_encoder_gguf())
    params.embedding = True  # what --reranking sets: embeddings on, rank pooling
    params.pooling_type = xllamacpp.llama_pooling_type.LLAMA_POOLING_TYPE_RANK
    params.n_ctx = params.n_batch = params.n_ubatch = 512
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = 1
    server = xllamacpp.Server(params)
    try:
        request = urllib.request.Request(f"{server.listening_address}/v1/rerank",
                                         data=json.dumps({"query": QUERY, "documents": DOCUMENTS}).encode(),
                                         headers={"Content-Type": "application/json"})
        reply = json.loads(urllib.request.urlopen(request, timeout=60).read())
    finally:
        del server
    return {item["index"]: item["relevance_score"] for item in reply["results"]}, reply["usage"]


def transformers_logits(query: str, documents: list[str]) -> list[float]:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    checkpoint = cross_encoder_checkpoint()
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    model = AutoModelForSequenceClassification.from_pretrained(checkpoint).eval()
    with torch.no_grad():
        inputs = tokenizer([query] * len(documents), documents, return_tensors="pt", padding=True)
        return model(**inputs).logits[:, 0].tolist()


def test_gguf_rerank_is_llamacpp_servers_own(gguf_reranker, llamacpp_reference):
    scores, usage = llamacpp_reference
    answer = post(gguf_reranker.base_url, "/v1/rerank", {"model": MODEL, "query": QUERY, "documents": DOCUMENTS})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert [item["index"] for item in body["results"]] == sorted(scores, key=scores.get, reverse=True)
    for item in body["results"]:
        assert item["relevance_score"] == pytest.approx(scores[item["index"]], abs=1e-5)
        assert item["document"] == {"text": DOCUMENTS[item["index"]]}
    assert body["usage"] == {"prompt_tokens": usage["prompt_tokens"], "total_tokens": usage["prompt_tokens"]}
    assert body["model"] == MODEL


def test_gguf_scores_are_transformers_logits_on_the_same_weights(gguf_reranker):
    # Measured: within 3e-4 of transformers in F32 (llama.cpp's own kernels, the same weights).
    reference = transformers_logits(QUERY, DOCUMENTS)
    body = post(gguf_reranker.base_url, "/v1/score", {"model": MODEL, "text_1": QUERY, "text_2": DOCUMENTS}).json()
    assert [item["index"] for item in body["data"]] == list(range(len(DOCUMENTS)))
    assert [item["score"] for item in body["data"]] == pytest.approx(reference, abs=2e-3)
    assert body["object"] == "list" and body["data"][0]["object"] == "score"
    # pairwise: each text_1 with its own text_2 (two queries: two llama.cpp requests, answered in order)
    pairwise = post(gguf_reranker.base_url, "/v1/score",
                    {"model": MODEL, "text_1": [QUERY, "bamboo"], "text_2": DOCUMENTS[1:3]}).json()
    expected = [transformers_logits(QUERY, DOCUMENTS[1:2])[0], transformers_logits("bamboo", DOCUMENTS[2:3])[0]]
    assert [item["score"] for item in pairwise["data"]] == pytest.approx(expected, abs=2e-3)


def test_gguf_v2_rerank_top_n_and_no_documents(gguf_reranker, llamacpp_reference):
    scores, _ = llamacpp_reference
    body = post(gguf_reranker.base_url, "/v2/rerank",
                {"model": MODEL, "query": QUERY, "documents": [{"text": text} for text in DOCUMENTS], "top_n": 2,
                 "return_documents": False}).json()
    assert [item["index"] for item in body["results"]] == sorted(scores, key=scores.get, reverse=True)[:2]
    assert all(set(item) == {"index", "relevance_score"} for item in body["results"])


def test_gguf_reranker_refuses_generation_and_long_pairs(gguf_reranker):
    error = check_error(post(gguf_reranker.base_url, "/v1/chat/completions",
                             {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}), 400, "model")
    assert "reranker" in error["message"] and "/v1/rerank" in error["message"]
    error = check_error(post(gguf_reranker.base_url, "/v1/rerank",
                             {"model": MODEL, "query": QUERY, "documents": ["short", "panda " * 600]}),
                        400, "documents[1]")
    assert "context length" in error["message"]


def test_gateway_relays_rerank_and_score_to_the_upstream(gguf_reranker):
    """`--engine remote` in front of the reranker: each request sent whole to the upstream's /v1/rerank or
    /v1/score (a /v2/rerank one to /v1/rerank), its answer and its errors relayed."""
    gateway = RunningServer(["--engine", "remote", "--upstream", gguf_reranker.v1])
    try:
        for path in ("/v1/rerank", "/v2/rerank"):
            body = {"model": MODEL, "query": QUERY, "documents": DOCUMENTS, "top_n": 3}
            relayed, direct = post(gateway.base_url, path, body).json(), post(gguf_reranker.base_url, path, body).json()
            assert relayed["results"] == direct["results"] and relayed["usage"] == direct["usage"]
        body = {"model": MODEL, "text_1": QUERY, "text_2": DOCUMENTS[:2]}
        assert (post(gateway.base_url, "/v1/score", body).json()["data"]
                == post(gguf_reranker.base_url, "/v1/score", body).json()["data"])
        check_error(post(gateway.base_url, "/v1/rerank", {"model": MODEL, "query": QUERY,
                                                          "documents": ["a", "panda " * 600]}), 400, "documents[1]")
    finally:
        gateway.stop()
