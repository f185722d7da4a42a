"""Several real `rostra serve` replicas on one real PostgreSQL store, driven over HTTP: a response
created on one is retrieved, followed, cancelled and deleted through the others; when the replica
running a background response is killed (SIGKILL), another marks it failed once its lease expires."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import asyncpg
import httpx
import pytest
from openai import BadRequestError, NotFoundError

from servers import DATA, RunningServer
from test_api_responses import MODEL, check_response, client_for, raw_stream

LEASE_SECONDS = 2.0
SLOW = "slow story"  # the script's slow line: one token per 100 ms, about 3.5 s in all


def replica(dsn: str) -> RunningServer:
    return RunningServer(["--engine", "scripted", "--script", str(DATA / "script.jsonl"), "--store", dsn,
                          "--lease-seconds", str(LEASE_SECONDS)])


@pytest.fixture(scope="module")
def replica_dsn(postgres) -> str:
    return postgres.new_database()


@pytest.fixture(scope="module")
def replicas(replica_dsn):
    """Three replicas on one database."""
    dsn = replica_dsn
    servers = []
    try:
        for _ in range(3):
            servers.append(replica(dsn))
        yield servers
    finally:
        for server in servers:
            server.stop()


def wait_until_logged(dsn: str, response_id: str, count: int) -> None:
    """Until the response has `count` events in the store (so it is mid-run, whatever the machine's speed)."""
    deadline = time.monotonic() + 60
    while len(stored(dsn, response_id)[1]) < count:
        assert time.monotonic() < deadline, f"{response_id} logged fewer than {count} events"
        time.sleep(0.05)


def follow_in_thread(server: RunningServer, response_id: str, starting_after: int | None = None):
    """Follow a response's stream on `server` in a thread; the returned list fills when it ends."""
    path = f"/v1/responses/{response_id}?stream=true"
    if starting_after is not None:
        path += f"&starting_after={starting_after}"
    result: list = []
    thread = threading.Thread(target=lambda: result.extend(raw_stream(server.base_url, {}, path=path, method="GET")))
    thread.start()
    return thread, result


def test_retrieve_input_items_and_delete_across_replicas(replicas):
    a, b, c = replicas
    created = client_for(a).responses.create(model=MODEL, input=[{"role": "user", "content": "say hello"}])
    assert check_response(httpx.get(f"{b.base_url}/v1/responses/{created.id}").json())["id"] == created.id
    assert client_for(b).responses.retrieve(created.id).output_text == "Hello! How can I help you today?"
    assert [item.id for item in client_for(c).responses.input_items.list(created.id)] == \
        [item.id for item in client_for(a).responses.input_items.list(created.id)]
    # previous_response_id reads the conversation from the store, whichever replica answers.
    follow_up = client_for(c).responses.create(model=MODEL, input="say hello", previous_response_id=created.id)
    assert follow_up.previous_response_id == created.id
    assert client_for(c).responses.delete(created.id) is None
    with pytest.raises(NotFoundError):
        client_for(a).responses.retrieve(created.id)


def test_follow_on_other_replicas(replicas):
    """Created on A; followed live on B from the start and on C from sequence number 5: both get
    exactly the logged events, in order, each once, and the stream ends with the response."""
    a, b, c = replicas
    started = client_for(a).responses.create(model=MODEL, input=SLOW, background=True)
    from_start, rest = follow_in_thread(b, started.id), follow_in_thread(c, started.id, starting_after=5)
    for thread, _ in (from_start, rest):
        thread.join(timeout=60)
        assert not thread.is_alive()
    logged = raw_stream(a.base_url, {}, path=f"/v1/responses/{started.id}?stream=true", method="GET")
    assert [e["sequence_number"] for e in logged] == list(range(len(logged)))
    assert logged[-1]["type"] == "response.completed"
    assert from_start[1] == logged
    assert rest[1] == logged[6:]
    assert client_for(c).responses.retrieve(started.id).output_text.startswith("This is a slow story")


def test_cancel_and_delete_through_other_replicas(replicas, replica_dsn):
    a, b, c = replicas
    started = client_for(a).responses.create(model=MODEL, input=SLOW, background=True)
    followers = [follow_in_thread(a, started.id), follow_in_thread(c, started.id)]  # in memory; through the store
    wait_until_logged(replica_dsn, started.id, 5)
    assert client_for(b).responses.retrieve(started.id).status == "in_progress"  # as polled on any replica
    cancelled = client_for(b).responses.cancel(started.id)  # B asks; A, which runs it, stops it
    assert cancelled.status == "cancelled"
    assert client_for(c).responses.retrieve(started.id).status == "cancelled"
    for thread, events in followers:  # both ended with the run, stopped mid-story
        thread.join(timeout=30)
        assert not thread.is_alive()
        assert events and all(e["type"] != "response.completed" for e in events)
    assert followers[0][1] == followers[1][1]
    with pytest.raises(BadRequestError):  # no longer running: nothing to cancel
        client_for(c).responses.cancel(started.id)

    running = client_for(a).responses.create(model=MODEL, input=SLOW, background=True)
    wait_until_logged(replica_dsn, running.id, 5)
    assert httpx.get(f"{a.base_url}/health").json()["running"] == 1  # generating on A
    assert client_for(c).responses.delete(running.id) is None  # deleted while A runs it
    for server in replicas:
        with pytest.raises(NotFoundError):
            client_for(server).responses.retrieve(running.id)
    # A stops generating it (its next event write, or lease renewal, finds it gone) and keeps serving.
    deadline = time.monotonic() + 30
    while httpx.get(f"{a.base_url}/health").json()["running"]:
        assert time.monotonic() < deadline, "the deleted response still runs on A"
        time.sleep(0.05)
    assert client_for(a).responses.create(model=MODEL, input="say hello").status == "completed"


def stored(dsn: str, response_id: str) -> tuple[dict, list[dict]]:
    """The response and its event log, read from the database itself."""
    async def read():
        conn = await asyncpg.connect(dsn)
        try:
            body = await conn.fetchval("SELECT body FROM rostra_responses WHERE id = $1", response_id)
            rows = await conn.fetch("SELECT sequence_number, body FROM rostra_events WHERE response_id = $1 "
                                    "ORDER BY sequence_number", response_id)
        finally:
            await conn.close()
        for number, event in rows:
            assert json.loads(event)["sequence_number"] == number
        return json.loads(body), [json.loads(event) for _, event in rows]
    return asyncio.run(read())


def test_kill_the_runner_and_another_replica_fails_it(postgres):
    """A runs a background response, B follows it; A dies by SIGKILL mid-run. Once A's lease expires
    B (not a restart of A) marks the response failed, appends response.failed after the last event A
    logged, and B's follower ends with it. Every event A logged is kept, numbered 0..n-1."""
    dsn = postgres.new_database()
    a, b = replica(dsn), replica(dsn)
    try:
        started = client_for(a).responses.create(model=MODEL, input=SLOW, background=True)
        thread, followed = follow_in_thread(b, started.id)
        wait_until_logged(dsn, started.id, 8)
        a.kill()
        _, logged_before = stored(dsn, started.id)
        thread.join(timeout=60)
        assert not thread.is_alive()

        response, events = stored(dsn, started.id)
        assert response["status"] == "failed" and response["error"]["code"] == "server_error"
        assert "lease expired" in response["error"]["message"]
        assert [e["sequence_number"] for e in events] == list(range(len(events)))
        assert events[:len(logged_before)] == logged_before  # nothing A logged was lost
        assert 3 < len(logged_before) < len(events)
        assert events[-1]["type"] == "response.failed" and events[-1]["response"] == response
        assert followed == events  # B's follower got every event once, in order, and the end
        check_response(httpx.get(f"{b.base_url}/v1/responses/{started.id}").json())
        assert client_for(b).responses.retrieve(started.id).status == "failed"
    finally:
        a.stop()
        b.stop()


def test_conversations_across_replicas(replicas):
    """A conversation created on A is extended by a response through B (concurrently with one through C:
    the appends queue behind each other, none is lost), read on C and deleted through A."""
    a, b, c = replicas
    conversation = client_for(a).conversations.create(items=[{"type": "message", "role": "user", "content": "hi"}])
    threads = [threading.Thread(target=lambda server=server: client_for(server).responses.create(
        model=MODEL, input="count to ten", conversation=conversation.id)) for server in (b, c)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    items = client_for(c).conversations.items.list(conversation.id, order="asc").data
    texts = [part.text for item in items for part in item.content]
    assert texts == ["hi", "count to ten", "one two three four five six seven eight nine ten",
                     "count to ten", "one two three four five six seven eight nine ten"]
    assert client_for(b).conversations.retrieve(conversation.id).id == conversation.id
    client_for(a).conversations.delete(conversation.id)
    with pytest.raises(NotFoundError):
        client_for(c).conversations.retrieve(conversation.id)
