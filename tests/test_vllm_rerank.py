"""/v1/score and /v1/rerank on the real vLLM engine (issue 47): the tiny cross-encoder of tests/reranker_models.py
(BertForSequenceClassification, one label, random seeded weights, all-MiniLM-L6-v2's WordPiece tokenizer) on vLLM's
pooling runner, served by rostra through its HTTP app; every score equals vLLM's own server's `/score` and
`/rerank` on the same checkpoint, one-to-one and one-to-many.

Runs where tests/vllm_env.py says (ROSTRA_TEST_VLLM=cpu); skips elsewhere. The checkpoint has one head of 64: vLLM
0.32's CPU attention refuses the other tests' head_dim 16 ("Unsupported CPU attention configuration: head_dim=16"),
in vLLM's own server too.
"""

from __future__ import annotations

import httpx
import pytest

from reranker_models import cross_encoder_checkpoint
from vllm_env import VLLM_SERVER_FLAGS, loop, real  # noqa: F401 (a fixture)

pytestmark = real
MODEL = "cross"
QUERY = "what is a panda?"
DOCUMENTS = ["hi", "The giant panda is a bear species endemic to China.", "pandas is a python library",
             "Pandas eat bamboo for most of the day, up to fourteen hours."]


@pytest.fixture(scope="module")
def reference() -> dict[str, list[float]]:
    """vLLM's own server's scores for the pairs: /score one-to-many and one-to-one, /rerank (by document)."""
    from vllm_server import VllmServer

    server = VllmServer(str(cross_encoder_checkpoint(head_dim=64)), "--served-model-name", MODEL, *VLLM_SERVER_FLAGS)
    try:
        many = _post(server.base_url, "/score", {"model": MODEL, "text_1": QUERY, "text_2": DOCUMENTS})
        one = _post(server.base_url, "/score", {"model": MODEL, "text_1": QUERY, "text_2": DOCUMENTS[1]})
        ranked = _post(server.base_url, "/rerank", {"model": MODEL, "query": QUERY, "documents": DOCUMENTS})
        by_document = sorted(ranked["results"], key=lambda result: result["index"])
        return {"many": [item["score"] for item in many["data"]], "one": [item["score"] for item in one["data"]],
                "rerank": [result["relevance_score"] for result in by_document]}
    finally:
        server.stop()


def _post(base_url: str, path: str, body: dict) -> dict:
    reply = httpx.post(base_url + path, json=body, timeout=300)
    assert reply.status_code == 200, reply.text
    return reply.json()


@pytest.fixture(scope="module")
def rostra(loop, reference, tmp_path_factory):  # after the reference: one engine at a time
    from harness import InProcessServer

    server = InProcessServer(tmp_path_factory.mktemp("rostra"), [], engine="vllm",
                             model=str(cross_encoder_checkpoint(head_dim=64)), served_model_name=[MODEL],
                             vllm_args=["enforce_eager=true"])
    loop.run_until_complete(server.__aenter__())
    yield server
    loop.run_until_complete(server.__aexit__(None, None, None))


def _ask(loop, server, path: str, body: dict) -> dict:
    reply = loop.run_until_complete(server.client.post(path, json=body, timeout=300))
    assert reply.status_code == 200, reply.text
    return reply.json()


def test_the_model_is_served_as_a_reranker(rostra):
    assert rostra.engine.task == "rerank"


def test_scores_are_vllms_own(loop, rostra, reference):
    many = _ask(loop, rostra, "/v1/score", {"model": MODEL, "text_1": QUERY, "text_2": DOCUMENTS})
    assert [item["index"] for item in many["data"]] == list(range(len(DOCUMENTS)))
    assert [item["score"] for item in many["data"]] == pytest.approx(reference["many"], abs=1e-5)
    assert len({round(score, 4) for score in reference["many"]}) == len(DOCUMENTS)  # the pairs score apart
    one = _ask(loop, rostra, "/v1/score", {"model": MODEL, "text_1": QUERY, "text_2": DOCUMENTS[1]})
    assert [item["score"] for item in one["data"]] == pytest.approx(reference["one"], abs=1e-5)


def test_rerank_is_vllms_own_sorted(loop, rostra, reference):
    ranked = _ask(loop, rostra, "/v1/rerank", {"model": MODEL, "query": QUERY, "documents": DOCUMENTS})
    scores = [result["relevance_score"] for result in ranked["results"]]
    assert scores == sorted(scores, reverse=True)
    by_document = sorted(ranked["results"], key=lambda result: result["index"])
    assert [result["relevance_score"] for result in by_document] == pytest.approx(reference["rerank"], abs=1e-5)
