"""The Responses API over HTTP through the scripted engine, with the openai SDK and raw checks."""

import json
import time
from functools import lru_cache

import httpx
import pytest
from openai import NotFoundError, OpenAI
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from servers import DATA, RunningServer
from spec import validate
from test_api_tools import TOOLS as CHAT_TOOLS

MODEL = "scripted"
TOOLS = [{"type": "function", **tool["function"]} for tool in CHAT_TOOLS]
STREAM_EVENT = TypeAdapter(ResponseStreamEvent)


@lru_cache(maxsize=1)
def event_schemas() -> dict[str, str]:
    """Event type -> its component schema, from the spec's ResponseStreamEvent union."""
    spec = json.loads((__import__("spec").SPEC_PATH).read_text())["components"]["schemas"]
    out = {}
    for ref in spec["ResponseStreamEvent"]["anyOf"]:
        name = ref["$ref"].split("/")[-1]
        for kind in spec[name]["properties"]["type"].get("enum", []):
            out[kind] = name
    return out


def check_response(body: dict) -> dict:
    validate("Response", body)
    Response.model_validate(body, strict=True)
    return body


def raw_stream(base_url: str, body: dict, path: str = "/v1/responses", method: str = "POST",
               headers: dict[str, str] | None = None) -> list[dict]:
    events = []
    kwargs = {"json": {**body, "stream": True}} if method == "POST" else {}
    with httpx.stream(method, f"{base_url}{path}", timeout=60, headers=headers, **kwargs) as response:
        assert response.status_code == 200, response.read()
        name = None
        for line in response.iter_lines():
            if line.startswith("event: "):
                name = line[len("event: "):]
            elif line.startswith("data: "):
                event = json.loads(line[len("data: "):])
                assert event["type"] == name
                validate(event_schemas()[event["type"]], event)
                STREAM_EVENT.validate_python(event, strict=True)
                events.append(event)
    numbers = [e["sequence_number"] for e in events]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
    return events


def client_for(server) -> OpenAI:
    return OpenAI(base_url=f"{server.base_url}/v1", api_key="x", max_retries=0)


def test_text_response_stream_equals_non_stream(scripted_server):
    client = client_for(scripted_server)
    created = client.responses.create(model=MODEL, input="say hello", instructions="Be kind.")
    assert created.status == "completed" and created.output_text == "Hello! How can I help you today?"
    raw = httpx.post(f"{scripted_server.base_url}/v1/responses", json={"model": MODEL, "input": "say hello"}).json()
    check_response(raw)
    check_response(httpx.get(f"{scripted_server.base_url}/v1/responses/{raw['id']}").json())
    with client.responses.stream(model=MODEL, input="say hello") as stream:
        for _ in stream:
            pass
        final = stream.get_final_response()
    assert final.output_text == created.output_text and final.status == "completed"
    assert final.usage.output_tokens == created.usage.output_tokens
    events = raw_stream(scripted_server.base_url, {"model": MODEL, "input": "say hello"})
    kinds = [e["type"] for e in events]
    assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.completed"]
    check_response(events[-1]["response"])


def test_retrieve_input_items_delete(scripted_server):
    client = client_for(scripted_server)
    created = client.responses.create(model=MODEL, input=[
        {"role": "developer", "content": "brief"}, {"role": "user", "content": "say hello"}])
    again = client.responses.retrieve(created.id)
    assert again.output_text == created.output_text
    items = client.responses.input_items.list(created.id, order="asc")
    assert [i.role for i in items.data] == ["developer", "user"]
    page = httpx.get(f"{scripted_server.base_url}/v1/responses/{created.id}/input_items?limit=1").json()
    validate("ResponseItemList", page)
    assert page["has_more"] and page["data"][0]["role"] == "user"
    client.responses.delete(created.id)
    with pytest.raises(NotFoundError):
        client.responses.retrieve(created.id)


def test_store_false_keeps_nothing(scripted_server):
    client = client_for(scripted_server)
    created = client.responses.create(model=MODEL, input="say hello", store=False)
    with pytest.raises(NotFoundError):
        client.responses.retrieve(created.id)


