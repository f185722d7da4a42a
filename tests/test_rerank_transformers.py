"""/v1/rerank, /v2/rerank and /v1/score on the transformers engine, on tiny reranker weights built in the tests
(tests/reranker_models.py), every score checked against transformers' own forward pass on the same checkpoint:
- a cross-encoder (BertForSequenceClassification, detected from its config: no flag): sigmoid of the logit, as
  sentence-transformers' CrossEncoder.predict and vLLM's score API give it;
- a decoder reranker (a Qwen3 causal LM with `--task rerank`): P(yes) from the yes/no logits at the end of the
  Qwen3-Reranker model card's prompt, computed here as the card's compute_logits does.
And the 4xx: a model that cannot rerank, bad shapes, each naming the part at fault."""

from __future__ import annotations

import math

import pytest

from reranker_models import cross_encoder_checkpoint, decoder_reranker_checkpoint
from servers import RunningServer
from wire import check_error, post

QUERY = "what is a panda?"
DOCUMENTS = ["hi", "The giant panda is a bear species endemic to China.", "pandas is a python library",
             "a bear", "Pandas eat bamboo for most of the day, up to fourteen hours."]


@pytest.fixture(scope="module")
def cross_encoder_server():
    server = RunningServer(["--engine", "transformers", str(cross_encoder_checkpoint()), "--served-model-name",
                            "cross", "--threads", "1"])
    yield server
    server.stop()


@pytest.fixture(scope="module")
def decoder_server(transformers_checkpoint):
    server = RunningServer(["--engine", "transformers", str(decoder_reranker_checkpoint(transformers_checkpoint)),
                            "--served-model-name", "decoder", "--task", "rerank", "--threads", "1"])
    yield server
    server.stop()


def cross_encoder_reference(pairs: list[tuple[str, str]]) -> list[float]:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    checkpoint = cross_encoder_checkpoint()
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    model = AutoModelForSequenceClassification.from_pretrained(checkpoint).eval()
    with torch.no_grad():
        inputs = tokenizer([q for q, _ in pairs], [d for _, d in pairs], return_tensors="pt", padding=True)
        return torch.sigmoid(model(**inputs).logits[:, 0]).tolist()


