"""Anthropic's Messages API through the `anthropic` SDK (and raw HTTP for the wire), on the scripted engine.

The script (tests/data/messages.jsonl) writes what Qwen3-style models emit: `<think>` thinking and Hermes
`<tool_call>` markup (the format of Qwen2.5/Qwen3's chat templates), read by the same parsers as Chat
Completions. Every body and stream event is checked against the SDK's types (anthropic_wire.py).

The app runs in-process (tests/harness.py: the sync SDK over starlette's TestClient); one smoke goes through a
real `rostra serve` over loopback, and the prefix-cache test through the embedded model's real server.
"""

from __future__ import annotations

import copy

import anthropic
import httpx
import pytest

from anthropic_wire import check_count, check_message, event_sequence, headers, sse_events
from harness import BASE_URL, read_script, served
from servers import DATA

KEY = "messages-key"
MODEL = "scripted"
WEATHER = {"name": "get_weather", "description": "The weather in a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                            "required": ["city"]}}


SCRIPT = read_script(DATA / "messages.jsonl")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with served(tmp_path_factory.mktemp("messages"), SCRIPT, reasoning_parser="qwen3", tool_call_parser="hermes",
                api_keys=[KEY], max_model_len=4096) as http:
        yield http


@pytest.fixture(scope="module")
def client(server) -> anthropic.Anthropic:
    client = anthropic.Anthropic(base_url=BASE_URL, api_key=KEY, max_retries=0, http_client=server)
    client._server = server  # type: ignore[attr-defined]
    return client


def post(server: httpx.Client, body, path="/v1/messages", key=KEY) -> httpx.Response:
    return server.post(path, json=body, headers=headers(key))


def ask(text, **extra):
    return {"model": MODEL, "max_tokens": 2048, "messages": [{"role": "user", "content": text}], **extra}


def fold(events):
    """The stream's Message as a client rebuilds it: the SDK's own accumulator."""
    from anthropic.lib.streaming._messages import accumulate_event
    from anthropic.types import RawMessageStreamEvent
    from pydantic import TypeAdapter

    adapter, snapshot, buffers = TypeAdapter(RawMessageStreamEvent), None, {}
    for event in events:
        if event["type"] != "ping":
            snapshot = accumulate_event(event=adapter.validate_python(event), current_snapshot=snapshot,
                                        json_bufs=buffers)
    return snapshot


def comparable(message: dict) -> dict:
    """A Message without what differs by construction between two runs (ids, signatures' nonces)."""
    message = copy.deepcopy(message)
    message.pop("id")
    for block in message["content"]:
        block.pop("id", None)
        block.pop("signature", None)
    return message


# -- create and stream -------------------------------------------------------------------------------
@pytest.mark.parametrize("text,request_extra", [
    ("hello", {}),
    ("think then answer", {"thinking": {"type": "enabled", "budget_tokens": 1024}}),
    ("weather in Oslo", {"tools": [WEATHER]}),
    ("think then call", {"tools": [WEATHER], "thinking": {"type": "enabled", "budget_tokens": 1024}}),
    ("two cities", {"tools": [WEATHER]}),
    ("count to five", {"stop_sequences": ["four"]}),
])
def test_stream_is_the_anthropic_sequence_and_folds_into_create(server, text, request_extra):
    body = ask(text, **request_extra)
    whole = post(server, body)
    assert whole.status_code == 200, whole.text
    message = check_message(whole.json())
    events = sse_events(BASE_URL, body, KEY, server)
    sequence = event_sequence(events)
    assert sequence[0] == "message_start" and sequence[-2:] == ["message_delta", "message_stop"]
    assert sequence[1:3] == ["content_block_start", "ping"] and sequence.count("ping") == 1
    streamed = fold(events)
    assert comparable(streamed.model_dump(mode="json", exclude_none=True)) == \
        comparable(message.model_dump(mode="json", exclude_none=True))
    # every block: start, its deltas, stop, with increasing indexes
    opened = [e["index"] for e in events if e["type"] == "content_block_start"]
    assert opened == list(range(len(message.content)))
    assert [e["index"] for e in events if e["type"] == "content_block_stop"] == opened
    assert events[0]["message"]["content"] == [] and events[0]["message"]["stop_reason"] is None


def test_text_answer(client):
    message = client.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "hello"}])
    assert [block.type for block in message.content] == ["text"]
    assert message.content[0].text == "Hello! How can I help?"
    assert message.stop_reason == "end_turn" and message.stop_sequence is None
    assert message.id.startswith("msg_") and message.role == "assistant" and message.model == MODEL
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0
    assert message.usage.cache_read_input_tokens == 0 and message.usage.cache_creation_input_tokens == 0


