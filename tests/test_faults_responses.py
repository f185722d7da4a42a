"""Issue 21's fault suite for stored responses: real `rostra serve` processes (scripted engine) on one data
directory, stopped by SIGTERM or kill -9 with background responses in flight, several processes on one store,
and a store that runs out of room (a file-size limit: RLIMIT_FSIZE with SIGXFSZ ignored, so a write fails with
EFBIG as on a full disk, without root or a special file system).

Every response is read back over HTTP and checked against the spec and the SDK's types; replays of the stored
events are validated event by event (test_api_responses.raw_stream)."""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys
import time

import httpx
import pytest

from servers import RunningServer
from test_api_responses import check_response, raw_stream

MODEL = "scripted"
LONG = "a long answer " * 60  # about 180 tokens at 50 ms each: 9 s, longer than any grace here
MEDIUM = "a medium answer " * 4  # about 12 tokens at 50 ms: it ends within the grace


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "script.jsonl"
    path.write_text("\n".join(json.dumps(rule) for rule in [
        {"match": "^long", "output": LONG, "delay_ms": 50},
        {"match": "^medium", "output": MEDIUM, "delay_ms": 50},
        {"match": "^slow", "output": LONG, "delay_ms": 150},  # about 27 s
        {"match": "", "output": "Done."}]) + "\n")
    return path


def serve(script, data_dir, *flags: str, **options) -> RunningServer:
    return RunningServer(["--engine", "scripted", "--script", str(script), *flags], data_dir=str(data_dir), **options)


