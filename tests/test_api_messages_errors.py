"""The Messages API's refusals as Anthropic words them, and what the anthropic SDK does with them: the threads
beta's fallback (its default tool_runner), unknown `anthropic-beta` values, the parameter a 400 names, tool_result
blocks that answer no tool_use, unknown keys in content blocks."""

from __future__ import annotations

import json

import anthropic
import httpx
import httpx2
import pytest
from anthropic import beta_tool

from anthropic_wire import headers
from conftest import scripted
from servers import RunningServer

KEY = "messages-errors-key"
MODEL = "scripted"


@pytest.fixture(scope="module")
def server():
    server = RunningServer(list(scripted("messages.jsonl", "--tool-call-parser", "hermes", "--api-key", KEY,
                                         "--max-model-len", "4096")), log_level="info")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def client(server) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.base_url, api_key=KEY, max_retries=0)


def post(server, body, extra_headers=None) -> httpx.Response:
    return httpx.post(f"{server.base_url}/v1/messages", json=body, headers={**headers(KEY), **(extra_headers or {})},
                      timeout=60)


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
        anthropic.Anthropic(base_url=server.base_url, api_key=KEY, max_retries=0).messages.create(
            **ask("hello"), extra_body={"thread": {"type": "create"}})
    assert type(raised.value).__name__ == "ThreadUnsupportedRequestError"


def test_the_sdks_default_tool_runner_completes_its_round_trip(server):
    asked, sent = [], []
    recorder = httpx2.Client(event_hooks={"request": [lambda request: sent.append(json.loads(request.read()))]})
    client = anthropic.Anthropic(base_url=server.base_url, api_key=KEY, max_retries=0, http_client=recorder)

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
    replies = list(runner)
    assert asked == ["Oslo"]
    assert replies[0].stop_reason == "tool_use" and replies[-1].stop_reason == "end_turn"
    assert replies[-1].content[0].text == "It is sunny in Oslo."
    # It asked for a thread first, was told threads are unsupported, and went on with the whole conversation.
    assert "thread" in sent[0] and all("thread" not in body for body in sent[1:]) and len(sent) == 3


def test_unknown_beta_values_are_ignored(server):
    answered = post(server, ask("hello"), {"anthropic-beta": "made-up-feature-2099-01-01,another-one"})
    assert answered.status_code == 200 and answered.json()["content"][0]["text"] == "Hello! How can I help?"
