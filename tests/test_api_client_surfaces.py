"""What today's clients ask of the server beyond the core APIs: Codex's model catalog on /v1/models, the WebSocket
handshake on /v1/responses (Codex's WebSocket transport), and OpenAI's input-token count (LiteLLM probes it), over real HTTP
on the scripted engine, checked against the spec and the openai SDK's types."""

from __future__ import annotations

import base64
import os
import socket

import httpx
import pytest
from openai import NotFoundError, OpenAI

from conftest import scripted
from servers import RunningServer
from spec import validate
from test_api_responses import TOOLS, check_response, raw_stream

MODEL = "scripted"


@pytest.fixture(scope="module")
def server():
    running = RunningServer(list(scripted("tools.jsonl", "--tool-call-parser", "hermes", "--max-model-len", "4096")))
    yield running
    running.stop()


@pytest.fixture(scope="module")
def reasoning_server():
    running = RunningServer(list(scripted("reasoning.jsonl", "--reasoning-parser", "qwen3", "--served-model-name",
                                          "thinker", "--max-model-len", "8192")))
    yield running
    running.stop()


def test_plain_model_list_stays_openais(server):
    listing = httpx.get(f"{server.v1}/models").json()
    assert set(listing) == {"object", "data"}
    validate("ListModelsResponse", listing)


def test_codex_catalog_beside_the_list(server, reasoning_server):
    listing = httpx.get(f"{server.v1}/models", params={"client_version": "0.169.0"}).json()
    validate("ListModelsResponse", {"object": listing["object"], "data": listing["data"]})
    [entry] = listing["models"]
    assert entry["slug"] == MODEL and entry["context_window"] == entry["max_context_window"] == 4096
    # The scripted engine sees images (as `[image WxH]`): the catalog says so, as the model's card does.
    assert entry["input_modalities"] == ["text", "image"] and entry["supports_parallel_tool_calls"] is True
    [card] = listing["data"]
    assert card["input_modalities"] == entry["input_modalities"]
    assert entry["supported_reasoning_levels"] == [] and entry["default_reasoning_level"] is None
    assert entry["truncation_policy"] == {"mode": "tokens", "limit": 409}  # a tenth of the context
    assert entry["model_messages"]["instructions_template"].startswith("You are a coding agent")
    [thinker] = httpx.get(f"{reasoning_server.v1}/models", params={"client_version": "0.169.0"}).json()["models"]
    assert thinker["slug"] == "thinker" and thinker["context_window"] == 8192
    assert [level["effort"] for level in thinker["supported_reasoning_levels"]] == ["low", "medium", "high"]
    assert thinker["default_reasoning_level"] == "medium" and thinker["supports_reasoning_summaries"] is True


def websocket_upgrade(port: int, path: str) -> bytes:
    """A raw WebSocket handshake (as Codex's client sends it); the server's answer head."""
    key = base64.b64encode(os.urandom(16)).decode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                            "openai-beta: responses_websockets=2026-02-06\r\n\r\n").encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = connection.recv(4096)
            if not chunk:
                break
            answer += chunk
        return answer


def test_websocket_upgrade_on_responses_is_served(server, auth_server):
    """`rostra serve` takes Codex's WebSocket handshake (the Responses API's WebSocket mode, issue 45; the protocol's
    tests are tests/test_api_responses_websocket.py); with API keys, a handshake without one is a 401."""
    head = websocket_upgrade(server.port, "/v1/responses")
    assert head.startswith(b"HTTP/1.1 101"), head
    assert websocket_upgrade(auth_server.port, "/v1/responses").startswith(b"HTTP/1.1 401")
    # ...and the server goes on serving HTTP.
    assert httpx.get(f"{server.v1}/models").status_code == 200


