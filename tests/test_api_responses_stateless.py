"""Stateless clients of the Responses API: encrypted reasoning items (`store: false` with
`include: ["reasoning.encrypted_content"]`), OpenAI-shaped reasoning input items, `include` checks and
`truncation: "auto"`.

The server's chat template renders an assistant turn's reasoning into the prompt, so the prompt's size
(usage.input_tokens) shows whether the reasoning a client sent back reached the model, and whole.
"""

import base64

import httpx
import pytest

from conftest import scripted
from servers import RunningServer
from test_api_responses import check_response, raw_stream

MODEL = "scripted"
TEMPLATE = ("{%- for m in messages -%}<|{{ m.role }}|>{% if m.reasoning_content %}<think>{{ m.reasoning_content }}"
            "</think>{% endif %}{{ m.content }}\n{% endfor -%}{% if add_generation_prompt %}<|assistant|>{% endif %}")
ENCRYPTED = ["reasoning.encrypted_content"]
THOUGHT = "\nI should add two and two.\n"


@pytest.fixture(scope="module")
def server():
    running = RunningServer(list(scripted("reasoning.jsonl", "--reasoning-parser", "qwen3", "--chat-template",
                                          TEMPLATE, "--max-model-len", "400")))
    yield running
    running.stop()


def post(server, body: dict) -> httpx.Response:
    return httpx.post(f"{server.base_url}/v1/responses", json={"model": MODEL, **body}, timeout=60)


def follow_up(reasoning: dict | None) -> list[dict]:
    """The conversation a stateless client sends back: its question, the reasoning item, the answer, a new question."""
    return [{"role": "user", "content": "think then answer"}, *([reasoning] if reasoning else []),
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "2 + 2 = 4."}]},
            {"role": "user", "content": "no thinking"}]


def test_encrypted_reasoning_round_trip(server):
    first = check_response(post(server, {"input": "think then answer", "store": False, "include": ENCRYPTED}).json())
    reasoning = first["output"][0]
    assert reasoning["type"] == "reasoning" and reasoning["content"][0]["text"] == THOUGHT
    sealed = reasoning["encrypted_content"]
    assert isinstance(sealed, str) and THOUGHT.strip() not in base64.b64decode(sealed).decode("latin-1")
    assert httpx.get(f"{server.base_url}/v1/responses/{first['id']}").status_code == 404  # nothing stored
    events = raw_stream(server.base_url, {"model": MODEL, "input": "think then answer", "store": False,
                                          "include": ENCRYPTED})
    done = [e["item"] for e in events if e["type"] == "response.output_item.done" and e["item"]["type"] == "reasoning"]
    assert done and done[0]["encrypted_content"]
    without = post(server, {"input": "think then answer"}).json()["output"][0]
    assert "encrypted_content" not in without  # only when asked for

    # Sent back as OpenAI's clients send it (id, empty summary, the sealed content): the model reads the thought.
    opaque = {"type": "reasoning", "id": reasoning["id"], "summary": [], "encrypted_content": sealed}
    in_clear = {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": THOUGHT}]}
    summarized = {"type": "reasoning", "summary": [{"type": "summary_text", "text": THOUGHT}]}
    tokens = {name: check_response(post(server, {"input": follow_up(item), "store": False}).json())
              ["usage"]["input_tokens"] for name, item in
              [("sealed", opaque), ("clear", in_clear), ("summary", summarized), ("none", None)]}
    assert tokens["sealed"] == tokens["clear"] == tokens["summary"] > tokens["none"]
    answer = post(server, {"input": follow_up(opaque), "store": False}).json()
    assert answer["output"][-1]["content"][0]["text"] == "Plain answer."
    # Stored as sent (sealed), it is opened again when a later request continues the chain.
    chained = {}
    for name, item in [("sealed", opaque), ("clear", in_clear)]:
        stored = post(server, {"input": follow_up(item)}).json()
        chained[name] = post(server, {"input": "no thinking", "previous_response_id": stored["id"]}).json()
    assert chained["sealed"]["usage"]["input_tokens"] == chained["clear"]["usage"]["input_tokens"]

    altered = sealed[:-6] + ("AAAAAA" if not sealed.endswith("AAAAAA") else "BBBBBB")
    refused = post(server, {"input": follow_up({**opaque, "encrypted_content": altered}), "store": False})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "input[1].encrypted_content"
    assert post(server, {"input": follow_up({**opaque, "encrypted_content": "not base64!"})}).status_code == 400


def test_the_key_lives_in_the_data_dir_or_comes_from_a_flag(tmp_path):
    key = base64.b64encode(bytes(range(32))).decode()
    args = list(scripted("reasoning.jsonl", "--reasoning-parser", "qwen3"))
    first = RunningServer(args + ["--reasoning-key", key])
    try:
        sealed = post(first, {"input": "think then answer", "store": False, "include": ENCRYPTED}).json()
    finally:
        first.stop()
    item = {"type": "reasoning", "summary": [], "encrypted_content": sealed["output"][0]["encrypted_content"]}
    other = RunningServer(args, data_dir=str(tmp_path))  # its own key, made in its data directory
    try:
        assert post(other, {"input": follow_up(item), "store": False}).status_code == 400
        assert (tmp_path / "reasoning.key").stat().st_mode & 0o077 == 0  # readable by its owner only
    finally:
        other.stop()
    again = RunningServer(args + ["--reasoning-key", key])  # the same key: another process opens it
    try:
        assert post(again, {"input": follow_up(item), "store": False}).status_code == 200
    finally:
        again.stop()


def test_include_values(server):
    refused = post(server, {"input": "no thinking", "include": ["reasoning.everything"]})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "include[0]"
    accepted = post(server, {"input": "no thinking", "include": ["web_search_call.results", *ENCRYPTED]})
    assert accepted.status_code == 200  # OpenAI's values for tools rostra has not change nothing


def test_truncation_auto_drops_the_oldest_items(server):
    long_turns = []
    for number in range(12):
        long_turns += [{"role": "user", "content": f"question {number}: " + "tell me more " * 8},
                       {"role": "assistant", "content": f"answer {number}: " + "here is more " * 8}]
    conversation = long_turns + [{"role": "user", "content": "no thinking"}]
    refused = post(server, {"input": conversation})
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "context_length_exceeded"
    created = check_response(post(server, {"input": conversation, "truncation": "auto"}).json())
    assert created["status"] == "completed" and created["truncation"] == "auto"
    assert created["output"][-1]["content"][0]["text"] == "Plain answer."
    dropped = created["truncated_items"]
    assert 0 < dropped < len(conversation) and dropped % 2 == 0  # whole turns: it starts at a user message
    assert created["usage"]["input_tokens"] <= 400
    kept = check_response(post(server, {"input": conversation[dropped:]}).json())
    assert kept["usage"]["input_tokens"] == created["usage"]["input_tokens"]  # exactly that much was dropped
