"""The error-envelope registry (rostra/http/envelopes.py): what refuses a request before its route runs (the key and
body-size middleware, an unknown path or method) answers in the envelope of the API whose path it is. The HTTP layer
names no API: Messages registers Anthropic's envelope for /v1/messages at start-up."""

from __future__ import annotations

import asyncio

import anthropic
import httpx2
import pytest

from harness import MODEL, InProcessServer
from rostra.errors import NotFound, Unauthorized
from rostra.http.envelopes import ErrorEnvelopes, openai_envelope
from wire import check_error

KEY = "envelope-key"
SCRIPT = [{"match": "", "output": "Hello."}]
ASK = {"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}


def anthropic_envelope(error, request_id=None):
    return {"type": "error", "error": {"type": "x", "message": error.message}, "request_id": request_id}


def test_a_path_takes_the_envelope_of_its_longest_registered_prefix():
    envelopes = ErrorEnvelopes()
    envelopes.register("/v1/messages", anthropic_envelope)
    envelopes.register("/v1/messages/batches/", openai_envelope)
    assert envelopes.envelope("/v1/messages") is anthropic_envelope
    assert envelopes.envelope("/v1/messages/count_tokens") is anthropic_envelope
    assert envelopes.envelope("/v1/messages/batches/b1") is openai_envelope
    assert envelopes.envelope("/v1/messagesX") is openai_envelope  # a prefix of the path's words, not its letters
    assert envelopes.body("/v1/models", NotFound("gone"))["error"]["message"] == "gone"
    assert envelopes.body("/v1/messages", Unauthorized(), "req_1")["request_id"] == "req_1"


def call(tmp_path, requests):
    async def scenario():
        async with InProcessServer(tmp_path, SCRIPT, api_keys=[KEY], max_body_bytes=2_000) as server:
            return [await server.client.request(method, path, **kwargs) for method, path, kwargs in requests]
    return asyncio.run(asyncio.wait_for(scenario(), 60))


def test_refusals_before_a_messages_route_runs_are_in_anthropics_envelope(tmp_path):
    key = {"x-api-key": KEY}
    no_key, too_large, unknown, wrong_method, chat_no_key, chat_unknown = call(tmp_path, [
        ("POST", "/v1/messages/count_tokens", {"json": ASK}),
        ("POST", "/v1/messages", {"json": {**ASK, "system": "x" * 3_000}, "headers": key}),
        ("GET", "/v1/messages/nothing", {"headers": key}),
        ("GET", "/v1/messages", {"headers": key}),
        ("POST", "/v1/chat/completions", {"json": {}}),
        ("GET", "/v1/nothing", {"headers": {"authorization": f"Bearer {KEY}"}}),
    ])
    for response, status, kind in ((no_key, 401, "authentication_error"), (too_large, 413, "request_too_large"),
                                   (unknown, 404, "not_found_error"), (wrong_method, 405, "invalid_request_error")):
        body = response.json()
        assert response.status_code == status and body["type"] == "error", response.text
        assert body["error"]["type"] == kind and body["request_id"] == response.headers["x-request-id"]
    check_error(chat_no_key, 401)  # the other APIs keep OpenAI's
    check_error(chat_unknown, 404)


def test_anthropics_sdk_reads_the_middlewares_refusals_as_its_own_errors(tmp_path):
    async def scenario():
        async with InProcessServer(tmp_path, SCRIPT, api_keys=[KEY], max_body_bytes=2_000) as server:
            transport = httpx2.ASGITransport(app=server.app)  # the SDK's own HTTP library, over the app in-process

            def sdk(key: str) -> anthropic.AsyncAnthropic:
                return anthropic.AsyncAnthropic(base_url="http://rostra", api_key=key, max_retries=0,
                                                http_client=httpx2.AsyncClient(transport=transport))
            with pytest.raises(anthropic.AuthenticationError) as wrong_key:
                await sdk("wrong").messages.create(**ASK)
            with pytest.raises(anthropic.APIStatusError) as too_large:
                await sdk(KEY).messages.create(**{**ASK, "system": "x" * 3_000})
            return wrong_key.value, too_large.value
    wrong_key, too_large = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert wrong_key.body["error"]["type"] == "authentication_error"
    assert too_large.status_code == 413 and too_large.body["error"]["type"] == "request_too_large"


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/chat/completions"])
def test_the_access_log_names_the_refusals_code_whatever_the_envelope(tmp_path, path, caplog):
    caplog.set_level("WARNING", logger="rostra.requests")
    (response,) = call(tmp_path, [("POST", path, {"json": {}})])
    assert response.status_code == 401
    assert any('"code": "invalid_api_key"' in record.message for record in caplog.records)
