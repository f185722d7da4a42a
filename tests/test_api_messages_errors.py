"""The Messages API's refusals as Anthropic words them, and what the anthropic SDK does with them: the threads
beta's fallback (its default tool_runner), unknown `anthropic-beta` values, the parameter a 400 names, tool_result
blocks that answer no tool_use, unknown keys in content blocks; the access log's record of each failure. The app
runs in-process (tests/harness.py; its log read from pytest's caplog)."""

from __future__ import annotations

import json
import logging

import anthropic
import httpx
import pytest
from anthropic import beta_tool

from anthropic_wire import headers
from harness import BASE_URL, read_script, served
from servers import DATA

KEY = "messages-errors-key"
MODEL = "scripted"


SCRIPT = read_script(DATA / "messages.jsonl")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with served(tmp_path_factory.mktemp("messages-errors"), SCRIPT, tool_call_parser="hermes", api_keys=[KEY],
                max_model_len=4096) as http:
        yield http


def post(server: httpx.Client, body, extra_headers=None) -> httpx.Response:
    return server.post("/v1/messages", json=body, headers={**headers(KEY), **(extra_headers or {})})


def ask(text, **extra):
    return {"model": MODEL, "max_tokens": 256, "messages": [{"role": "user", "content": text}], **extra}


def test_a_thread_gets_the_error_the_sdk_falls_back_on(server):
    refused = post(server, ask("hello", thread={"type": "create"}),
                   {"anthropic-beta": "message-threads-2026-05-01"})
    assert refused.status_code == 400
    body = refused.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert body["error"]["details"]["error_code"] == "thread_unsupported_request"
    # The SDK maps it to its own class, as it does Anthropic's.
    with pytest.raises(anthropic.BadRequestError) as raised:
        anthropic.Anthropic(base_url=BASE_URL, api_key=KEY, max_retries=0, http_client=server).messages.create(
            **ask("hello"), extra_body={"thread": {"type": "create"}})
    assert type(raised.value).__name__ == "ThreadUnsupportedRequestError"


def test_the_sdks_default_tool_runner_completes_its_round_trip(server):
    asked, sent = [], []
    hooks = server.event_hooks
    server.event_hooks = {"request": [lambda request: sent.append(json.loads(request.read()))], "response": []}
    client = anthropic.Anthropic(base_url=BASE_URL, api_key=KEY, max_retries=0, http_client=server)

    @beta_tool
    def get_weather(city: str, days: int = 1) -> str:
        """The weather in a city.

        Args:
            city: the city
            days: how many days
        """
        asked.append(city)
        return f"It is sunny in {city}."

    runner = client.beta.messages.tool_runner(model=MODEL, max_tokens=256, tools=[get_weather],
                                              messages=[{"role": "user", "content": "weather in Oslo"}])
    try:
        replies = list(runner)
    finally:
        server.event_hooks = hooks
    assert asked == ["Oslo"]
    assert replies[0].stop_reason == "tool_use" and replies[-1].stop_reason == "end_turn"
    assert replies[-1].content[0].text == "It is sunny in Oslo."
    # It asked for a thread first, was told threads are unsupported, and went on with the whole conversation.
    assert "thread" in sent[0] and all("thread" not in body for body in sent[1:]) and len(sent) == 3


def test_unknown_beta_values_are_ignored(server):
    answered = post(server, ask("hello"), {"anthropic-beta": "made-up-feature-2099-01-01,another-one"})
    assert answered.status_code == 200 and answered.json()["content"][0]["text"] == "Hello! How can I help?"


def anthropic_error(response: httpx.Response) -> str:
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    return body["error"]["message"]


def test_a_400_names_the_field_the_client_sent(server):
    assert anthropic_error(post(server, ask("hello", max_tokens=2**31))).startswith("max_tokens:")
    assert anthropic_error(post(server, ask("hello", top_k=2**40))).startswith("top_k:")


