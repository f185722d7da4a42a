"""The seeds' request and response fields (vLLM's and tabbyAPI's), one test per feature row, named after it.

Over real HTTP on the scripted engine (exact outputs), and on the embedded model where the field changes
generation. Bodies and SSE events are validated against the spec and the SDK types (wire.check).
"""

from __future__ import annotations

import pytest

from conftest import scripted, server_fixture
from wire import check, post, stream

MODEL = "scripted"
STOPTEST = "STOPTEST"  # extensions.jsonl answers "alpha beta STOP gamma delta"

seeds_server = server_fixture(*scripted("extensions.jsonl", "--max-model-len", "2048"))


def chat(server, content: str = STOPTEST, **fields) -> dict:
    response = post(server.base_url, "/v1/chat/completions",
                    {"model": MODEL, "messages": [{"role": "user", "content": content}], **fields})
    assert response.status_code == 200, response.text
    return check("chat", response.json())


def completion(server, prompt: str = STOPTEST, **fields) -> dict:
    response = post(server.base_url, "/v1/completions", {"model": MODEL, "prompt": prompt, **fields})
    assert response.status_code == 200, response.text
    return check("completion", response.json())


def token_id(server, text: str) -> int:
    ids = post(server.base_url, "/tokenize", {"model": MODEL, "prompt": text, "add_special_tokens": False}).json()["tokens"]
    assert len(ids) == 1, ids
    return ids[0]


def finishing(chunks: list[dict]) -> list[dict]:
    """The choices of a stream that carry a finish_reason."""
    return [choice for chunk in chunks for choice in chunk["choices"] if choice.get("finish_reason")]


# -- stop_reason (vLLM) and stop_str (tabbyAPI) ----------------------------------------------------

def test_stop_reason_is_the_matched_stop_string(seeds_server):
    for reply in (chat(seeds_server, stop=["nothing", "STOP"])["choices"][0],
                  completion(seeds_server, stop=["nothing", "STOP"])["choices"][0]):
        assert reply["finish_reason"] == "stop"
        assert reply["stop_reason"] == "STOP" and reply["stop_str"] == "STOP"


def test_stop_reason_is_the_stop_token_id(seeds_server):
    gamma = token_id(seeds_server, " gamma")
    for reply in (chat(seeds_server, stop_token_ids=[gamma])["choices"][0],
                  completion(seeds_server, stop_token_ids=[gamma])["choices"][0]):
        assert reply["finish_reason"] == "stop"
        assert reply["stop_reason"] == gamma and reply["stop_str"] == " gamma"


def test_stop_reason_is_null_at_end_of_generation_and_length(seeds_server):
    ended = chat(seeds_server)["choices"][0]
    assert ended["finish_reason"] == "stop" and ended["stop_reason"] is None and ended["stop_str"] is None
    cut = completion(seeds_server, max_tokens=2, stop=["delta"])["choices"][0]
    assert cut["finish_reason"] == "length" and cut["stop_reason"] is None and cut["stop_str"] is None


@pytest.mark.parametrize("path,kind,body", [
    ("/v1/chat/completions", "chat_chunk", {"messages": [{"role": "user", "content": STOPTEST}]}),
    ("/v1/completions", "completion_chunk", {"prompt": STOPTEST}),
])
def test_stop_reason_streamed_on_the_finishing_chunk(seeds_server, path, kind, body):
    chunks = stream(seeds_server.base_url, path, {"model": MODEL, **body, "stop": ["beta"], "n": 2}, kind)
    ends = finishing(chunks)
    assert sorted(choice["index"] for choice in ends) == [0, 1]
    assert all(choice["stop_reason"] == "beta" and choice["stop_str"] == "beta" for choice in ends)
    others = [choice for chunk in chunks for choice in chunk["choices"] if not choice.get("finish_reason")]
    assert others and not any("stop_reason" in choice for choice in others)
