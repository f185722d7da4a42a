"""The bad-input corpus (tests/bad_inputs.py) against the scripted engine and llama.cpp (the embedded
model), each server under a memory cap: every answer a 2xx or a 4xx in the error envelope, never a
5xx, never a dropped connection, and the server still serving after the last case."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from bad_inputs import CASES, Case
from servers import DATA, RunningServer, address_space_limit
from wire import check_error

ADMIN_KEY = "corpus-admin-key"
# Address space for the server process: several times what it uses (the embedded model mapped, llama.cpp's
# threads' stacks), far below what a runaway grammar takes (issue 21: 8 GiB in one allocation).
MEMORY_LIMIT = 6 * 1024**3
CONCURRENCY = 4
SHORT = ("--override-generation-config", '{"max_tokens": 2}', "--admin-key", ADMIN_KEY, "--max-model-len", "2048")


def corpus_server(*args: str) -> RunningServer:
    return RunningServer([*args, *SHORT], preexec=address_space_limit(MEMORY_LIMIT))


@pytest.fixture(scope="module", params=["scripted", "llamacpp"])
def server(request):
    if request.param == "scripted":
        running = corpus_server("--engine", "scripted", "--script", str(DATA / "script.jsonl"))
    else:
        running = corpus_server("--parallel", str(CONCURRENCY))
    running.model = httpx.get(f"{running.v1}/models").json()["data"][0]["id"]
    yield running
    running.stop()


def send(client: httpx.Client, server: RunningServer, case: Case) -> httpx.Response:
    headers = {"content-type": "application/json"}
    if case.admin:
        headers["authorization"] = f"Bearer {ADMIN_KEY}"
    with client.stream(case.method, server.base_url + case.path, content=case.request_body(server.model),
                       params=case.params, headers=headers) as response:
        response.read()  # a stream to its end: a connection dropped halfway raises here
        return response


def test_corpus_is_large_and_covers_every_category():
    assert len(CASES) >= 400
    assert {case.category for case in CASES} >= {"types", "bounds", "encodings", "nesting", "constraints",
                                                    "templates", "admin", "pagination"}


def check_case(client: httpx.Client, server: RunningServer, case: Case) -> list[str]:
    """What is wrong with the server's answer to one case (nothing: [])."""
    try:
        response = send(client, server, case)
    except httpx.HTTPError as exc:
        return [f"{case.id}: connection failed ({type(exc).__name__}: {exc})"]
    if response.status_code >= 500:
        return [f"{case.id}: {response.status_code} {response.text[:300]}"]
    if response.status_code >= 400:
        try:
            check_error(response, response.status_code)
        except AssertionError as exc:
            return [f"{case.id}: {response.status_code} not an error envelope: {exc}: {response.text[:200]}"]
    return []


def test_every_bad_input_gets_a_clean_answer_and_the_server_survives(server):
    # Four at a time, as clients do (and llama.cpp batches the few that generate).
    with httpx.Client(timeout=600, limits=httpx.Limits(max_connections=CONCURRENCY)) as client, \
            ThreadPoolExecutor(CONCURRENCY) as pool:
        failures = [failure for found in pool.map(lambda case: check_case(client, server, case), CASES)
                    for failure in found]
        assert server.process.poll() is None, f"the server died: {server.log_path.read_text()[-2000:]}"
        assert client.get(f"{server.base_url}/health").status_code == 200
        still = client.post(f"{server.v1}/chat/completions", json={
            "model": server.model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
        assert still.status_code == 200, still.text
    assert not failures, f"{len(failures)} of {len(CASES)} cases failed:\n" + "\n".join(failures)