def test_sdk_stream_helpers(client):
    with client.messages.stream(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "hello"}]) as stream:
        texts = list(stream.text_stream)
        final = stream.get_final_message()
    assert "".join(texts) == "Hello! How can I help?" and len(texts) > 1
    assert final.content[0].text == "Hello! How can I help?" and final.stop_reason == "end_turn"
    assert final.usage.output_tokens > 0


def test_system_prompt_string_blocks_and_system_role_count_alike(server, client):
    """`system` as a string, as text blocks, or as `role: "system"` messages: the same prompt."""
    as_string = check_count(post(server, {"model": MODEL, "system": "Be brief.\nBe kind.",
                                          "messages": [{"role": "user", "content": "hello"}]},
                                 "/v1/messages/count_tokens").json())
    as_blocks = client.messages.count_tokens(model=MODEL, system=[{"type": "text", "text": "Be brief."},
                                                                  {"type": "text", "text": "Be kind.",
                                                                   "cache_control": {"type": "ephemeral"}}],
                                             messages=[{"role": "user", "content": "hello"}]).input_tokens
    as_messages = check_count(post(server, {"model": MODEL, "system": "Be brief.", "messages": [
        {"role": "system", "content": "Be kind."}, {"role": "user", "content": "hello"}]},
        "/v1/messages/count_tokens").json())
    bare = client.messages.count_tokens(model=MODEL, messages=[{"role": "user", "content": "hello"}]).input_tokens
    assert as_string == as_blocks == as_messages != bare  # (bare: the template's default system prompt)


def test_count_tokens_is_what_create_bills(client):
    request = {"model": MODEL, "system": "You answer questions about weather.", "tools": [WEATHER],
               "messages": [{"role": "user", "content": "weather in Oslo"},
                            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                                               "input": {"city": "Oslo"}}]},
                            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                                          "content": [{"type": "text", "text": "sunny, 21 C"}]}]}]}
    counted = client.messages.count_tokens(**request).input_tokens
    message = client.messages.create(max_tokens=64, **request)
    assert counted == message.usage.input_tokens + message.usage.cache_read_input_tokens
    assert message.content[0].text == "It is sunny in Oslo."


# -- tools ---------------------------------------------------------------------------------------------
def test_tool_round_trip(client):
    messages = [{"role": "user", "content": "What is the weather in Oslo?"}]
    first = client.messages.create(model=MODEL, max_tokens=128, tools=[WEATHER], messages=messages)
    assert first.stop_reason == "tool_use"
    assert [block.type for block in first.content] == ["text", "tool_use"]
    assert first.content[0].text == "Let me check.\n"
    call = first.content[1]
    assert call.id.startswith("toolu_") and call.name == "get_weather" and call.input == {"city": "Oslo"}
    messages += [{"role": "assistant", "content": first.content},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "sunny"}]}]
    second = client.messages.create(model=MODEL, max_tokens=128, tools=[WEATHER], messages=messages)
    assert second.content[0].text == "It is sunny in Oslo." and second.stop_reason == "end_turn"