def create(server: RunningServer, text: str, **fields) -> dict:
    response = httpx.post(f"{server.v1}/responses", json={"model": MODEL, "input": text, **fields}, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()


def retrieve(server: RunningServer, response_id: str) -> dict:
    return check_response(httpx.get(f"{server.v1}/responses/{response_id}", timeout=30).json())


def wait_for_deltas(server: RunningServer, response_id: str, count: int) -> None:
    """Follow a background response until `count` text deltas went out (so some are in the store's log)."""
    seen = 0
    with httpx.stream("GET", f"{server.v1}/responses/{response_id}?stream=true", timeout=60) as stream:
        for line in stream.iter_lines():
            if line.startswith("data: ") and json.loads(line[6:])["type"] == "response.output_text.delta":
                seen += 1
                if seen >= count:
                    return
    raise AssertionError("the response ended before it wrote that much")


def check_partial_item_survived(server: RunningServer, response: dict, message: str) -> None:
    """Failed with `message`; the message being written is kept, `incomplete`, with its text so far; the
    stored log ends with that item's done event, then response.failed."""
    assert response["status"] == "failed" and response["error"]["message"] == message, response
    item = response["output"][0]
    text = item["content"][0]["text"]
    assert item["type"] == "message" and item["status"] == "incomplete"
    assert text and LONG.startswith(text) and text != LONG
    events = raw_stream(server.base_url, {}, path=f"/v1/responses/{response['id']}?stream=true", method="GET")
    assert events[-1]["type"] == "response.failed"
    done = [event for event in events if event["type"] == "response.output_item.done"]
    assert done and done[-1]["item"]["status"] == "incomplete" and done[-1]["item"]["content"][0]["text"] == text
    assert [event["sequence_number"] for event in events] == list(range(len(events)))


def test_sigterm_gives_background_runs_the_grace_then_fails_them_saying_why(script, tmp_path):
    """Issue 21: SIGTERM left a running background response `cancelled` with no error, as if its user had
    cancelled it. Now a run that ends within --shutdown-grace completes; one that does not is failed, saying so."""
    server = serve(script, tmp_path, "--shutdown-grace", "3")
    try:
        long = create(server, "long", background=True)
        medium = create(server, "medium", background=True)
        wait_for_deltas(server, long["id"], 3)
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(timeout=30) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal it caught
    finally:
        server.stop()
    server = serve(script, tmp_path)
    try:
        assert retrieve(server, medium["id"])["status"] == "completed"
        check_partial_item_survived(server, retrieve(server, long["id"]),
                                    "the server shut down before this response finished")
    finally:
        server.stop()


def test_kill_9_keeps_the_partial_output_item_as_incomplete(script, tmp_path):
    """Issue 21: after kill -9 a failed response's partial output item was dropped; it ends `incomplete`."""
    server = serve(script, tmp_path)
    try:
        long = create(server, "long", background=True)
        wait_for_deltas(server, long["id"], 5)
        time.sleep(0.3)  # the event log writes in batches every 50 ms: let a few land
    finally:
        server.kill()
        server.stop()
    server = serve(script, tmp_path)  # the lock died with the process: a restart is not refused
    try:
        check_partial_item_survived(server, retrieve(server, long["id"]),
                                    "the server restarted while this response was running")
    finally:
        server.stop()


def wait_for_status(server: RunningServer, response_id: str, timeout: float) -> dict:
    """The response once it no longer runs (or as it is when `timeout` s have passed)."""
    deadline = time.monotonic() + timeout
    while True:
        response = retrieve(server, response_id)
        if response["status"] not in ("queued", "in_progress") or time.monotonic() > deadline:
            return response
        time.sleep(0.2)


def test_servers_share_one_sqlite_store_and_fail_only_a_dead_ones_runs(script, tmp_path):
    """Issue 33: a second `rostra serve` at default flags on the same data directory (a chat model and an embedding
    model on two ports, as people run them) refused to start. Now several share the store as replicas share
    PostgreSQL: each reads the other's responses; after kill -9 of one, its runs are failed once their lease has
    expired (partial output kept), and a live one's never: not by the survivor's sweeps, nor by a third server
    that starts meanwhile (it is not alone on the store, so it fails expired leases only)."""
    first, second = serve(script, tmp_path, "--lease-seconds", "2"), serve(script, tmp_path, "--lease-seconds", "2")
    third = None
    try:
        doomed = create(first, "long", background=True)
        survivor = create(second, "slow", background=True)
        wait_for_deltas(first, doomed["id"], 5)
        wait_for_deltas(second, survivor["id"], 2)
        time.sleep(0.3)  # the event log writes in batches every 50 ms: let a few land
        assert retrieve(second, doomed["id"])["status"] == "in_progress"  # each reads the other's
        assert retrieve(first, survivor["id"])["status"] == "in_progress"
        first.kill()
        third = serve(script, tmp_path, "--lease-seconds", "2")
        assert retrieve(third, survivor["id"])["status"] == "in_progress"
        check_partial_item_survived(second, wait_for_status(second, doomed["id"], 30),
                                    "the server running this response stopped (its lease expired)")
        assert retrieve(second, survivor["id"])["status"] == "in_progress"  # still running, untouched
        finished = wait_for_status(third, survivor["id"], 120)
        assert finished["status"] == "completed" and finished["output"][0]["content"][0]["text"] == LONG
    finally:
        for server in (first, second, third):
            if server is not None:
                server.stop()


def test_an_embedding_server_takes_no_store(tmp_path):
    """Issue 33: an embedding-only server took the Responses store (and its lock) it never uses."""
    server = RunningServer(["--task", "embed", "--no-ui"], data_dir=str(tmp_path))
    try:
        embedded = httpx.post(f"{server.v1}/embeddings", json={"model": "SmolLM2-135M-Instruct", "input": "hi"},
                              timeout=120)
        assert embedded.status_code == 200 and len(embedded.json()["data"][0]["embedding"]) > 0
        assert httpx.get(f"{server.v1}/responses/resp_none", timeout=30).status_code == 404
    finally:
        server.stop()
    # No Responses store, so no lock either; the batch store (batches.sqlite3: /v1/embeddings batches) is its own.
    assert not [path.name for path in tmp_path.iterdir() if path.name.startswith("responses.sqlite3")]


def test_background_responses_are_bounded(script, tmp_path):
    """Issue 21: with default flags a client could queue an unbounded backlog of background responses. Past
    --max-background-responses the answer is a 429 in the envelope; a finished run makes room again."""
    server = serve(script, tmp_path, "--max-background-responses", "2")
    try:
        first = create(server, "long", background=True)
        create(server, "long", background=True)
        refused = httpx.post(f"{server.v1}/responses", json={"model": MODEL, "input": "medium", "background": True})
        assert refused.status_code == 429 and refused.json()["error"]["type"] == "rate_limit_error"
        assert "--max-background-responses" in refused.json()["error"]["message"]
        assert create(server, "medium")["status"] == "completed"  # foreground requests are not bounded by it
        assert httpx.post(f"{server.v1}/responses/{first['id']}/cancel").json()["status"] == "cancelled"
        assert create(server, "medium", background=True)["status"] in ("queued", "in_progress")
    finally:
        server.stop()


def file_size_limit(limit: int):
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG), as on a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_a_full_store_answers_in_the_envelope_and_closes_what_it_opened(script, tmp_path):
    """Issue 21: a full disk gave generic 500s and dropped connections, and a relayed upstream stayed open when
    the store write failed. Here the gateway (--engine remote, in front of a scripted rostra) keeps its store under
    a 2 MB file-size limit: once full, storing answers 507/503 in the envelope, the job's upstream is closed
    (the engine's running count is back to 0), streams end with an error event, and unstored requests serve."""
    upstream = serve(script, tmp_path / "upstream")
    gateway = RunningServer(["--engine", "remote", "--upstream", f"{upstream.v1},model={MODEL}"],
                            data_dir=str(tmp_path / "gateway"), preexec=file_size_limit(2_000_000))
    try:
        for size, count in [(100_000, 20), (10_000, 1), (1, 1)]:  # filled to the last few pages
            items = [{"type": "message", "role": "user", "content": "x" * size}] * count
            for _ in range(300):
                full = httpx.post(f"{gateway.v1}/conversations", json={"items": items}, timeout=60)
                if full.status_code != 200:
                    break
            assert full.status_code in (503, 507), full.text
            assert full.json()["error"]["code"] in ("storage_full", "storage_unavailable")
        for body in ({"background": True}, {}):
            refused = httpx.post(f"{gateway.v1}/responses", json={"model": MODEL, "input": "medium", **body},
                                 timeout=60)
            assert refused.status_code in (503, 507), refused.text
            assert set(refused.json()["error"]) == {"message", "type", "param", "code"}
        streamed = raw_stream(gateway.base_url, {"model": MODEL, "input": "medium"})
        assert streamed[-1]["type"] in ("error", "response.failed")
        assert create(gateway, "medium", store=False)["output"][0]["content"][0]["text"] == MEDIUM
        for _ in range(50):
            metrics = httpx.get(f"{gateway.base_url}/metrics").text
            running = [line for line in metrics.splitlines() if line.startswith("rostra_engine_running_generations")]
            if running and float(running[0].split()[-1]) == 0:
                break
            time.sleep(0.1)
        assert running and float(running[0].split()[-1]) == 0, running
        assert httpx.get(f"{gateway.base_url}/health").status_code == 200
    finally:
        gateway.stop()
        upstream.stop()
