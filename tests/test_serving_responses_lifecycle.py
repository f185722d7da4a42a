"""The Responses API's edges, in-process: admission, deadlines and disconnects apply to it as to Chat, and a
response that fails or is followed mid-run keeps a whole, ordered, stored event sequence."""

from __future__ import annotations

import asyncio

import pytest

from harness import MODEL, InProcessServer
from rostra.api.responses.render import ResponseBuilder
from rostra.api.responses.models import CreateResponseRequest
from rostra.api.responses.service import ResponsesService, base_response
from rostra.parsing.events import Text
from rostra.errors import ServerError
from rostra.store.base import StoreError
from test_api_responses import check_response, event_schemas
from spec import validate

SLOW = "a slow answer " * 20  # about 60 tokens at 50 ms each: 3 s, far longer than any test waits for it
SCRIPT = [{"match": "^slow", "output": SLOW, "delay_ms": 50},
          {"match": "^medium", "output": "a medium answer " * 6, "delay_ms": 20},
          {"match": "^quick", "output": "A quick answer."}]


@pytest.fixture
def anyio_backend():
    return "asyncio"


def body(text: str, **fields) -> dict:
    return {"model": MODEL, "input": text, **fields}


def check_events(events: list[dict]) -> None:
    for event in events:
        validate(event_schemas()[event["type"]], event)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))


# -- one path: admission, deadline, disconnect --------------------------------------------------

@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["stream", "plain", "background"])
async def test_max_concurrency_bounds_every_kind_of_response(tmp_path, mode):
    async with InProcessServer(tmp_path, SCRIPT, max_concurrency=1, max_queue=0) as server:
        fields = {"stream": mode == "stream", "background": mode == "background"}
        first = server.call("POST", "/v1/responses", body("slow", **fields))
        if mode == "stream":
            await first.wait_for("output_text.delta")
        else:
            await asyncio.sleep(0.3)  # the first holds the only slot (plain: generating; background: running)
        refused = await server.client.post("/v1/responses", json=body("quick"))
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["type"] == "rate_limit_error"
        if mode == "background":
            response_id = (await first.finished()).json()["id"]
            await server.client.post(f"/v1/responses/{response_id}/cancel")
        else:
            first.hang_up()
            await first.finished()
        served = await server.client.post("/v1/responses", json=body("quick"))
        assert served.status_code == 200, served.text


@pytest.mark.anyio
async def test_request_timeout_ends_a_streamed_response_with_an_error_event_that_is_stored(tmp_path):
    async with InProcessServer(tmp_path, SCRIPT, request_timeout=0.4) as server:
        events = (await server.call("POST", "/v1/responses", body("slow", stream=True)).finished()).events()
        check_events(events)
        assert [e["type"] for e in events[-2:]] == ["error", "response.failed"]
        assert "longer than 0.4 s" in events[-2]["message"]
        failed = events[-1]["response"]
        assert failed["status"] == "failed" and failed["error"]["code"] == "server_error"
        stored = (await server.client.get(f"/v1/responses/{failed['id']}")).json()
        assert check_response(stored)["status"] == "failed"
        replay = (await server.call("GET", f"/v1/responses/{failed['id']}?stream=true").finished()).events()
        assert replay == events


@pytest.mark.anyio
async def test_request_timeout_fails_plain_and_background_responses(tmp_path):
    async with InProcessServer(tmp_path, SCRIPT, request_timeout=0.4) as server:
        plain = await server.client.post("/v1/responses", json=body("slow"))
        assert plain.status_code == 504, plain.text
        queued = (await server.client.post("/v1/responses", json=body("slow", background=True))).json()
        await asyncio.sleep(1.0)
        stored = check_response((await server.client.get(f"/v1/responses/{queued['id']}")).json())
        assert stored["status"] == "failed"
        assert "longer than 0.4 s" in stored["error"]["message"]


@pytest.mark.anyio
async def test_a_plain_response_stops_generating_when_its_client_leaves(tmp_path):
    async with InProcessServer(tmp_path, SCRIPT) as server:
        exchange = server.call("POST", "/v1/responses", body("slow"))
        await asyncio.sleep(0.3)
        assert server.engine.running_requests() == 1
        exchange.hang_up()
        await exchange.finished()
        await asyncio.sleep(0.1)
        assert server.engine.running_requests() == 0


@pytest.mark.anyio
async def test_a_streamed_response_whose_client_leaves_is_stored_as_cancelled(tmp_path):
    async with InProcessServer(tmp_path, SCRIPT) as server:
        exchange = server.call("POST", "/v1/responses", body("slow", stream=True))
        await exchange.wait_for("output_text.delta")
        exchange.hang_up()
        await exchange.finished()
        response_id = exchange.events()[0]["response"]["id"]
        await asyncio.sleep(0.1)
        assert server.engine.running_requests() == 0
        assert (await server.client.get(f"/v1/responses/{response_id}")).json()["status"] == "cancelled"
        # Every event it was sent was stored (in batches), with none missing between them.
        stored = (await server.call("GET", f"/v1/responses/{response_id}?stream=true").finished()).events()
        received = exchange.events()
        assert stored[:len(received)] == received
        assert [e["sequence_number"] for e in stored] == list(range(len(stored)))