def test_tool_result_error_and_blocks_reach_the_model(client):
    messages = [{"role": "user", "content": "weather in Oslo"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_9", "name": "get_weather",
                                                   "input": {"city": "Oslo"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "is_error": True,
                                              "content": [{"type": "text", "text": "no network"}]}]}]
    echoed = client.messages.create(model=MODEL, max_tokens=64, tools=[WEATHER], messages=messages)
    assert echoed.content[0].text == "Error: no network"  # no script line matches: the engine echoes the result


def test_parallel_calls_and_disable_parallel_tool_use(client):
    both = client.messages.create(model=MODEL, max_tokens=256, tools=[WEATHER],
                                  messages=[{"role": "user", "content": "two cities"}])
    assert [(b.name, b.input) for b in both.content] == [("get_weather", {"city": "Oslo", "days": 2}),
                                                         ("get_weather", {"city": 'Zürich "Nord"'})]
    one = client.messages.create(model=MODEL, max_tokens=256, tools=[WEATHER],
                                 tool_choice={"type": "auto", "disable_parallel_tool_use": True},
                                 messages=[{"role": "user", "content": "two cities"}])
    assert [(b.name, b.input) for b in one.content] == [("get_weather", {"city": "Oslo", "days": 2})]


@pytest.mark.parametrize("choice,city", [({"type": "any"}, "Paris"), ({"type": "tool", "name": "get_weather"}, "Rome")])
def test_forced_tool_choice(client, choice, city):
    text = "any tool please" if choice["type"] == "any" else "named tool please"
    message = client.messages.create(model=MODEL, max_tokens=128, tools=[WEATHER], tool_choice=choice,
                                     messages=[{"role": "user", "content": text}])
    assert message.stop_reason == "tool_use"
    assert [(b.type, b.name, b.input) for b in message.content] == [("tool_use", "get_weather", {"city": city})]


def test_tool_choice_none_leaves_markup_as_text(client):
    message = client.messages.create(model=MODEL, max_tokens=128, tools=[WEATHER], tool_choice={"type": "none"},
                                     messages=[{"role": "user", "content": "weather in Oslo"}])
    assert [b.type for b in message.content] == ["text"] and message.stop_reason == "end_turn"


