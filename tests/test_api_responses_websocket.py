"""The Responses API over WebSocket (issue 45), driven by the official SDK's `client.responses.connect()`
(openai-python 3.57) against a real uvicorn server on a real socket: the scripted engine in this process (so a
test can look at what the server holds), and the embedded model behind `rostra serve`.

The protocol is OpenAI's WebSocket mode (its guide, and the SDK's ResponsesClientEvent / ResponsesServerEvent
types): `response.create` in, the stream events out in order, many turns on one connection, a connection-local
cache for `store: false` continuations, `response.steer`, errors as `error` events on an open connection."""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

import openai
import pytest
import uvicorn
from openai import OpenAI
from openai.types.responses.responses_server_event import ResponseWsError

from harness import MODEL, InProcessServer
from rostra.api_keys import ApiKey, KeyLimits
from servers import free_port
from spec import validate
from test_api_responses import STREAM_EVENT, event_schemas, raw_stream

KEY, OTHER_KEY = "ws-key-1", "ws-key-2"
EMBEDDED = "SmolLM2-135M-Instruct"
SLOW = "one two three four five six seven eight nine ten eleven twelve"
SCRIPT = [
    {"match": "^count slowly", "output": SLOW, "delay_ms": 120},
    {"match": "weather", "output": "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}"
                                   "</tool_call>", "first_token_delay_ms": 400},  # a steer sent at response.created
]                                                                    # finds it running
WEATHER = [{"type": "function", "name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]


class LiveServer:
    """The in-process app behind a real uvicorn on a free port, in a thread (a WebSocket needs a real socket)."""

    def __init__(self, directory, script: list[dict], **settings: Any):
        self.inner = InProcessServer(directory, script, **settings)
        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(self.inner.app, host="127.0.0.1", port=self.port,
                                                    log_level="warning", lifespan="on",
                                                    ws="websockets-sansio"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> "LiveServer":
        self.thread.start()
        deadline = time.monotonic() + 180  # a model's load included, on a busy machine
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "uvicorn did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)

    def client(self, key: str = KEY) -> OpenAI:
        return OpenAI(base_url=f"http://127.0.0.1:{self.port}/v1", api_key=key, max_retries=0)

    def held(self) -> tuple[int, int]:
        """Admission slots taken and model leases held, now."""
        context = self.inner.app.state.rostra
        return context.admission.running, sum(slot.leases for slot in context.models.slots)


@pytest.fixture
def live(tmp_path) -> Iterator[LiveServer]:
    with LiveServer(tmp_path, SCRIPT, api_keys=[KEY, OTHER_KEY], max_concurrency=2) as server:
        yield server


def checked(event) -> dict:
    """A server event as the wire had it, checked against the spec's stream event schema and the SDK's type."""
    body = event.to_dict()
    if body["type"] == "error":  # the WebSocket's own shape (status, an error object), not SSE's flat one
        ResponseWsError.model_validate(body, strict=True)
    elif body["type"] in event_schemas():
        on_wire = {name: value for name, value in body.items() if name != "stream_id"}  # WebSocket-only field
        validate(event_schemas()[body["type"]], on_wire)
        STREAM_EVENT.validate_python(on_wire, strict=True)
    return body


def until(connection, *kinds: str) -> list[dict]:
    """The events up to and including the first of `kinds`."""
    events = []
    for event in connection:
        events.append(checked(event))
        if event.type in kinds:
            return events
    raise AssertionError("the connection closed")


def turn(connection, **request: Any) -> list[dict]:
    connection.response.create(**{"model": MODEL, **request})
    return until(connection, "response.completed", "response.failed", "response.incomplete", "error")


def final(events: list[dict]) -> dict:
    assert events[-1]["type"] == "response.completed", events[-1]
    return events[-1]["response"]


def text_of(response: dict) -> str:
    return "".join(part["text"] for item in response["output"] if item["type"] == "message"
                   for part in item["content"])


def test_sequential_turns_and_a_store_false_continuation(live):
    with live.client().responses.connect() as connection:
        first = turn(connection, input="hello there", store=False)
        kinds = [event["type"] for event in first]
        assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                             "response.content_part.added"]
        assert kinds[-3:] == ["response.content_part.done", "response.output_item.done", "response.completed"]
        numbers = [event["sequence_number"] for event in first]
        assert numbers == list(range(len(first)))
        assert text_of(final(first)) == "hello there"
        # The very events of the SSE stream (ids, times and usage aside).
        sse = raw_stream(f"http://127.0.0.1:{live.port}", {"model": MODEL, "input": "hello there", "store": False},
                         headers={"Authorization": f"Bearer {KEY}"})
        assert [event["type"] for event in sse] == kinds
        assert [event.get("delta") for event in sse] == [event.get("delta") for event in first]
        alone = final(turn(connection, input="and then?", store=False))
        continued = final(turn(connection, input="and then?", store=False, previous_response_id=final(first)["id"]))
        # The continuation read the first turn from the connection's cache: its prompt holds both turns.
        assert continued["previous_response_id"] == final(first)["id"]
        assert continued["usage"]["input_tokens"] > alone["usage"]["input_tokens"]
        assert text_of(continued) == "and then?"
    # Not stored: HTTP does not know it.
    with pytest.raises(openai.NotFoundError):
        live.client().responses.retrieve(final(first)["id"])


def test_a_reconnect_loses_the_cache_but_not_the_store(live):
    with live.client().responses.connect() as connection:
        unstored = final(turn(connection, input="remember me", store=False))
        stored = final(turn(connection, input="keep me", store=True))
    with live.client().responses.connect() as connection:
        events = turn(connection, input="again", store=False, previous_response_id=unstored["id"])
        error = events[-1]
        assert error["type"] == "error" and error["error"]["code"] == "previous_response_not_found"
        assert error["error"]["param"] == "previous_response_id" and error["status"] == 404
        # The connection stays open: a stored response continues as over HTTP.
        continued = final(turn(connection, input="again", previous_response_id=stored["id"]))
        assert continued["previous_response_id"] == stored["id"]


def test_a_failed_continuation_evicts_its_parent(live):
    with live.client().responses.connect() as connection:
        parent = final(turn(connection, input="a parent", store=False))
        orphan = [{"type": "function_call_output", "call_id": "call_nowhere", "output": "42"}]
        error = turn(connection, input=orphan, store=False, previous_response_id=parent["id"])[-1]
        assert error["type"] == "error" and error["status"] == 400 and error["error"]["param"] == "input"
        again = turn(connection, input="retry", store=False, previous_response_id=parent["id"])[-1]
        assert again["type"] == "error" and again["error"]["code"] == "previous_response_not_found"


def test_a_bad_event_is_an_error_event_and_the_connection_serves_on(live):
    with live.client().responses.connect() as connection:
        connection.send_raw(json.dumps({"type": "response.cancel"}))
        assert until(connection, "error")[-1]["error"]["code"] == "unknown_event_type"
        connection.send_raw("not json")
        assert until(connection, "error")[-1]["status"] == 400
        connection.response.create(model=MODEL, input="x", temperature="hot")  # type: ignore[arg-type]
        error = until(connection, "error")[-1]
        assert error["status"] == 400 and error["error"]["param"] == "temperature"
        connection.response.create(model=MODEL, input="x", background=True)
        assert until(connection, "error")[-1]["error"]["param"] == "background"
        assert text_of(final(turn(connection, input="still here"))) == "still here"


def test_lanes_run_side_by_side_and_a_warm_up_generates_nothing(live):
    with live.client().responses.connect() as connection:
        connection.response.create(model=MODEL, input="count slowly", store=False, stream_id="slow")
        connection.response.create(model=MODEL, input="quick", store=False, stream_id="quick")
        events = until(connection, "response.completed")
        assert events[-1]["stream_id"] == "quick" and text_of(events[-1]["response"]) == "quick"
        assert {event["stream_id"] for event in events} == {"slow", "quick"}  # interleaved, each labelled
        slow = until(connection, "response.completed")[-1]
        assert slow["stream_id"] == "slow" and text_of(slow["response"]) == SLOW
        # generate: false prepares a turn (stored here) that a later turn continues, without running the model.
        warm = final(turn(connection, input="You will be asked to echo.", generate=False, store=True))
        assert warm["output"] == [] and warm["usage"]["output_tokens"] == 0
        continued = final(turn(connection, input="echo this", previous_response_id=warm["id"]))
        alone = final(turn(connection, input="echo this"))
        assert continued["usage"]["input_tokens"] > alone["usage"]["input_tokens"]
    assert live.client().responses.retrieve(warm["id"]).status == "completed"


def test_steering_queues_input_for_an_automatic_successor(live):
    with live.client().responses.connect() as connection:
        connection.response.create(model=MODEL, input="count slowly", store=False)
        created = until(connection, "response.created")[-1]["response"]
        until(connection, "response.output_text.delta")
        connection.response.steer(input="and now say this", previous_response_id=created["id"])
        events = until(connection, "response.completed")
        accepted = [event for event in events if event["type"] == "response.steer.accepted"]
        assert len(accepted) == 1 and accepted[0]["steer"]["previous_response_id"] == created["id"]
        assert text_of(events[-1]["response"]) == SLOW  # the turn under way finished
        successor = until(connection, "response.created")[-1]["response"]
        assert successor["previous_response_id"] == created["id"]
        done = final(until(connection, "response.completed"))
        assert text_of(done) == "and now say this"
        # Steering what has ended, or what never ran here, is refused with the SDK's codes.
        connection.response.steer(input="late", previous_response_id=created["id"])
        failed = until(connection, "response.steer.failed")[-1]
        assert failed["error"]["code"] == "response_already_completed" and failed["steer"]["input"] == "late"
        connection.response.steer(input="lost", previous_response_id="resp_nowhere")
        assert until(connection, "response.steer.failed")[-1]["error"]["code"] == "response_not_found"


def test_steering_waits_for_the_clients_tool_results(live):
    with live.client().responses.connect() as connection:
        connection.response.create(model=MODEL, input="count slowly", store=False)
        created = until(connection, "response.created")[-1]["response"]
        connection.send_raw(json.dumps({"type": "response.steer", "previous_response_id": created["id"],
                                        "input": [{"role": "assistant", "content": "not a user"}]}))
        refused = until(connection, "response.steer.failed")[-1]
        assert refused["error"]["code"] == "invalid_input" and "id" not in refused["steer"]
        until(connection, "response.completed")
        connection.response.create(model=MODEL, input="weather please", tools=WEATHER, store=False)
        created = until(connection, "response.created")[-1]["response"]
        connection.response.steer(input="in Celsius", previous_response_id=created["id"])
        events = until(connection, "response.steer.pending")
        call = next(event["item"] for event in events if event["type"] == "response.output_item.done")
        pending = events[-1]
        assert pending["required_input"] == [{"type": "function_call_output", "call_id": call["call_id"],
                                              "name": "get_weather"}]
        results = [{"type": "function_call_output", "call_id": call["call_id"], "output": "12 C"}]
        continued = final(turn(connection, input=results, tools=WEATHER, store=False,
                               previous_response_id=created["id"]))
        assert continued["previous_response_id"] == created["id"]


def test_a_bad_key_is_refused_at_the_upgrade(live):
    with pytest.raises(Exception) as refused:
        with live.client("wrong-key").responses.connect() as connection:
            connection.response.create(model=MODEL, input="hi")
            until(connection, "response.completed")
    assert "401" in str(refused.value)


def test_a_connection_acts_as_its_keys_tenant(live):
    with live.client().responses.connect() as connection:
        mine = final(turn(connection, input="mine", store=True))
    with live.client(OTHER_KEY).responses.connect() as connection:
        error = turn(connection, input="theirs", previous_response_id=mine["id"])[-1]
        assert error["type"] == "error" and error["error"]["code"] == "previous_response_not_found"
        theirs = final(turn(connection, input="theirs", store=True))
    with pytest.raises(openai.NotFoundError):
        live.client().responses.retrieve(theirs["id"])
    assert live.client(OTHER_KEY).responses.retrieve(theirs["id"]).status == "completed"


def test_each_turn_is_a_request_of_its_keys_limits(tmp_path):
    """Key limits (issue 48) count each `response.create` as a request, as a POST would be, not the connection: an
    open connection holds no place under max_concurrent, and a turn past rpm gets a 429 error event with its
    Retry-After while the connection stays open for what comes next."""
    details = [ApiKey(KEY, "team", KeyLimits(rpm=2, max_concurrent=1))]
    with LiveServer(tmp_path, SCRIPT, api_keys=[KEY], api_key_details=details) as server:
        with server.client().responses.connect() as connection:
            assert final(turn(connection, input="first"))["status"] == "completed"
            # The connection stays open and holds nothing: the key's one concurrent request may be a POST now.
            assert server.client().responses.create(model=MODEL, input="second").status == "completed"
            for _ in range(2):
                refused = turn(connection, input="third")[-1]
                assert refused["type"] == "error" and refused["status"] == 429, refused
                assert refused["error"]["code"] == "rate_limit_exceeded", refused
                assert int(refused["error"]["headers"]["Retry-After"]) >= 1, refused


def test_a_client_that_vanishes_mid_turn_leaves_nothing_held(live):
    connection = live.client().responses.connect().enter()
    connection.response.create(model=MODEL, input="count slowly", store=True)
    created = until(connection, "response.created")[-1]["response"]
    until(connection, "response.output_text.delta")
    assert live.held() == (1, 1)
    connection.close()
    deadline = time.monotonic() + 10
    while live.held() != (0, 0):
        assert time.monotonic() < deadline, f"still held: {live.held()}"
        time.sleep(0.05)
    # The stored response says the client left, as an HTTP stream's does.
    assert live.client().responses.retrieve(created["id"]).status == "cancelled"


def test_the_embedded_model_over_websocket(tmp_path):
    """The embedded model (SmolLM2 on llama.cpp): two turns on one connection, the second continuing the first
    from the connection's cache."""
    with LiveServer(tmp_path, [], engine="llamacpp", max_model_len=2048, parallel=1) as server:
        client = server.client("unused")
        with client.responses.connect() as connection:
            first = turn(connection, model=EMBEDDED, input="Say hello.", max_output_tokens=12, temperature=0,
                         store=False)[-1]
            assert first["type"] in ("response.completed", "response.incomplete"), first
            first = first["response"]
            assert first["usage"]["output_tokens"] > 0 and text_of(first)
            second = turn(connection, model=EMBEDDED, input="Again.", max_output_tokens=12, temperature=0,
                          store=False, previous_response_id=first["id"])[-1]
            assert second["type"] in ("response.completed", "response.incomplete"), second
            assert second["response"]["previous_response_id"] == first["id"]
            assert second["response"]["usage"]["input_tokens"] > first["usage"]["input_tokens"]
