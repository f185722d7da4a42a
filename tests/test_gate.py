"""The one gate (rostra/http/gate.py) in-process: /v1/embeddings, /v1/messages/count_tokens,
/v1/responses/input_tokens, /tokenize and /detokenize take an admission slot before their model lease, as every
generation does; the request's deadline bounds the admission wait, a client that goes away while waiting is dropped
at once and leaves no count behind, and counting never refuses a long prompt."""

from __future__ import annotations

import asyncio

import pytest

from harness import MODEL, InProcessServer

SCRIPT = [{"match": "", "output": "Hello."}]
ROUTES = [
    ("/tokenize", {"model": MODEL, "prompt": "hello there"}),
    ("/detokenize", {"model": MODEL, "tokens": [1, 2, 3]}),
    ("/v1/messages/count_tokens", {"model": MODEL, "messages": [{"role": "user", "content": "hello"}]}),
    ("/v1/responses/input_tokens", {"model": MODEL, "input": "hello"}),
]

GENERATIONS = [
    ("/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}),
    ("/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": True}),
    ("/v1/completions", {"model": MODEL, "prompt": "hi"}),
    ("/v1/responses", {"model": MODEL, "input": "hi"}),
    ("/v1/messages", {"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}),
]


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 30))


def admission(server: InProcessServer):
    return server.app.state.rostra.admission


@pytest.mark.parametrize("path,body", ROUTES)
def test_beyond_the_queue_the_route_gets_a_429_with_retry_after(tmp_path, path, body):
    async def scenario():
        async with InProcessServer(tmp_path, SCRIPT, max_concurrency=1, max_queue=0) as server:
            await admission(server).acquire()  # the one slot: taken
            response = await server.client.post(path, json=body)
            admission(server).release()
            after = await server.client.post(path, json=body)
            return response, after
    response, after = run(scenario())
    assert response.status_code == 429 and "retry-after" in response.headers, response.text
    assert after.status_code == 200, after.text


@pytest.mark.parametrize("path,body", ROUTES + GENERATIONS[:1])
def test_the_deadline_bounds_the_admission_wait(tmp_path, path, body):
    async def scenario():
        async with InProcessServer(tmp_path, SCRIPT, max_concurrency=1, max_queue=4, request_timeout=0.3) as server:
            await admission(server).acquire()
            response = await server.client.post(path, json=body)
            counts = admission(server).running, admission(server).waiting
            admission(server).release()
            return response, counts
    response, counts = run(scenario())
    assert response.status_code == 504, response.text
    assert counts == (1, 0)  # only the slot the test holds


@pytest.mark.parametrize("path,body", ROUTES)
def test_a_client_gone_while_waiting_for_admission_leaves_nothing_behind(tmp_path, path, body):
    async def scenario():
        async with InProcessServer(tmp_path, SCRIPT, max_concurrency=1, max_queue=4) as server:
            await admission(server).acquire()
            exchange = server.call("POST", path, body)
            for _ in range(20):
                await asyncio.sleep(0)
            waiting = admission(server).waiting
            exchange.hang_up()
            await exchange.finished()
            counts = admission(server).running, admission(server).waiting
            admission(server).release()
            return waiting, exchange.status, counts
    waiting, status, counts = run(scenario())
    assert waiting == 1 and status == 499 and counts == (1, 0)


def test_count_tokens_counts_a_prompt_longer_than_the_context(tmp_path):
    async def scenario():
        async with InProcessServer(tmp_path, SCRIPT) as server:
            long = "word " * 6000  # past the harness's 4,096-token context
            return await server.client.post("/v1/messages/count_tokens", json={
                "model": MODEL, "messages": [{"role": "user", "content": long}]})
    response = run(scenario())
    assert response.status_code == 200, response.text
    assert response.json()["input_tokens"] > 4096