def test_deferred_tools_stay_out_of_the_prompt_until_referenced(client):
    deferred = {**WEATHER, "defer_loading": True}
    base = dict(model=MODEL, messages=[{"role": "user", "content": "hello"}])
    without = client.messages.count_tokens(**base).input_tokens
    assert client.messages.count_tokens(tools=[deferred], **base).input_tokens == without
    message = client.messages.create(max_tokens=128, tools=[deferred], model=MODEL,
                                     messages=[{"role": "user", "content": "weather in Oslo"}])
    assert [b.type for b in message.content] == ["text"]  # not loaded: its call is not a call
    loaded = [{"role": "user", "content": "find the weather tool"},
              {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_s", "name": "search", "input": {}}]},
              {"role": "user", "content": [
                  {"type": "tool_result", "tool_use_id": "toolu_s",
                   "content": [{"type": "tool_reference", "tool_name": "get_weather"}]},
                  {"type": "text", "text": "weather in Oslo"}]}]
    search = {"name": "search", "input_schema": {"type": "object"}}
    message = client.messages.create(max_tokens=128, tools=[search, deferred], model=MODEL, messages=loaded)
    assert [b.type for b in message.content] == ["text", "tool_use"]


# -- thinking ---------------------------------------------------------------------------------------------
THINKING = {"type": "enabled", "budget_tokens": 1024}


def test_thinking_block_signed_and_accepted_back(client):
    first = client.messages.create(model=MODEL, max_tokens=2048, thinking=THINKING,
                                   messages=[{"role": "user", "content": "think then answer"}])
    assert [b.type for b in first.content] == ["thinking", "text"]
    thinking = first.content[0]
    assert thinking.thinking == "\nI should add two and two.\n" and thinking.signature
    assert first.content[1].text == "2 + 2 = 4."
    assert first.usage.output_tokens_details.thinking_tokens > 0
    history = [{"role": "user", "content": "think then answer"}, {"role": "assistant", "content": first.content},
               {"role": "user", "content": "hello"}]
    again = client.messages.create(model=MODEL, max_tokens=2048, thinking=THINKING, messages=history)
    assert again.content[-1].text == "Hello! How can I help?"
    tampered = copy.deepcopy(first.content[0].model_dump())
    tampered["thinking"] = "I should lie."
    with pytest.raises(anthropic.BadRequestError) as error:
        client.messages.create(model=MODEL, max_tokens=2048, thinking=THINKING, messages=[
            history[0], {"role": "assistant", "content": [tampered, first.content[1]]}, history[2]])
    assert error.value.body["error"]["type"] == "invalid_request_error"
    assert "messages[1].content[0].thinking" in error.value.body["error"]["message"]
    forged = {**first.content[0].model_dump(), "signature": "c2lnbmVk"}
    with pytest.raises(anthropic.BadRequestError, match="signature"):
        client.messages.create(model=MODEL, max_tokens=2048, thinking=THINKING, messages=[
            history[0], {"role": "assistant", "content": [forged]}, history[2]])


def test_thinking_display_omitted_keeps_it_in_the_signature(server, client):
    """Claude Code asks for `display: omitted`: empty thinking, the signature only; sent back, the model
    sees its thinking again (the signature holds it)."""
    thinking = {**THINKING, "display": "omitted"}
    body = ask("think then answer", max_tokens=2048, thinking=thinking)
    events = sse_events(BASE_URL, body, KEY, server)
    assert "thinking_delta" not in event_sequence(events)
    message = fold(events)
    assert message.content[0].type == "thinking" and message.content[0].thinking == "" and message.content[0].signature
    history = [{"role": "user", "content": "think then answer"}, {"role": "assistant", "content": message.content},
               {"role": "user", "content": "hello"}]
    shown = client.messages.count_tokens(model=MODEL, thinking=thinking, messages=history).input_tokens
    visible = client.messages.create(model=MODEL, max_tokens=2048, thinking=THINKING,
                                     messages=[{"role": "user", "content": "think then answer"}])
    same = client.messages.count_tokens(model=MODEL, thinking=thinking, messages=[
        history[0], {"role": "assistant", "content": visible.content}, history[2]]).input_tokens
    assert shown == same  # the omitted thinking is back in the prompt


def test_thinking_disabled_is_all_answer(client):
    message = client.messages.create(model=MODEL, max_tokens=256, thinking={"type": "disabled"},
                                     messages=[{"role": "user", "content": "think then answer"}])
    assert [b.type for b in message.content] == ["text"] and message.content[0].text.startswith("<think>")


# -- stop reasons ------------------------------------------------------------------------------------------
def test_stop_sequence(client):
    message = client.messages.create(model=MODEL, max_tokens=64, stop_sequences=["four", "zzz"],
                                     messages=[{"role": "user", "content": "count to five"}])
    assert message.stop_reason == "stop_sequence" and message.stop_sequence == "four"
    assert message.content[0].text == "one, two, three, "


def test_max_tokens(client):
    message = client.messages.create(model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "a long story"}])
    assert message.stop_reason == "max_tokens" and message.usage.output_tokens == 5


def test_max_tokens_beyond_the_context_is_cut_to_it(client):
    """Claude Code asks for 32000 tokens whatever the model: the answer runs into the context instead."""
    response = post(client._server, ask("hello", max_tokens=32000))  # (the SDK wants a stream for that many)
    assert response.status_code == 200 and check_message(response.json()).stop_reason == "end_turn"


def test_prefilled_answer_is_continued(client):
    message = client.messages.create(model=MODEL, max_tokens=64, messages=[
        {"role": "user", "content": "hello"}, {"role": "assistant", "content": "Hello"}])
    assert message.content[0].type == "text" and message.stop_reason == "end_turn"