def decoder_reference(checkpoint, query: str, documents: list[str]) -> list[float]:
    """The Qwen3-Reranker card's recipe: its prompt, then softmax over the no/yes logits of the last position."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    model = AutoModelForCausalLM.from_pretrained(checkpoint).eval()
    prefix = ("<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the "
              "Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n")
    suffix = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    instruction = "Given a web search query, retrieve relevant passages that answer the query"
    yes, no = tokenizer.convert_tokens_to_ids("yes"), tokenizer.convert_tokens_to_ids("no")
    scores = []
    with torch.no_grad():
        for document in documents:  # one at a time: no padding in the reference
            text = f"{prefix}<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {document}{suffix}"
            ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
            last = model(input_ids=ids).logits[0, -1]
            scores.append(torch.softmax(torch.stack([last[no], last[yes]]), dim=0)[1].item())
    return scores


def test_cross_encoder_rerank_is_transformers_own(cross_encoder_server):
    reference = cross_encoder_reference([(QUERY, text) for text in DOCUMENTS])
    body = post(cross_encoder_server.base_url, "/v1/rerank",
                {"model": "cross", "query": QUERY, "documents": DOCUMENTS}).json()
    order = sorted(range(len(DOCUMENTS)), key=lambda index: reference[index], reverse=True)
    assert [item["index"] for item in body["results"]] == order
    for item in body["results"]:
        assert item["relevance_score"] == pytest.approx(reference[item["index"]], abs=1e-5)
        assert item["document"]["text"] == DOCUMENTS[item["index"]]
    assert body["usage"]["prompt_tokens"] > len(DOCUMENTS) * 3
    # top_n and objects with `text` (Jina's shape), on /v2/rerank (Cohere's path)
    top = post(cross_encoder_server.base_url, "/v2/rerank",
               {"model": "cross", "query": QUERY, "documents": [{"text": text} for text in DOCUMENTS],
                "top_n": 3}).json()
    assert [item["index"] for item in top["results"]] == order[:3]


def test_cross_encoder_score_one_to_one_one_to_many_and_pairwise(cross_encoder_server):
    def scores(text_1, text_2) -> list[float]:
        body = post(cross_encoder_server.base_url, "/v1/score", {"model": "cross", "text_1": text_1,
                                                                 "text_2": text_2}).json()
        assert [item["index"] for item in body["data"]] == list(range(len(body["data"])))
        assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] > 0
        return [item["score"] for item in body["data"]]

    assert scores(QUERY, DOCUMENTS[1]) == pytest.approx(cross_encoder_reference([(QUERY, DOCUMENTS[1])]), abs=1e-5)
    assert scores(QUERY, DOCUMENTS) == pytest.approx(cross_encoder_reference([(QUERY, d) for d in DOCUMENTS]),
                                                     abs=1e-5)
    pairs = [("bamboo", DOCUMENTS[4]), (QUERY, DOCUMENTS[2])]
    assert scores([q for q, _ in pairs], [d for _, d in pairs]) == pytest.approx(cross_encoder_reference(pairs),
                                                                                  abs=1e-5)


def test_decoder_reranker_is_p_yes_as_the_qwen3_reranker_card_computes_it(decoder_server, transformers_checkpoint):
    reference = decoder_reference(decoder_reranker_checkpoint(transformers_checkpoint), QUERY, DOCUMENTS)
    assert len({round(score, 4) for score in reference}) > 1  # the tiny weights tell the documents apart
    body = post(decoder_server.base_url, "/v1/rerank",
                {"model": "decoder", "query": QUERY, "documents": DOCUMENTS, "return_documents": False}).json()
    by_index = {item["index"]: item["relevance_score"] for item in body["results"]}
    assert [by_index[index] for index in range(len(DOCUMENTS))] == pytest.approx(reference, abs=1e-4)
    assert [item["relevance_score"] for item in body["results"]] == sorted(by_index.values(), reverse=True)
    assert all(0 < score < 1 and not math.isnan(score) for score in by_index.values())


def test_rerank_refusals_name_the_part(cross_encoder_server, scripted_server):
    base = cross_encoder_server.base_url
    error = check_error(post(scripted_server.base_url, "/v1/rerank",
                             {"model": "scripted", "query": QUERY, "documents": DOCUMENTS}), 400, "model")
    assert "not a reranker" in error["message"] and error["code"] == "model_not_reranker"
    check_error(post(scripted_server.base_url, "/v1/score", {"model": "scripted", "text_1": "a", "text_2": "b"}),
                400, "model")
    check_error(post(base, "/v1/rerank", {"model": "cross", "query": QUERY, "documents": []}), 400, "documents")
    check_error(post(base, "/v1/rerank", {"model": "cross", "query": QUERY, "documents": ["a", " "]}), 400,
                "documents[1]")
    check_error(post(base, "/v1/rerank", {"model": "cross", "query": "", "documents": ["a"]}), 400, "query")
    check_error(post(base, "/v1/rerank", {"model": "cross", "query": QUERY, "documents": [{"txt": "a"}]}), 400)
    check_error(post(base, "/v1/rerank", {"model": "cross", "query": QUERY, "documents": ["a"], "top_n": -1}), 400,
                "top_n")
    check_error(post(base, "/v1/score", {"model": "cross", "text_1": ["a", "b"], "text_2": ["c", "d", "e"]}), 400,
                "text_2")
    error = check_error(post(base, "/v1/rerank", {"model": "cross", "query": QUERY,
                                                  "documents": ["short", "panda " * 600]}), 400, "documents[1]")
    assert "context length" in error["message"]
    check_error(post(base, "/v1/rerank", {"model": "other", "query": QUERY, "documents": ["a"]}), 404, "model")
    error = check_error(post(base, "/v1/chat/completions",
                             {"model": "cross", "messages": [{"role": "user", "content": "hi"}]}), 400, "model")
    assert "reranker" in error["message"]
