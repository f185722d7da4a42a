"""--response-role (vLLM's): the role of the generated Chat Completions message, and vLLM's rule for a continued
message (add_generation_prompt false): the answer keeps the last message's role. In-process, scripted engine."""

from __future__ import annotations

import json

import pytest
from harness import MODEL, served

SAY_HELLO = [{"match": "^say hello$", "output": "Hello there"}]


def roles(http, body: dict) -> tuple[str, list[str]]:
    """The whole answer's message role, and the role deltas of the same request streamed."""
    whole = http.post("/v1/chat/completions", json=body)
    assert whole.status_code == 200, whole.text
    streamed = http.post("/v1/chat/completions", json={**body, "stream": True})
    chunks = [json.loads(line[6:]) for line in streamed.text.splitlines()
              if line.startswith("data: ") and line != "data: [DONE]"]
    deltas = [choice["delta"]["role"] for chunk in chunks for choice in chunk["choices"] if "role" in choice["delta"]]
    return whole.json()["choices"][0]["message"]["role"], deltas


@pytest.mark.parametrize("configured", [None, "bot"])
def test_new_turn_takes_the_configured_role(tmp_path, configured):
    settings = {"response_role": configured} if configured else {}
    with served(tmp_path, SAY_HELLO, **settings) as http:
        body = {"model": MODEL, "messages": [{"role": "user", "content": "say hello"}], "n": 2}
        expected = configured or "assistant"
        assert roles(http, body) == (expected, [expected, expected])  # one role delta per choice, first


def test_continued_message_keeps_its_own_role(tmp_path):
    with served(tmp_path, SAY_HELLO, response_role="bot") as http:
        for last in ("assistant", "user"):
            body = {"model": MODEL, "add_generation_prompt": False,
                    "messages": [{"role": "system", "content": "be brief"}, {"role": last, "content": "say hello"}]}
            assert roles(http, body) == (last, [last])


def test_messages_api_keeps_its_vendors_role(tmp_path):
    with served(tmp_path, SAY_HELLO, response_role="bot") as http:
        answer = http.post("/v1/messages", json={"model": MODEL, "max_tokens": 20,
                                                 "messages": [{"role": "user", "content": "say hello"}]})
        assert answer.status_code == 200, answer.text
        assert answer.json()["role"] == "assistant"