def test_structured_output(client):
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
              "required": ["name", "age"], "additionalProperties": False}
    message = client.messages.create(model=MODEL, max_tokens=64, output_config={"format": {"type": "json_schema",
                                                                                         "schema": schema}},
                                     messages=[{"role": "user", "content": "json please"}])
    assert message.content[0].text == '{"name": "Ada", "age": 36}'


# -- Claude Code's request, and errors -----------------------------------------------------------------------
def claude_code_request(nonce: str) -> dict:
    """The fields Claude Code 2.1.330 sends (captured from the client), trimmed to a small prompt."""
    return {"model": MODEL, "max_tokens": 32000, "stream": True,
            "metadata": {"user_id": '{"device_id":"d","account_uuid":"","session_id":"s"}'},
            "thinking": {"budget_tokens": 31999, "type": "enabled", "display": "omitted"},
            "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
            "system": [{"type": "text", "text": f"x-anthropic-billing-header: cc_version=2.1.330.{nonce}; "
                                                "cc_entrypoint=sdk-cli;"},
                       {"type": "text", "text": "You are a Claude agent, built on Anthropic's Claude Agent SDK.",
                        "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "<system-reminder>x</system-reminder>"},
                                                      {"type": "text", "text": "hello",
                                                       "cache_control": {"type": "ephemeral"}}]}],
            "tools": [{**WEATHER, "input_schema": {"$schema": "https://json-schema.org/draft/2020-12/schema",
                                                   **WEATHER["input_schema"]}},
                      {"name": "DeferredToolPlaceholder", "description": "placeholder", "defer_loading": True,
                       "input_schema": {"type": "object", "properties": {}}}]}


def test_claude_code_request_is_served(server):
    response = server.post("/v1/messages?beta=true", json=claude_code_request("572"),
                           headers={**headers(KEY), "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14",
                                   "x-app": "cli"})
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    assert "event: message_stop" in response.text


def test_attribution_line_does_not_change_the_prompt(server):
    counts = {check_count(post(server, {k: v for k, v in claude_code_request(nonce).items()
                                        if k not in ("max_tokens", "stream", "metadata")},
                               "/v1/messages/count_tokens").json()) for nonce in ("572", "9f1", "a0c")}
    assert len(counts) == 1


@pytest.mark.parametrize("body,status,kind,words", [
    ({"model": MODEL, "messages": [{"role": "user", "content": "hello"}]}, 400, "invalid_request_error", "max_tokens"),
    (ask("hello", frequency_penalty=1), 400, "invalid_request_error", "frequency_penalty"),
    (ask("hello", model="claude-opus-9"), 404, "not_found_error", "claude-opus-9"),
    ({**ask("x"), "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]}]},
     400, "invalid_request_error", "image"),
    (ask("hello", thinking={"type": "enabled", "budget_tokens": 100}), 400, "invalid_request_error", "budget_tokens"),
    (ask("hello", tools=[WEATHER], tool_choice={"type": "any"}, thinking=THINKING), 400, "invalid_request_error",
     "tool_choice"),
    (ask("hello", tool_choice={"type": "tool", "name": "nope"}, tools=[WEATHER]), 400, "invalid_request_error", "nope"),
    (ask("hello", mcp_servers=[{"type": "url", "url": "http://x", "name": "x"}]), 400, "invalid_request_error",
     "mcp_servers"),
    (ask("hello", messages=[]), 400, "invalid_request_error", "messages"),
])
def test_errors_in_anthropics_envelope(server, body, status, kind, words):
    response = post(server, body)
    assert response.status_code == status, response.text
    error = response.json()
    assert error["type"] == "error" and error["error"]["type"] == kind and words in error["error"]["message"]
    assert set(error) == {"type", "error", "request_id"} and error["request_id"] == response.headers["x-request-id"]


def test_sdk_raises_its_errors(server, client):
    with pytest.raises(anthropic.NotFoundError):
        client.messages.create(model="nope", max_tokens=8, messages=[{"role": "user", "content": "hello"}])
    wrong = anthropic.Anthropic(base_url=BASE_URL, api_key="wrong", max_retries=0, http_client=server)
    with pytest.raises(anthropic.AuthenticationError) as error:
        wrong.messages.create(model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "hello"}])
    assert error.value.body["error"]["type"] == "authentication_error"
    with pytest.raises(anthropic.BadRequestError):
        client.messages.count_tokens(model=MODEL, messages=[{"role": "user", "content": [
            {"type": "search_result", "source": {"type": "text"}}]}])