USE = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}
TOOLS = [{"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]


def test_a_tool_result_must_answer_a_tool_use_of_the_previous_turn(server):
    def turn(tool_use_id):
        return {"model": MODEL, "max_tokens": 64, "tools": TOOLS, "messages": [
            {"role": "user", "content": "weather in Oslo"},
            {"role": "assistant", "content": [USE]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use_id, "content": "sunny"}]}]}

    assert post(server, turn("toolu_1")).status_code == 200
    message = anthropic_error(post(server, turn("toolu_elsewhere")))
    assert message.startswith("messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: "
                              "toolu_elsewhere.")
    no_call_before = {"model": MODEL, "max_tokens": 64, "messages": [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]}]}
    assert "unexpected `tool_use_id`" in anthropic_error(post(server, no_call_before))


@pytest.mark.parametrize("block,path", [
    ({"type": "text", "text": "hello", "colour": "red"}, "messages[0].content[0].colour"),
    ({"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "x", "shade": 1}]},
     "messages[2].content[0].content[0].shade"),
])
def test_unknown_keys_in_content_blocks_are_a_400(server, block, path):
    messages = [{"role": "user", "content": [block]}]
    if block["type"] == "tool_result":
        messages = [{"role": "user", "content": "weather"}, {"role": "assistant", "content": [USE]}, *messages]
    message = anthropic_error(post(server, {"model": MODEL, "max_tokens": 64, "tools": TOOLS, "messages": messages}))
    assert message.startswith(path) and "Unrecognized request argument" in message
    unknown_in_message = [{"role": "user", "content": "hello", "mood": "good"}]
    assert anthropic_error(post(server, {"model": MODEL, "max_tokens": 64, "messages": unknown_in_message})
                           ).startswith("messages[0].mood")


def access_records(caplog: pytest.LogCaptureFixture) -> list[dict]:
    """The access log's warning lines (failures)."""
    return [json.loads(record.getMessage()) for record in caplog.records
            if record.name == "rostra.requests" and record.levelno == logging.WARNING]


def test_every_error_is_logged_for_the_operator_without_secrets(server, caplog):
    caplog.set_level(logging.INFO)
    chat = server.post("/v1/chat/completions", headers={"authorization": f"Bearer {KEY}"},
                       json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "temperature": 7})
    assert chat.status_code == 400
    post(server, ask("hello", top_k=2**40))
    post(server, ask("hello", thread={"type": "create"}))
    server.post("/v1/chat/completions", headers={"authorization": "Bearer wrong-key-42"}, json={})
    records = access_records(caplog)
    temperature = next(r for r in records if r.get("error", {}).get("param") == "temperature")
    assert temperature["status"] == 400 and temperature["error"]["type"] == "invalid_request_error"
    assert "temperature" in temperature["error"]["message"] and "body" not in temperature  # bodies: only if asked
    top_k = next(r for r in records if r.get("error", {}).get("param") == "top_k")
    assert top_k["route"] == "/v1/messages"
    assert any(r["status"] == 401 and r["error"]["code"] == "invalid_api_key" for r in records)
    thread = next(r for r in records if r.get("error", {}).get("param") == "thread")
    assert thread["error"]["code"] == "thread_unsupported_request"
    log = caplog.text
    assert KEY not in log and "wrong-key-42" not in log


def test_request_bodies_are_logged_when_asked_with_keys_redacted(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    with served(tmp_path, SCRIPT, api_keys=[KEY], log_request_bodies=True) as logged:
        body = {"model": MODEL, "input": "hi", "tools": [
            {"type": "mcp", "server_label": "x", "server_url": "https://example.com/mcp", "authorization": "tok-99",
             "headers": {"X-Secret": "hdr-77"}}], "api_key": "sk-inline-55", "temperature": 9}
        refused = logged.post("/v1/responses", json=body, headers={"authorization": f"Bearer {KEY}"})
        assert refused.status_code == 400
    record = next(r for r in access_records(caplog) if r["route"] == "/v1/responses")
    assert record["body"]["input"] == "hi" and record["body"]["api_key"] == "[redacted]"
    assert record["body"]["tools"][0]["authorization"] == "[redacted]"
    for secret in ("tok-99", "hdr-77", "sk-inline-55", KEY):
        assert secret not in caplog.text