def test_errors(scripted_server):
    base = scripted_server.base_url
    for response, status in [
        (httpx.get(f"{base}/v1/responses/resp_nope"), 404),
        (httpx.post(f"{base}/v1/responses/resp_nope/cancel"), 404),
        (httpx.delete(f"{base}/v1/responses/resp_nope"), 404),
        (httpx.post(f"{base}/v1/responses", json={"model": MODEL, "input": []}), 400),
        (httpx.post(f"{base}/v1/responses", json={"model": MODEL, "input": [{"type": "bogus"}]}), 400),
        (httpx.post(f"{base}/v1/responses", json={"model": "nope", "input": "x"}), 404),
        (httpx.post(f"{base}/v1/responses", json={"model": MODEL, "input": "x", "previous_response_id": "resp_x"}), 404),
        (httpx.post(f"{base}/v1/responses", json={"model": MODEL, "input": "x", "background": True, "store": False}),
         400),
    ]:
        assert response.status_code == status, response.text
        validate("ErrorResponse", response.json())
    done = client_for(scripted_server).responses.create(model=MODEL, input="say hello")
    refused = httpx.post(f"{base}/v1/responses/{done.id}/cancel")
    assert refused.status_code == 400


def test_unknown_previous_response_is_previous_response_not_found(scripted_server):
    # The spec's code for it; Open Responses' WebSocket reconnect test reads it.
    response = httpx.post(f"{scripted_server.base_url}/v1/responses",
                          json={"model": MODEL, "input": "x", "previous_response_id": "resp_gone"})
    assert response.status_code == 404
    error = response.json()["error"]
    assert (error["code"], error["param"]) == ("previous_response_not_found", "previous_response_id")


def test_function_calls_and_the_tool_loop(tools_server):
    client = client_for(tools_server)
    first = client.responses.create(model=MODEL, input="two cities", tools=TOOLS)
    calls = [item for item in first.output if item.type == "function_call"]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("get_weather", {"city": "Oslo", "days": 2}), ("get_weather", {"city": 'Zürich "Nord"'})]
    check_response(httpx.get(f"{tools_server.base_url}/v1/responses/{first.id}").json())
    with client.responses.stream(model=MODEL, input="two cities", tools=TOOLS) as stream:
        for _ in stream:
            pass
        streamed = stream.get_final_response()
    assert [(i.name, i.arguments) for i in streamed.output if i.type == "function_call"] == \
        [(c.name, c.arguments) for c in calls]
    # The tool loop: outputs for both calls, chained to the first response through the store.
    second = client.responses.create(model=MODEL, previous_response_id=first.id, tools=TOOLS, input=[
        {"type": "function_call_output", "call_id": c.call_id, "output": '{"sky": "sunny"}'} for c in calls])
    assert second.output_text == "It is sunny in Oslo."
    assert second.previous_response_id == first.id


def test_reasoning_items(reasoning_server):
    client = client_for(reasoning_server)
    created = client.responses.create(model=MODEL, input="think then answer", reasoning={"effort": "low"})
    kinds = [item.type for item in created.output]
    assert kinds == ["reasoning", "message"]
    assert created.output[0].content[0].text == "\nI should add two and two.\n"
    assert created.output_text == "2 + 2 = 4."
    assert created.usage.output_tokens_details.reasoning_tokens > 0
    events = raw_stream(reasoning_server.base_url, {"model": MODEL, "input": "think then answer"})
    assert "response.reasoning_text.delta" in {e["type"] for e in events}
    assert events[-1]["response"]["output"] == [
        {**item, "id": event_item["id"]} for item, event_item in
        zip(created.model_dump(mode="json", exclude_none=True)["output"], events[-1]["response"]["output"])]


def test_max_output_tokens_is_incomplete(scripted_server):
    created = client_for(scripted_server).responses.create(model=MODEL, input="count to ten", max_output_tokens=3)
    assert created.status == "incomplete" and created.incomplete_details.reason == "max_output_tokens"


def test_background_follow_and_cancel(scripted_server):
    client = client_for(scripted_server)
    started = client.responses.create(model=MODEL, input="count to ten", background=True)
    assert started.status in ("queued", "in_progress")
    events = raw_stream(scripted_server.base_url, {}, path=f"/v1/responses/{started.id}?stream=true", method="GET")
    assert events[-1]["type"] == "response.completed"
    replay = raw_stream(scripted_server.base_url, {},
                        path=f"/v1/responses/{started.id}?stream=true&starting_after=3", method="GET")
    assert replay == events[4:]
    assert client.responses.retrieve(started.id).output_text == "one two three four five six seven eight nine ten"
    slow = client.responses.create(model=MODEL, input="slow story", background=True)
    time.sleep(0.5)
    cancelled = client.responses.cancel(slow.id)
    assert cancelled.status == "cancelled"
    assert client.responses.retrieve(slow.id).status == "cancelled"


