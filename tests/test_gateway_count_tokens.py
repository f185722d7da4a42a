"""`count_tokens` on a gateway's model (issue 33): rostra has no tokenizer for an upstream's model, so the
answer is a 501 `count_not_supported` at once, and the upstream never hears of it (before the fix each call
started a full upstream generation that was never closed: 20 calls, 20 generations, and the in-flight counter
stayed up). The upstream is a real HTTP server on loopback that records every request body it is sent; the
gateway runs in-process (tests/harness.py)."""

from __future__ import annotations

import pytest
from anthropic.types import ErrorResponse

from anthropic_wire import no_extras
from harness import InProcessServer
from together_upstream import MODEL, TogetherUpstream

CALLS = 20


@pytest.fixture
def upstream():
    running = TogetherUpstream()
    yield running
    running.stop()


@pytest.mark.anyio
async def test_count_tokens_on_a_gateway_model_is_501_and_never_reaches_the_upstream(tmp_path, upstream):
    async with InProcessServer(tmp_path, [], upstreams=[upstream.v1]) as server:
        body = {"model": MODEL, "messages": [{"role": "user", "content": "How many tokens is this?"}]}
        for _ in range(CALLS):
            answer = await server.client.post("/v1/messages/count_tokens", json=body)
            assert answer.status_code == 501, answer.text
            error = ErrorResponse.model_validate(answer.json())  # Anthropic's envelope, as the SDK reads it
            no_extras(error)
            assert "count its tokens" in error.error.message
        assert upstream.bodies == []  # not one generation (nor any other request) upstream
        health = (await server.client.get("/health")).json()
        assert health["running"] == 0 and [state["outstanding"] for state in health["upstreams"]] == [0]
        assert server.app.state.rostra.admission.running == 0  # each call's admission slot given back
        # The gateway still generates: the one request that reaches the upstream is this one.
        chat = await server.client.post("/v1/chat/completions", json={
            "model": MODEL, "messages": [{"role": "user", "content": "hi"}]})
        assert chat.status_code == 200, chat.text
        assert [sent["messages"] for sent in upstream.bodies] == [[{"role": "user", "content": "hi"}]]
        assert (await server.client.get("/health")).json()["upstreams"][0]["outstanding"] == 0