@pytest.mark.parametrize("path,body", GENERATIONS)
def test_a_generation_whose_client_goes_away_while_waiting_for_admission_is_dropped_at_once(tmp_path, path, body):
    """No deadline here: only the disconnect can end the wait, and it ends it at once (not when a slot frees)."""
    async def scenario():
        async with InProcessServer(tmp_path, SCRIPT, max_concurrency=1, max_queue=4) as server:
            await admission(server).acquire()  # the one slot: taken, and kept until the end
            exchange = server.call("POST", path, body)
            for _ in range(20):
                await asyncio.sleep(0)
            waiting = admission(server).waiting
            exchange.hang_up()
            await exchange.finished(timeout=5)
            counts = admission(server).running, admission(server).waiting
            admission(server).release()
            after = await server.client.post(path, json=body)  # the server keeps serving
            return waiting, exchange.status, counts, after.status_code
    waiting, status, counts, after = run(scenario())
    assert waiting == 1 and status == 499 and counts == (1, 0) and after == 200


@pytest.mark.parametrize("hang_up_first", [True, False])
@pytest.mark.parametrize("path,body", GENERATIONS[:2] + ROUTES[2:3])
def test_a_hang_up_in_the_loop_turn_its_slot_is_granted_loses_no_slot(tmp_path, path, body, hang_up_first):
    """The slot freed and the client gone in one loop turn, in either order: whether the request is dropped or
    runs and then notices, the slot and the lease come back, and the server serves the next request."""
    async def scenario():
        async with InProcessServer(tmp_path, SCRIPT, max_concurrency=1, max_queue=4) as server:
            await admission(server).acquire()
            exchange = server.call("POST", path, body)
            while admission(server).waiting == 0:
                await asyncio.sleep(0)
            if hang_up_first:
                exchange.hang_up()
                admission(server).release()
            else:
                admission(server).release()
                exchange.hang_up()
            await exchange.finished(timeout=5)
            counts = admission(server).running, admission(server).waiting
            leases = sum(slot.leases for slot in server.app.state.rostra.models.slots)
            after = await server.client.post(path, json=body)
            return counts, leases, after.status_code
    counts, leases, after = run(scenario())
    assert counts == (0, 0) and leases == 0 and after == 200


def slow_prepare(monkeypatch, seconds: float) -> list[str]:
    """Every Chat request's prepare (where images are downloaded, MCP tools listed, upstreams opened) made slow;
    the list records how each ended."""
    from rostra.serving.chat import ChatService

    ended: list[str] = []
    prepare = ChatService.prepare

    async def slow(self, request):
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            ended.append("cancelled")
            raise
        ended.append("prepared")
        return await prepare(self, request)

    monkeypatch.setattr(ChatService, "prepare", slow)
    return ended


@pytest.mark.parametrize("path,body", GENERATIONS[:2])
def test_the_deadline_bounds_prepare(tmp_path, monkeypatch, path, body):
    ended = slow_prepare(monkeypatch, 30)

    async def scenario():
        async with InProcessServer(tmp_path, SCRIPT, request_timeout=0.5) as server:
            started = asyncio.get_running_loop().time()
            response = await server.client.post(path, json=body)
            took = asyncio.get_running_loop().time() - started
            return response, took, admission(server).running, sum(s.leases for s in server.app.state.rostra.models.slots)
    response, took, running, leases = run(scenario())
    assert response.status_code == 504 and took < 5, (response.text, took)
    assert ended == ["cancelled"] and running == 0 and leases == 0


@pytest.mark.parametrize("path,body", GENERATIONS[:2])
def test_a_client_gone_during_prepare_cancels_it_and_frees_its_slot(tmp_path, monkeypatch, path, body):
    ended = slow_prepare(monkeypatch, 30)

    async def scenario():
        async with InProcessServer(tmp_path, SCRIPT, max_concurrency=1) as server:
            exchange = server.call("POST", path, body)
            while admission(server).running == 0:
                await asyncio.sleep(0.01)
            exchange.hang_up()
            await exchange.finished(timeout=5)
            counts = admission(server).running, sum(s.leases for s in server.app.state.rostra.models.slots)
            return exchange.status, counts
    status, counts = run(scenario())
    assert status == 499 and counts == (0, 0) and ended == ["cancelled"]