def test_store_survives_a_restart(tmp_path):
    args = ["--engine", "scripted", "--script", str(DATA / "script.jsonl")]
    server = RunningServer(args, data_dir=str(tmp_path))
    try:
        client = client_for(server)
        kept = client.responses.create(model=MODEL, input="say hello")
        running = client.responses.create(model=MODEL, input="slow story", background=True)
        time.sleep(0.3)
    finally:
        server.process.kill()  # no graceful shutdown: the background response is in flight
        server.process.wait()
    server = RunningServer(args, data_dir=str(tmp_path))
    try:
        client = client_for(server)
        assert client.responses.retrieve(kept.id).output_text == "Hello! How can I help you today?"
        interrupted = client.responses.retrieve(running.id)
        assert interrupted.status == "failed" and interrupted.error.code == "server_error"
    finally:
        server.stop()


def test_include_output_logprobs(scripted_server):
    body = {"model": MODEL, "input": "count to ten", "include": ["message.output_text.logprobs"], "top_logprobs": 1}
    raw = check_response(httpx.post(f"{scripted_server.base_url}/v1/responses", json=body).json())
    part = raw["output"][0]["content"][0]
    assert len(part["logprobs"]) == raw["usage"]["output_tokens"]
    assert "".join(bytes(t["bytes"]).decode() for t in part["logprobs"]) == part["text"]
    events = raw_stream(scripted_server.base_url, body)
    streamed = [t for e in events if e["type"] == "response.output_text.delta" for t in e["logprobs"]]
    assert streamed == part["logprobs"]


# Every Response object carries these keys (Open Responses' schema requires them): the request's value or its default.
ECHOED = {"presence_penalty": 0.5, "frequency_penalty": -0.25, "top_logprobs": 2, "service_tier": "auto",
          "safety_identifier": "safety-1", "prompt_cache_key": "cache-1", "max_tool_calls": 3, "truncation": "auto",
          "instructions": "Be kind.", "metadata": {"k": "v"}, "parallel_tool_calls": False, "temperature": 0.5,
          "top_p": 0.9, "max_output_tokens": 64, "user": "user-1", "tool_choice": "none", "tools": TOOLS[:1],
          "store": True, "text": {"format": {"type": "text"}}, "reasoning": {"effort": "low", "summary": None}}
DEFAULTS = {"presence_penalty": 0, "frequency_penalty": 0, "top_logprobs": 0, "service_tier": "default",
            "safety_identifier": None, "prompt_cache_key": None, "max_tool_calls": None, "truncation": "disabled",
            "instructions": None, "metadata": {}, "parallel_tool_calls": True, "max_output_tokens": None,
            "previous_response_id": None, "tool_choice": "auto", "tools": [], "store": True, "background": False,
            "text": {"format": {"type": "text"}}, "reasoning": {"effort": None, "summary": None},
            "incomplete_details": None, "error": None}
REQUIRED_KEYS = set(DEFAULTS) | {"temperature", "top_p", "usage"}


def check_echo(response: dict, sent: dict) -> None:
    assert REQUIRED_KEYS <= response.keys(), REQUIRED_KEYS - response.keys()
    for key, default in DEFAULTS.items():
        expected = sent.get(key, default)
        if key == "service_tier":  # "auto" is served by rostra's one tier, which the response names
            expected = "default"
        if key == "tools":
            assert [tool["name"] for tool in response["tools"]] == [tool["name"] for tool in expected]
        else:
            assert response[key] == expected, key
    for key in ("temperature", "top_p", "user"):
        if key in sent:
            assert response[key] == sent[key], key


@pytest.mark.parametrize("sent", [{}, ECHOED], ids=["defaults", "echoed"])
def test_response_objects_carry_every_field(scripted_server, sent):
    base = scripted_server.base_url
    body = {"model": MODEL, "input": "say hello", **sent}
    created = check_response(httpx.post(f"{base}/v1/responses", json=body).json())
    check_echo(created, sent)
    assert created["usage"] is not None
    check_echo(check_response(httpx.get(f"{base}/v1/responses/{created['id']}").json()), sent)
    events = raw_stream(base, body)
    snapshots = [event["response"] for event in events if "response" in event]
    assert [event["type"] for event in events if "response" in event][:2] == ["response.created",
                                                                           "response.in_progress"]
    for snapshot in snapshots:
        check_echo(snapshot, sent)
    assert snapshots[0]["usage"] is None and snapshots[1]["usage"] is None and snapshots[-1]["usage"] is not None
    background = {**sent, "background": True}
    started = check_response(httpx.post(f"{base}/v1/responses", json={**body, "background": True}).json())
    check_echo(started, background)
    for _ in range(100):
        done = check_response(httpx.get(f"{base}/v1/responses/{started['id']}").json())
        if done["status"] not in ("queued", "in_progress"):
            break
        time.sleep(0.05)
    assert done["status"] == "completed"
    check_echo(done, background)
