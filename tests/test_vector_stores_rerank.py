"""Vector store searches reranked by a served reranker (issue 47: "reranked by a served reranker when one is
configured"): `--vector-store-reranker cross` names the tiny cross-encoder the rerank tests build
(tests/reranker_models.py), served beside the embedding model. The results' scores are the reranker's own (checked
against transformers' forward pass on the same weights, as tests/test_rerank_transformers.py checks /v1/rerank),
`ranker: "none"` is not reranked, `score_threshold` compares with the reranker's score, and file_search's results
are reranked the same way. On SQLite only: the reranking is above the store (the store tests run on both)."""

from __future__ import annotations

import functools
import math
import time

import pytest
from openai import OpenAI

from harness import BASE_URL, served, write_script
from reranker_models import cross_encoder_checkpoint
from test_api_vector_stores import SCRIPT
from test_rerank_transformers import cross_encoder_reference

QUERY = "Which animal purrs?"
DOCS = {"cats.md": "Cats are small carnivorous mammals. A cat sleeps most of the day and purrs when content.",
        "owls.md": "Owls hunt at night and can turn their heads almost all the way around.",
        "bread.md": "Sourdough bread rises thanks to wild yeast and lactic acid bacteria.",
        "tides.md": "Tides rise and fall twice a day, pulled by the moon."}


@pytest.fixture(scope="module")
def http(tmp_path_factory, minilm_checkpoint):
    directory = tmp_path_factory.mktemp("vector-stores-rerank")
    config = directory / "models.yaml"
    script = write_script(directory, SCRIPT)
    config.write_text(f"models:\n  - name: scripted\n    engine: scripted\n    script: {script}\n"
                      "    tool_call_parser: hermes\n"
                      f"  - name: minilm\n    engine: transformers\n    model: {minilm_checkpoint}\n    task: embed\n"
                      f"  - name: cross\n    engine: transformers\n    model: {cross_encoder_checkpoint()}\n")
    with served(directory, [], models_config=str(config), threads=1, vector_store_reranker="cross") as client:
        yield client


@pytest.fixture(scope="module")
def library(http):
    client = OpenAI(base_url=f"{BASE_URL}/v1", api_key="none", max_retries=0, http_client=http)
    store = client.vector_stores.create(name="reranked")
    ids = {}
    for name, text in DOCS.items():
        ids[name] = client.files.create(file=(name, text.encode()), purpose="user_data").id
        client.vector_stores.files.create(vector_store_id=store.id, file_id=ids[name])
    deadline = time.monotonic() + 60
    while client.vector_stores.retrieve(store.id).file_counts.completed < len(DOCS):
        assert time.monotonic() < deadline, "the files were not indexed in time"
        time.sleep(0.1)
    return client, store.id, ids


@functools.cache  # (the reference loads the checkpoint each time)
def reranked(query: str) -> dict[str, float]:
    """Each document's score by the cross-encoder itself (sigmoid of its logit), by file name."""
    return dict(zip(DOCS, cross_encoder_reference([(query, text) for text in DOCS.values()])))


def test_search_scores_are_the_rerankers_and_ranker_none_is_not_reranked(library):
    client, store_id, ids = library
    expected = reranked(QUERY)
    results = client.vector_stores.search(store_id, query=QUERY).data
    assert [item.filename for item in results] == sorted(DOCS, key=lambda name: -expected[name])
    for item in results:
        assert math.isclose(item.score, expected[item.filename], abs_tol=1e-5)
        assert item.file_id == ids[item.filename]
    for ranker in ("auto", "default-2024-11-15"):  # OpenAI's named rankers rerank as "auto" does
        named = client.vector_stores.search(store_id, query=QUERY, ranking_options={"ranker": ranker}).data
        assert [(item.filename, item.score) for item in named] == [(item.filename, item.score) for item in results]
    cosine = client.vector_stores.search(store_id, query=QUERY, ranking_options={"ranker": "none"}).data
    assert cosine[0].filename == "cats.md"  # the embeddings' own ranking, not the (random) reranker's
    assert not all(math.isclose(item.score, expected[item.filename], abs_tol=1e-5) for item in cosine)


def test_the_threshold_and_the_limit_apply_to_the_rerankers_scores(library):
    client, store_id, _ = library
    expected = sorted(reranked(QUERY).values(), reverse=True)
    middle = (expected[1] + expected[2]) / 2
    kept = client.vector_stores.search(store_id, query=QUERY, ranking_options={"score_threshold": middle}).data
    assert [round(item.score, 5) for item in kept] == [round(score, 5) for score in expected[:2]]
    top = client.vector_stores.search(store_id, query=QUERY, max_num_results=1).data
    assert len(top) == 1 and math.isclose(top[0].score, expected[0], abs_tol=1e-5)


def test_file_search_results_are_reranked(library):
    client, store_id, _ = library
    expected = reranked("which animal purrs")  # the query the scripted model searches with
    response = client.responses.create(model="scripted", input=QUERY, include=["file_search_call.results"],
                                       tools=[{"type": "file_search", "vector_store_ids": [store_id]}])
    results = response.output[0].results
    assert [result.filename for result in results] == sorted(DOCS, key=lambda name: -expected[name])
    for result in results:
        assert math.isclose(result.score, expected[result.filename], abs_tol=1e-5)


def test_a_reranker_flag_naming_no_reranker_is_a_400_that_says_so(http, library):
    """--vector-store-reranker is checked at each search (models come and go): a model not served, or one that
    does not rerank (here the embedding model), is a 400 naming the flag; `ranker: "none"` still searches."""
    _, store_id, _ = library
    reranker = http.app.state.vector_stores.searcher.reranker
    try:
        for name, says in (("nope", "does not serve"), ("minilm", "not rerank")):
            reranker.name = name
            answer = http.post(f"/v1/vector_stores/{store_id}/search", json={"query": QUERY})
            error = answer.json()["error"]
            assert (answer.status_code, error["code"]) == (400, "no_reranker") and says in error["message"]
            assert "--vector-store-reranker" in error["message"]
        plain = http.post(f"/v1/vector_stores/{store_id}/search",
                          json={"query": QUERY, "ranking_options": {"ranker": "none"}})
        assert plain.status_code == 200 and plain.json()["data"][0]["filename"] == "cats.md"
    finally:
        reranker.name = "cross"