def test_auth_by_bearer_too_and_head_probe(server):
    bearer = server.post("/v1/messages", json=ask("hello"), headers={"authorization": f"Bearer {KEY}"})
    assert bearer.status_code == 200
    assert server.head("/").status_code == 200


def test_unknown_fields_are_named_then_ignored_with_the_flag(tmp_path):
    body = ask("hello", fancy_new_field=1)
    with served(tmp_path / "strict", SCRIPT, request_timeout=2, keep_attribution_line=True) as strict, \
            served(tmp_path / "relaxed", SCRIPT, unknown_params="ignore") as relaxed:
        refused = strict.post("/v1/messages", json=body)
        assert refused.status_code == 400 and "fancy_new_field" in refused.json()["error"]["message"]
        assert relaxed.post("/v1/messages", json=body).status_code == 200
        # --keep-attribution-line: the line is part of the prompt, and changes it
        request = {k: v for k, v in claude_code_request("572").items() if k not in ("max_tokens", "stream", "metadata")}
        counts = {strict.post("/v1/messages/count_tokens", json={
            **request, "system": [{"type": "text", "text": f"x-anthropic-billing-header: cc_version={n};"}]}
        ).json()["input_tokens"] for n in ("1", "1.2.3.4.5.6")}
        assert len(counts) == 2
        # an error once the stream has started: Anthropic's `error` event, and the stream ends
        events = sse_events(BASE_URL, ask("slow story", max_tokens=512), "", strict)
        assert [e["type"] for e in events][0] == "message_start" and events[-1]["type"] == "error"
        assert events[-1]["error"]["type"] == "timeout_error"


def test_prefix_cache_holds_when_only_the_attribution_line_changes(real_server):
    """The embedded model on llama.cpp: Claude Code's next turn (a new attribution line, the same long system
    prompt) reads the whole earlier prompt from the prefix cache, reported as cache_read_input_tokens."""
    system = " ".join(f"Rule {n}: answer the user's questions about the files in this project carefully."
                      for n in range(40))
    usages = []
    for nonce in ("572", "a9e"):
        body = {"model": "SmolLM2-135M-Instruct", "max_tokens": 4, "temperature": 0,
                "system": [{"type": "text", "text": f"x-anthropic-billing-header: cc_version=2.1.330.{nonce}; "
                                                    "cc_entrypoint=sdk-cli;"}, {"type": "text", "text": system}],
                "messages": [{"role": "user", "content": "Which rule comes first?"}]}
        response = httpx.post(f"{real_server.base_url}/v1/messages", json=body, timeout=120)
        assert response.status_code == 200, response.text
        usages.append(check_message(response.json()).usage)
    total = usages[0].input_tokens + usages[0].cache_read_input_tokens
    assert total > 500 and usages[1].input_tokens + usages[1].cache_read_input_tokens == total
    assert usages[1].cache_read_input_tokens >= total - 16  # all but the tail llama.cpp re-reads


def test_real_process_smoke(scripted_server):
    """The Messages API of a real `rostra serve` over loopback: the SDK's create and stream."""
    client = anthropic.Anthropic(base_url=scripted_server.base_url, api_key="none", max_retries=0)
    message = client.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "say hello"}])
    assert check_message(message.model_dump(mode="json", exclude_none=True)).content[0].text
    events = sse_events(scripted_server.base_url, ask("say hello", max_tokens=64), "none")
    assert fold(events).content[0].text == message.content[0].text