def test_input_tokens_count_as_the_request_would(server):
    client = OpenAI(base_url=server.v1, api_key="unused")
    plain = client.responses.input_tokens.count(model=MODEL, input="What is the weather in Paris?")
    assert plain.object == "response.input_tokens" and plain.input_tokens > 0
    raw = httpx.post(f"{server.v1}/responses/input_tokens", json={"model": MODEL, "input": "Hi"}).json()
    validate("TokenCountsResource", raw)
    # Instructions are part of the prompt the model reads (and so are tools, where the chat template shows them).
    with_tools = client.responses.input_tokens.count(model=MODEL, input="What is the weather in Paris?", tools=TOOLS)
    instructed = client.responses.input_tokens.count(model=MODEL, input="What is the weather in Paris?",
                                                     instructions="Answer in French, in one short sentence.")
    assert instructed.input_tokens != plain.input_tokens
    # The same count the generation reports, and nothing generated by counting.
    made = client.responses.create(model=MODEL, input="What is the weather in Paris?", tools=TOOLS)
    assert made.usage.input_tokens == with_tools.input_tokens
    # An output budget larger than the context does not matter to a count.
    big = httpx.post(f"{server.v1}/responses/input_tokens",
                     json={"model": MODEL, "input": "What is the weather in Paris?", "max_output_tokens": 10**6})
    assert big.status_code == 200 and big.json()["input_tokens"] == plain.input_tokens


def test_input_tokens_of_a_continued_conversation_include_its_history(server):
    client = OpenAI(base_url=server.v1, api_key="unused")
    first = client.responses.create(model=MODEL, input="Hello there, how are you today?")
    alone = client.responses.input_tokens.count(model=MODEL, input="And tomorrow?").input_tokens
    continued = client.responses.input_tokens.count(model=MODEL, input="And tomorrow?",
                                                    previous_response_id=first.id).input_tokens
    assert continued > alone


def test_input_tokens_errors_are_openais(server):
    client = OpenAI(base_url=server.v1, api_key="unused")
    with pytest.raises(NotFoundError) as caught:
        client.responses.input_tokens.count(model="no-such-model", input="Hi")
    assert caught.value.body["param"] == "model"
    too_long = httpx.post(f"{server.v1}/responses/input_tokens", json={"model": MODEL, "input": "word " * 6000})
    assert too_long.status_code == 400 and too_long.json()["error"]["code"] == "context_length_exceeded"


@pytest.fixture(scope="module")
def aliased_server():
    running = RunningServer(list(scripted("script.jsonl", "--served-model-name", "scripted", "claude-exact",
                                          "--model-alias", "claude-*=scripted", "--model-alias",
                                          "gpt-4?=scripted")))
    yield running
    running.stop()