# -- events stored in batches: replay and follow see the stream whole --------------------------

@pytest.mark.anyio
async def test_a_stored_stream_is_followed_mid_run_and_replayed_exactly_as_it_was_sent(tmp_path):
    async with InProcessServer(tmp_path, SCRIPT) as server:
        stream = server.call("POST", "/v1/responses", body("medium", stream=True))
        await stream.wait_for("output_text.delta")
        response_id = stream.events()[0]["response"]["id"]
        # A follower that joins mid-run reads the store, where events arrive in batches.
        follower = server.call("GET", f"/v1/responses/{response_id}?stream=true&starting_after=2")
        sent = (await stream.finished()).events()
        check_events(sent)
        assert sent[-1]["type"] == "response.completed"
        assert (await follower.finished()).events() == sent[3:]
        replay = (await server.call("GET", f"/v1/responses/{response_id}?stream=true").finished()).events()
        assert replay == sent
        assert (await server.client.get(f"/v1/responses/{response_id}")).json()["status"] == "completed"


# -- follow(): nothing dropped at the end -----------------------------------------------------

@pytest.mark.anyio
async def test_a_follower_gets_every_event_when_the_run_ends_while_it_reads_the_store(tmp_path):
    async with InProcessServer(tmp_path, SCRIPT) as server:
        queued = (await server.client.post("/v1/responses", json=body("quick", background=True))).json()
        stored_events = server.store.events

        async def events_then_late(response_id, after):
            snapshot = await stored_events(response_id, after)
            runs = server.app.state.rostra.services.get(ResponsesService).runs
            while queued["id"] in runs.live:  # the run ends while the store is read
                await asyncio.sleep(0.01)
            return snapshot

        server.store.events = events_then_late
        events = (await server.call("GET", f"/v1/responses/{queued['id']}?stream=true").finished()).events()
        check_events(events)
        assert events[-1]["type"] == "response.completed"


# -- fail(): closing events kept, the partial item incomplete ----------------------------------

def test_a_failed_response_closes_its_open_item_as_incomplete_without_a_gap():
    builder = ResponseBuilder(base_response(CreateResponseRequest(model="m", input="hi"), []))
    events = [builder.lifecycle("response.created")]
    events += builder.add(0, Text("partial answer"))
    events += builder.fail(ServerError("the engine failed"))
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    kinds = [e["type"] for e in events]
    assert kinds[-5:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "error", "response.failed"]
    assert events[-3]["item"]["status"] == "incomplete"
    assert events[-1]["response"]["output"][0]["status"] == "incomplete"
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == "partial answer"


# -- errors other than cancellation ---------------------------------------------------------------

def break_store_after(server: InProcessServer, good_events: int) -> None:
    """The store's event writes fail (a locked database) once they reach event number `good_events`
    (events are written in batches: the batch holding it fails whole)."""
    append = server.store.append_events

    async def flaky(response_id, events):
        if events[-1]["sequence_number"] >= good_events:
            raise StoreError("database is locked")
        await append(response_id, events)

    server.store.append_events = flaky


@pytest.mark.anyio
async def test_a_background_run_that_hits_a_store_error_ends_failed_and_releases_its_followers(tmp_path):
    async with InProcessServer(tmp_path, SCRIPT) as server:
        break_store_after(server, 3)
        queued = (await server.client.post("/v1/responses", json=body("slow", background=True))).json()
        follower = server.call("GET", f"/v1/responses/{queued['id']}?stream=true")
        await follower.finished(timeout=10)  # before the fix: waits forever
        stored = (await server.client.get(f"/v1/responses/{queued['id']}")).json()
        assert check_response(stored)["status"] == "failed"
        assert "database is locked" in stored["error"]["message"]


@pytest.mark.anyio
async def test_a_stream_that_ends_with_an_exception_is_stored_as_failed_not_cancelled(tmp_path):
    async with InProcessServer(tmp_path, SCRIPT) as server:
        break_store_after(server, 3)
        exchange = await server.call("POST", "/v1/responses", body("quick", stream=True)).finished()
        events = exchange.events()
        assert [e["type"] for e in events[-2:]] == ["error", "response.failed"]
        assert "database is locked" in events[-2]["message"]
        response_id = events[0]["response"]["id"]
        assert (await server.client.get(f"/v1/responses/{response_id}")).json()["status"] == "failed"
