"""The vector stores API (issue 47) driven by the openai SDK end to end, in-process: a scripted chat model beside
all-MiniLM-L6-v2 (the embedding model the embeddings tests use), a real SQLite store (and a PostgreSQL one), files uploaded through the
Files API, indexed in the background. Bodies are checked against OpenAI's spec."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
from openai import AsyncOpenAI, BadRequestError, NotFoundError, OpenAI

from harness import BASE_URL, served, write_script
from spec import validate

KEY_A, KEY_B = "vs-key-a", "vs-key-b"
DOCS = {
    "cats.md": "# Cats\n\nCats are small carnivorous mammals. A cat sleeps most of the day and purrs when content.",
    "rust.py": "def borrow_checker():\n    '''Rust's borrow checker enforces ownership of memory at compile time.'''\n",
    "volcano.html": "<html><head><style>p {color: red}</style><script>var x = 1;</script></head><body>"
                    "<h1>Volcanoes</h1><p>Lava erupts from a volcano when magma reaches the surface.</p></body></html>",
}


# The scripted model calls file_search for the question, and answers from what the search found (hermes calls).
SCRIPT = [
    {"match": "Which animal purrs", "output": '<tool_call>{"name": "file_search", "arguments": '
                                               '{"query": "which animal purrs"}}</tool_call>'},
    {"match": r"\[cats\.md\]", "role": "tool", "output": "A cat purrs when content [cats.md]."},
]


def models_config(directory: Path, minilm: Path) -> str:
    script = write_script(directory, SCRIPT)
    config = directory / "models.yaml"
    config.write_text(f"models:\n  - name: scripted\n    engine: scripted\n    script: {script}\n"
                      "    tool_call_parser: hermes\n"
                      f"  - name: minilm\n    engine: transformers\n    model: {minilm}\n    task: embed\n")
    return str(config)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def http(request, tmp_path_factory, minilm_checkpoint):
    """The server on SQLite, then on a PostgreSQL database of its own."""
    directory = tmp_path_factory.mktemp("vector-stores")
    store = request.getfixturevalue("postgres").new_database() if request.param == "postgres" else None
    with served(directory, [], models_config=models_config(directory, minilm_checkpoint),
                api_keys=[KEY_A, KEY_B], threads=1, store=store) as client:
        yield client


def sdk(http, key: str = KEY_A) -> OpenAI:
    return OpenAI(base_url=f"{BASE_URL}/v1", api_key=key, max_retries=0, http_client=http)


def upload(client: OpenAI, name: str, text: str) -> str:
    return client.files.create(file=(name, text.encode()), purpose="user_data").id


def indexed(client: OpenAI, store_id: str, file_id: str, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while (file := client.vector_stores.files.retrieve(file_id, vector_store_id=store_id)).status == "in_progress":
        assert time.monotonic() < deadline, "the file was not indexed in time"
        time.sleep(0.1)
    return file


@pytest.fixture(scope="module")
def library(http):
    """A store of the three documents, each with attributes, indexed."""
    client = sdk(http)
    store = client.vector_stores.create(name="library", expires_after={"anchor": "last_active_at", "days": 7})
    ids = {}
    for year, (name, text) in enumerate(DOCS.items(), start=2020):
        ids[name] = upload(client, name, text)
        client.vector_stores.files.create(vector_store_id=store.id, file_id=ids[name],
                                          attributes={"year": year, "kind": name.rsplit(".", 1)[1]})
    for file_id in ids.values():
        assert indexed(client, store.id, file_id).status == "completed"
    return store.id, ids


def raw(http, method: str, path: str, key: str = KEY_A, **kwargs) -> httpx.Response:
    return http.request(method, path, headers={"Authorization": f"Bearer {key}"}, **kwargs)


def test_a_store_is_created_listed_updated_and_counts_its_files(http, library):
    store_id, ids = library
    client = sdk(http)
    store = client.vector_stores.retrieve(store_id)
    assert (store.status, store.file_counts.completed, store.file_counts.total) == ("completed", 3, 3)
    assert store.usage_bytes > 0 and store.expires_after.days == 7 and store.expires_at > time.time() + 6 * 86400
    body = raw(http, "GET", f"/v1/vector_stores/{store_id}").json()
    validate("VectorStoreObject", body)
    updated = client.vector_stores.update(store_id, name="renamed", metadata={"team": "docs"})
    assert (updated.name, updated.metadata) == ("renamed", {"team": "docs"})
    listed = raw(http, "GET", "/v1/vector_stores").json()
    validate("ListVectorStoresResponse", listed)
    assert store_id in [item["id"] for item in listed["data"]]


def test_files_are_listed_with_a_filter_read_back_and_their_attributes_updated(http, library):
    store_id, ids = library
    client = sdk(http)
    listed = raw(http, "GET", f"/v1/vector_stores/{store_id}/files?filter=completed").json()
    validate("ListVectorStoreFilesResponse", listed)
    assert {item["id"] for item in listed["data"]} == set(ids.values())
    assert raw(http, "GET", f"/v1/vector_stores/{store_id}/files?filter=failed").json()["data"] == []
    file = raw(http, "GET", f"/v1/vector_stores/{store_id}/files/{ids['cats.md']}").json()
    validate("VectorStoreFileObject", file)
    assert file["chunking_strategy"] == {"type": "static", "static": {"max_chunk_size_tokens": 800,
                                                                     "chunk_overlap_tokens": 400}}
    content = raw(http, "GET", f"/v1/vector_stores/{store_id}/files/{ids['volcano.html']}/content").json()
    validate("VectorStoreFileContentResponse", content)
    text = " ".join(part["text"] for part in content["data"])
    assert "Lava erupts" in text and "color" not in text and "var x" not in text  # HTML read as its text
    changed = client.vector_stores.files.update(ids["rust.py"], vector_store_id=store_id,
                                                attributes={"year": 2030, "kind": "py"})
    assert changed.attributes == {"year": 2030, "kind": "py"}


def test_search_finds_the_relevant_chunk_and_honours_filters_and_thresholds(http, library):
    store_id, ids = library
    client = sdk(http)
    results = client.vector_stores.search(store_id, query="Which animal purrs?")
    assert results.data[0].file_id == ids["cats.md"] and results.data[0].filename == "cats.md"
    assert 0 < results.data[0].score <= 1 and "purrs" in results.data[0].content[0].text
    body = raw(http, "POST", f"/v1/vector_stores/{store_id}/search",
               json={"query": ["magma", "lava"], "max_num_results": 2}).json()
    validate("VectorStoreSearchResultsPage", body)
    assert body["search_query"] == ["magma", "lava"] and len(body["data"]) == 2
    assert body["data"][0]["file_id"] == ids["volcano.html"]
    only_py = client.vector_stores.search(store_id, query="Which animal purrs?",
                                          filters={"type": "eq", "key": "kind", "value": "py"})
    assert {item.file_id for item in only_py.data} == {ids["rust.py"]}
    compound = {"type": "or", "filters": [{"type": "lt", "key": "year", "value": 2021},
                                          {"type": "in", "key": "kind", "value": ["html"]}]}
    both = client.vector_stores.search(store_id, query="anything", filters=compound)
    assert {item.file_id for item in both.data} == {ids["cats.md"], ids["volcano.html"]}
    strict = client.vector_stores.search(store_id, query="Which animal purrs?",
                                         ranking_options={"score_threshold": 0.99})
    assert strict.data == []
    vector_only = client.vector_stores.search(store_id, query="Which animal purrs?", ranking_options={"ranker": "none"})
    assert vector_only.data[0].file_id == ids["cats.md"]


def test_bad_searches_are_400s_naming_the_field(http, library):
    store_id, _ = library
    for body, param in (({"query": ""}, "query"), ({"query": "x", "max_num_results": 51}, "max_num_results"),
                        ({"query": "x", "filters": {"type": "like", "key": "a", "value": 1}}, "filters.type"),
                        ({"query": "x", "rewrite_query": True}, "rewrite_query"),
                        ({"query": "x", "ranking_options": {"score_threshold": 2}},
                         "ranking_options.score_threshold")):
        answer = raw(http, "POST", f"/v1/vector_stores/{store_id}/search", json=body)
        assert answer.status_code == 400, body
        assert answer.json()["error"]["param"] == param


def test_another_key_sees_none_of_a_keys_stores(http, library):
    store_id, ids = library
    other = sdk(http, KEY_B)
    with pytest.raises(NotFoundError):
        other.vector_stores.retrieve(store_id)
    with pytest.raises(NotFoundError):
        other.vector_stores.search(store_id, query="cats")
    with pytest.raises(NotFoundError):
        other.vector_stores.files.list(vector_store_id=store_id)
    assert store_id not in [store.id for store in other.vector_stores.list()]
    mine = other.vector_stores.create(name="b's")
    with pytest.raises(NotFoundError):  # nor may B add A's file to its own store
        other.vector_stores.files.create(vector_store_id=mine.id, file_id=ids["cats.md"])


def test_file_batches_index_their_files_and_a_finished_batch_is_not_cancelled(http):
    client = sdk(http)
    store = client.vector_stores.create(name="batch")
    files = [upload(client, f"note{n}.txt", f"Note number {n}: the {word} is here.")
             for n, word in enumerate(("owl", "fox", "eel"))]
    batch = client.vector_stores.file_batches.create(vector_store_id=store.id, file_ids=files,
                                                     attributes={"source": "notes"},
                                                     chunking_strategy={"type": "static", "static": {
                                                         "max_chunk_size_tokens": 100, "chunk_overlap_tokens": 50}})
    validate("VectorStoreFileBatchObject", raw(http, "GET", f"/v1/vector_stores/{store.id}/file_batches/{batch.id}")
             .json())
    for file_id in files:
        assert indexed(client, store.id, file_id).attributes == {"source": "notes"}
    done = client.vector_stores.file_batches.retrieve(batch.id, vector_store_id=store.id)
    assert (done.status, done.file_counts.completed, done.file_counts.total) == ("completed", 3, 3)
    assert client.vector_stores.file_batches.cancel(batch.id, vector_store_id=store.id).status == "completed"
    listed = client.vector_stores.file_batches.list_files(batch.id, vector_store_id=store.id)
    assert sorted(file.id for file in listed.data) == sorted(files)
    deleted = client.vector_stores.files.delete(files[0], vector_store_id=store.id)
    assert deleted.deleted and client.vector_stores.retrieve(store.id).file_counts.total == 2
    assert client.vector_stores.delete(store.id).deleted
    with pytest.raises(NotFoundError):
        client.vector_stores.retrieve(store.id)


def test_a_binary_file_fails_with_its_reason_and_bad_requests_are_400s(http):
    client = sdk(http)
    store = client.vector_stores.create(name="odd")
    binary = client.files.create(file=("blob.bin", bytes(range(256)) * 4), purpose="user_data").id
    client.vector_stores.files.create(vector_store_id=store.id, file_id=binary)
    failed = indexed(client, store.id, binary)
    assert failed.status == "failed" and failed.last_error.code == "unsupported_file"
    with pytest.raises(BadRequestError) as refused:
        client.vector_stores.files.create(vector_store_id=store.id, file_id=binary, chunking_strategy={
            "type": "static", "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 60}})
    assert refused.value.body["param"] == "chunking_strategy.static.chunk_overlap_tokens"
    with pytest.raises(NotFoundError):
        client.vector_stores.files.create(vector_store_id=store.id, file_id="file-nope")


def test_without_an_embedding_model_adding_a_file_is_a_400_naming_the_flag(tmp_path):
    with served(tmp_path, []) as http:
        client = OpenAI(base_url=f"{BASE_URL}/v1", api_key="none", max_retries=0, http_client=http)
        store = client.vector_stores.create(name="no model")
        file_id = upload(client, "a.txt", "text")
        with pytest.raises(BadRequestError) as refused:
            client.vector_stores.files.create(vector_store_id=store.id, file_id=file_id)
        assert "--vector-store-model" in refused.value.message and "--task embed" in refused.value.message


def test_a_deleted_file_leaves_every_store_that_held_it(http):
    """OpenAI: deleting a File removes it from the vector stores' search; here from each store's files too."""
    client = sdk(http)
    stores = [client.vector_stores.create(name=f"held {n}").id for n in range(2)]
    kept, gone = upload(client, "kept.txt", "Tea is brewed from leaves."), upload(client, "gone.txt", GONE_TEXT)
    for store_id in stores:
        for file_id in (kept, gone):
            client.vector_stores.files.create(vector_store_id=store_id, file_id=file_id)
            indexed(client, store_id, file_id)
        assert client.vector_stores.search(store_id, query="harbour lighthouse").data[0].file_id == gone
    assert client.files.delete(gone).deleted
    for store_id in stores:
        assert {item.file_id for item in client.vector_stores.search(store_id, query="harbour lighthouse").data} == {
            kept}
        assert [file.id for file in client.vector_stores.files.list(vector_store_id=store_id)] == [kept]
        assert client.vector_stores.retrieve(store_id).file_counts.total == 1
        with pytest.raises(NotFoundError):
            client.vector_stores.files.retrieve(gone, vector_store_id=store_id)


GONE_TEXT = "The harbour lighthouse guides ships past the rocks at night."
DAY = 24 * 3600


def test_an_expired_store_is_expired_and_its_chunks_deleted_by_the_indexer(http):
    """`expires_after`: past its expiry (the indexer's clock moved on two days, no sleeping) the store reads
    `expired`, refuses searches and files, and the indexer's sweep deletes its chunks (OpenAI deletes an expired
    store's data); a store whose expiry is later is untouched."""
    client = sdk(http)
    short = client.vector_stores.create(name="short", expires_after={"anchor": "last_active_at", "days": 1})
    long = client.vector_stores.create(name="long", expires_after={"anchor": "last_active_at", "days": 30})
    file_id = upload(client, "tides.txt", "Tides rise and fall twice a day, pulled by the moon.")
    for store in (short, long):
        client.vector_stores.files.create(vector_store_id=store.id, file_id=file_id)
        indexed(client, store.id, file_id)
    indexer = http.app.state.vector_stores.indexer
    real_clock = indexer.clock
    indexer.clock = lambda: real_clock() + 2 * DAY
    try:
        indexer.wake()
        deadline = time.monotonic() + 30
        while client.vector_stores.files.content(file_id, vector_store_id=short.id).data:
            assert time.monotonic() < deadline, "the indexer did not delete the expired store's chunks"
            time.sleep(0.05)
        expired = raw(http, "GET", f"/v1/vector_stores/{short.id}").json()
        validate("VectorStoreObject", expired)
        assert (expired["status"], expired["usage_bytes"]) == ("expired", 0)
        for method, path, body in (("POST", "search", {"query": "moon"}), ("POST", "files", {"file_id": file_id})):
            answer = raw(http, method, f"/v1/vector_stores/{short.id}/{path}", json=body)
            assert (answer.status_code, answer.json()["error"]["param"]) == (400, "vector_store_id")
        assert client.vector_stores.retrieve(long.id).status == "completed"
        assert client.vector_stores.search(long.id, query="moon").data[0].file_id == file_id
    finally:
        indexer.clock = real_clock


# -- file_search in the Responses API -----------------------------------------------------------------------------

def file_search_tool(store_id: str, **options) -> dict:
    return {"type": "file_search", "vector_store_ids": [store_id], **options}


def test_file_search_runs_in_a_response_with_results_and_a_citation(http, library):
    store_id, ids = library
    client = sdk(http)
    response = client.responses.create(model="scripted", input="Which animal purrs?",
                                       tools=[file_search_tool(store_id, max_num_results=2)],
                                       include=["file_search_call.results"])
    body = response.model_dump(mode="json", exclude_none=True)
    validate("Response", raw(http, "GET", f"/v1/responses/{response.id}").json())
    call, message = response.output
    assert (call.type, call.status, call.queries) == ("file_search_call", "completed", ["which animal purrs"])
    assert call.results[0].file_id == ids["cats.md"] and len(call.results) <= 2 and "purrs" in call.results[0].text
    text = message.content[0]
    assert text.text == "A cat purrs when content [cats.md]."
    (citation,) = text.annotations
    assert (citation.type, citation.file_id, citation.filename) == ("file_citation", ids["cats.md"], "cats.md")
    assert citation.index == text.text.index("[cats.md]") + len("[cats.md]")
    assert body["tools"][0]["type"] == "file_search"
    without = client.responses.create(model="scripted", input="Which animal purrs?",
                                      tools=[file_search_tool(store_id)])
    assert without.output[0].results is None  # results only when include asks for them


def test_file_search_streams_its_events(http, library):
    store_id, ids = library
    answer = raw(http, "POST", "/v1/responses", json={
        "model": "scripted", "input": "Which animal purrs?", "stream": True,
        "tools": [file_search_tool(store_id, filters={"type": "eq", "key": "kind", "value": "md"})]})
    events = [json.loads(line[len("data: "):]) for line in answer.text.splitlines() if line.startswith("data: ")]
    for event in events:
        validate("ResponseStreamEvent", event)
    kinds = [event["type"] for event in events]
    assert [kind for kind in kinds if kind.startswith("response.file_search_call")] == [
        "response.file_search_call.in_progress", "response.file_search_call.searching",
        "response.file_search_call.completed"]
    (added,) = [event for event in events if event["type"] == "response.output_text.annotation.added"]
    assert added["annotation"]["file_id"] == ids["cats.md"]
    assert kinds.index("response.output_text.annotation.added") < kinds.index("response.output_text.done")
    final = events[-1]["response"]
    assert final["output"][-1]["content"][0]["annotations"] == [added["annotation"]]


def test_file_search_over_another_keys_store_is_a_404(http, library):
    store_id, _ = library
    with pytest.raises(NotFoundError) as refused:
        sdk(http, KEY_B).responses.create(model="scripted", input="Which animal purrs?",
                                          tools=[file_search_tool(store_id)])
    assert refused.value.body["param"] == "tools[0].vector_store_ids"


def test_the_agents_sdks_file_search_tool(http, library):
    from agents import Agent, FileSearchTool, OpenAIResponsesModel, RunConfig, Runner

    store_id, ids = library
    agent_tools = [FileSearchTool(vector_store_ids=[store_id], max_num_results=3, include_search_results=True)]

    async def run():
        # The Agents SDK is async: it runs on the app's own event loop (the TestClient's portal; the PostgreSQL
        # pool belongs to that loop), its client reaching the app over ASGI.
        client = AsyncOpenAI(base_url=f"{BASE_URL}/v1", api_key=KEY_A, max_retries=0, http_client=httpx.AsyncClient(
            transport=httpx.ASGITransport(app=http.app), base_url=BASE_URL, timeout=60))
        agent = Agent(name="librarian", instructions="Answer from the files.",
                      model=OpenAIResponsesModel("scripted", client), tools=agent_tools)
        return await Runner.run(agent, "Which animal purrs?", run_config=RunConfig(tracing_disabled=True))

    result = http.portal.call(run)
    assert result.final_output == "A cat purrs when content [cats.md]."
    calls = [item.raw_item for item in result.new_items if getattr(item.raw_item, "type", "") == "file_search_call"]
    assert calls and calls[0].results[0].file_id == ids["cats.md"]