def test_model_alias_answers_on_every_api(aliased_server):
    base = aliased_server.v1
    chat = httpx.post(f"{base}/chat/completions", json={"model": "gpt-4o", "messages": [
        {"role": "user", "content": "Hello"}]})
    assert chat.status_code == 200 and chat.json()["model"] == "scripted"
    completion = httpx.post(f"{base}/completions", json={"model": "gpt-4o", "prompt": "Hello", "max_tokens": 4})
    assert completion.status_code == 200 and completion.json()["model"] == "scripted"
    response = httpx.post(f"{base}/responses", json={"model": "claude-haiku-4-5", "input": "Hello"})
    assert response.status_code == 200 and response.json()["model"] == "scripted"
    headers = {"anthropic-version": "2023-06-01", "x-api-key": "unused"}
    message = httpx.post(f"{aliased_server.base_url}/v1/messages", headers=headers, json={
        "model": "claude-haiku-4-5-20251001", "max_tokens": 16, "messages": [{"role": "user", "content": "Hello"}]})
    assert message.status_code == 200 and message.json()["model"] == "scripted"
    counted = httpx.post(f"{aliased_server.base_url}/v1/messages/count_tokens", headers=headers, json={
        "model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "Hello"}]})
    assert counted.status_code == 200 and counted.json()["input_tokens"] > 0
    assert httpx.post(f"{base}/responses/input_tokens", json={"model": "gpt-4o", "input": "Hi"}).status_code == 200


def test_model_alias_leaves_served_names_and_others_alone(aliased_server):
    base = aliased_server.v1
    # A served name that matches a pattern is itself (and answers under its own name).
    exact = httpx.post(f"{base}/chat/completions", json={"model": "claude-exact", "messages": [
        {"role": "user", "content": "Hello"}]})
    assert exact.status_code == 200 and exact.json()["model"] == "claude-exact"
    # No pattern matches: still OpenAI's 404 naming the model.
    missing = httpx.post(f"{base}/chat/completions", json={"model": "gpt-4-turbo", "messages": [
        {"role": "user", "content": "Hello"}]})
    assert missing.status_code == 404 and missing.json()["error"]["param"] == "model"
    # /v1/models lists served names only.
    assert [card["id"] for card in httpx.get(f"{base}/models").json()["data"]] == ["scripted", "claude-exact"]


def test_a_malformed_model_alias_stops_the_server_with_a_reason():
    with pytest.raises(RuntimeError, match="expected PATTERN=MODEL"):
        RunningServer(list(scripted("script.jsonl", "--model-alias", "claude-*")), startup_timeout=60)


def test_unknown_anthropic_beta_values_are_ignored(aliased_server):
    """Claude Code sends beta names it invents each month; none of them changes what rostra serves."""
    headers = {"anthropic-version": "2023-06-01", "x-api-key": "unused",
               "anthropic-beta": "claude-code-20250219,made-up-feature-2031-01-01,advanced-tool-use-2025-11-20"}
    message = httpx.post(f"{aliased_server.base_url}/v1/messages?beta=true", headers=headers, json={
        "model": "claude-sonnet-4-5", "max_tokens": 16, "messages": [{"role": "user", "content": "Hello"}]})
    assert message.status_code == 200, message.text
    assert message.json()["type"] == "message"


@pytest.fixture(scope="module")
def compaction_server():
    running = RunningServer(list(scripted("compaction.jsonl", "--reasoning-parser", "qwen3")))
    yield running
    running.stop()


CONVERSATION = [{"role": "user", "content": "Fix the typo in greet.py"},
                {"role": "assistant", "content": "I will look at greet.py."},
                {"role": "user", "content": "It prints helo."}]


def test_a_compaction_trigger_turn_streams_exactly_one_compaction_item(compaction_server):
    events = raw_stream(compaction_server.base_url, {"model": MODEL, "input": [*CONVERSATION,
                                                                               {"type": "compaction_trigger"}]})
    added = [event["item"] for event in events if event["type"] == "response.output_item.added"]
    done = [event["item"] for event in events if event["type"] == "response.output_item.done"]
    assert [item["type"] for item in added] == [item["type"] for item in done] == ["compaction"]
    assert not [event for event in events if "delta" in event["type"]]  # no text, no thinking streamed
    final = events[-1]
    assert final["type"] == "response.completed"
    [item] = final["response"]["output"]
    assert item == done[0] and item["id"].startswith("cmp_")
    assert "helo" not in item["encrypted_content"]  # sealed, as reasoning is
    check_response(final["response"])


def test_a_compaction_given_back_stands_for_the_conversation(compaction_server):
    client = OpenAI(base_url=compaction_server.v1, api_key="unused")
    compacted = client.responses.create(model=MODEL, input=[*CONVERSATION, {"type": "compaction_trigger"}])
    [item] = compacted.output
    assert item.type == "compaction" and compacted.status == "completed"
    # The model reads the summary in place of the conversation (the script answers so only when it sees it).
    following = client.responses.create(model=MODEL, input=[
        {"type": "compaction", "id": item.id, "encrypted_content": item.encrypted_content}])
    assert following.output_text == "Continuing from the summary: replacing helo with hello."


def test_compaction_errors_name_the_item(compaction_server):
    misplaced = httpx.post(f"{compaction_server.v1}/responses", json={
        "model": MODEL, "input": [{"type": "compaction_trigger"}, *CONVERSATION]})
    assert misplaced.status_code == 400 and misplaced.json()["error"]["param"] == "input[0]"
    forged = httpx.post(f"{compaction_server.v1}/responses", json={
        "model": MODEL, "input": [{"type": "compaction", "encrypted_content": "bm90IHNlYWxlZA=="},
                                  {"role": "user", "content": "Go on"}]})
    assert forged.status_code == 400 and forged.json()["error"]["param"] == "input[0].encrypted_content"


# -- POST /v1/responses/compact: the compaction turn as an endpoint of its own (OpenAI's CompactResource) ----------
def test_compact_endpoint_returns_the_user_messages_then_one_compaction_item(compaction_server):
    raw = httpx.post(f"{compaction_server.v1}/responses/compact", json={"model": MODEL, "input": CONVERSATION})
    assert raw.status_code == 200, raw.text
    validate("CompactResource", raw.json())
    compacted = OpenAI(base_url=compaction_server.v1, api_key="unused").responses.compact(
        model=MODEL, input=CONVERSATION)
    assert compacted.object == "response.compaction" and compacted.id.startswith("resp_")
    *users, item = compacted.output
    # The SDK's CompactedResponse.output: "a list of all user messages, followed by a single compaction item".
    assert [(message.role, message.content[0].text) for message in users] == [
        ("user", "Fix the typo in greet.py"), ("user", "It prints helo.")]
    assert item.type == "compaction" and item.id.startswith("cmp_") and "helo" not in item.encrypted_content
    usage = compacted.usage
    assert usage.input_tokens > 0 and usage.output_tokens > 0
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens


def test_compacted_output_is_the_next_requests_input(compaction_server):
    client = OpenAI(base_url=compaction_server.v1, api_key="unused")
    compacted = client.responses.compact(model=MODEL, input=CONVERSATION, instructions="Be brief.")
    window = [item.model_dump(exclude_none=True) for item in compacted.output]
    following = client.responses.create(model=MODEL, input=window, extra_body={"enable_response_messages": True})
    # The script answers so only when the last message it reads is the summary the compaction wrote.
    assert following.output_text == "Continuing from the summary: replacing helo with hello."
    read = [(message["role"], message["content"]) for message in following.model_extra["input_messages"]]
    assert read[:2] == [("user", "Fix the typo in greet.py"), ("user", "It prints helo.")]
    assert read[2][0] == "user" and "The user is fixing a typo in greet.py" in read[2][1]
    assert len(read) == 3  # the assistant's answer is in the summary only


def test_compact_reads_the_stored_conversation_of_previous_response_id(compaction_server):
    client = OpenAI(base_url=compaction_server.v1, api_key="unused")
    first = client.responses.create(model=MODEL, input="Fix the typo in greet.py")
    compacted = client.responses.compact(model=MODEL, previous_response_id=first.id, input="It prints helo.")
    assert [item.type for item in compacted.output] == ["message", "message", "compaction"]
    assert compacted.output[0].content[0].text == "Fix the typo in greet.py"
    from_history_only = client.responses.compact(model=MODEL, previous_response_id=first.id)
    assert [item.type for item in from_history_only.output] == ["message", "compaction"]


def test_compact_errors(compaction_server):
    url = f"{compaction_server.v1}/responses/compact"
    nothing = httpx.post(url, json={"model": MODEL})
    assert nothing.status_code == 400 and nothing.json()["error"]["param"] == "input"
    no_model = httpx.post(url, json={"input": "hi"})
    assert no_model.status_code == 400 and no_model.json()["error"]["param"] == "model"
    unknown = httpx.post(url, json={"model": MODEL, "previous_response_id": "resp_nope"})
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "previous_response_not_found"
    forged = httpx.post(url, json={"model": MODEL, "input": [
        {"type": "compaction", "encrypted_content": "bm90IHNlYWxlZA=="}, {"role": "user", "content": "Go on"}]})
    assert forged.status_code == 400 and forged.json()["error"]["param"] == "input[0].encrypted_content"
    with pytest.raises(NotFoundError):
        OpenAI(base_url=compaction_server.v1, api_key="unused", max_retries=0).responses.compact(
            model="no-such-model", input="hi")
