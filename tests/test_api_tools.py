"""Tool calling over HTTP through the scripted engine (hermes markup in the scripted output)."""

import json

import pytest
from openai import OpenAI

from wire import check, fold_chat_stream, post, stream

MODEL = "scripted"
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                            "parameters": {"type": "object", "properties": {
                                                "city": {"type": "string"}, "days": {"type": "integer"}},
                                                "required": ["city"]}}}
TOOLS = [WEATHER]


def ask(content, **extra):
    return {"model": MODEL, "messages": [{"role": "user", "content": content}], "tools": TOOLS, **extra}


def fold_tool_calls(chunks):
    """The calls of a one-choice stream, as the one assembler (wire.fold_chat_stream) folds them."""
    return fold_chat_stream(chunks)[0]["tool_calls"]


def plain(calls):
    return [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls]


def test_one_call_non_stream_and_stream_agree(tools_server):
    request = ask("weather in Oslo?")
    whole = check("chat", post(tools_server.base_url, "/v1/chat/completions", request).json())
    choice = whole["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "Let me check."
    assert plain(choice["message"]["tool_calls"]) == [("get_weather", {"city": "Oslo"})]
    assert choice["message"]["tool_calls"][0]["id"].startswith("call_")
    chunks = stream(tools_server.base_url, "/v1/chat/completions", request, "chat_chunk")
    folded = fold_chat_stream(chunks)[0]
    assert folded["content"] == "Let me check." and folded["finish_reason"] == "tool_calls"
    streamed = fold_tool_calls(chunks)
    assert [(c["name"], json.loads(c["arguments"])) for c in streamed] == plain(choice["message"]["tool_calls"])


def test_parallel_calls_and_parallel_false(tools_server):
    whole = check("chat", post(tools_server.base_url, "/v1/chat/completions", ask("two cities")).json())
    calls = whole["choices"][0]["message"]["tool_calls"]
    assert plain(calls) == [("get_weather", {"city": "Oslo", "days": 2}), ("get_weather", {"city": 'Zürich "Nord"'})]
    assert len({c["id"] for c in calls}) == 2
    streamed = fold_tool_calls(stream(tools_server.base_url, "/v1/chat/completions", ask("two cities"), "chat_chunk"))
    assert [(c["name"], json.loads(c["arguments"])) for c in streamed] == plain(calls)
    one = post(tools_server.base_url, "/v1/chat/completions", ask("two cities", parallel_tool_calls=False)).json()
    assert plain(one["choices"][0]["message"]["tool_calls"]) == plain(calls)[:1]


def test_sdk_stream_helper_assembles_the_non_streamed_message(tools_server):
    client = OpenAI(base_url=f"{tools_server.base_url}/v1", api_key="x", max_retries=0)
    whole = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "two cities"}],
                                           tools=TOOLS)
    with client.chat.completions.stream(model=MODEL, messages=[{"role": "user", "content": "two cities"}],
                                        tools=TOOLS) as events:
        for _ in events:
            pass
        final = events.get_final_completion()
    got, want = final.choices[0].message, whole.choices[0].message
    assert got.content == want.content
    assert [(c.function.name, c.function.arguments) for c in got.tool_calls] == \
        [(c.function.name, c.function.arguments) for c in want.tool_calls]
    assert all(c.id.startswith("call_") and len(c.id) == 29 for c in got.tool_calls)  # not concatenated twice
    assert final.choices[0].finish_reason == "tool_calls"


def test_tool_choice_none_leaves_markup_as_text(tools_server):
    whole = post(tools_server.base_url, "/v1/chat/completions", ask("weather in Oslo?", tool_choice="none")).json()
    message = whole["choices"][0]["message"]
    assert "tool_calls" not in message and "<tool_call>" in message["content"]
    assert whole["choices"][0]["finish_reason"] == "stop"


def test_broken_call_ends_alike_streamed_or_not(tools_server):
    """A call whose head was read has started streaming; when its JSON breaks it still ends, its
    arguments what was valid closed into JSON, and the stream folds into the non-streamed message."""
    whole = check("chat", post(tools_server.base_url, "/v1/chat/completions", ask("broken call")).json())
    message = whole["choices"][0]["message"]
    assert plain(message["tool_calls"]) == [("get_weather", {})] and message["content"] is None
    assert whole["choices"][0]["finish_reason"] == "tool_calls"
    chunks = stream(tools_server.base_url, "/v1/chat/completions", ask("broken call"), "chat_chunk")
    streamed = fold_tool_calls(chunks)
    assert [(c["name"], c["arguments"]) for c in streamed] == [
        (c["function"]["name"], c["function"]["arguments"]) for c in message["tool_calls"]]


@pytest.mark.parametrize("tool_choice,content,expected", [
    ("required", "required please", [("get_weather", {"city": "Paris"})]),
    ({"type": "function", "function": {"name": "get_weather"}}, "named please", [("get_weather", {"city": "Rome"})]),
])
def test_required_and_named(tools_server, tool_choice, content, expected):
    request = ask(content, tool_choice=tool_choice)
    whole = check("chat", post(tools_server.base_url, "/v1/chat/completions", request).json())
    assert plain(whole["choices"][0]["message"]["tool_calls"]) == expected
    assert whole["choices"][0]["message"]["content"] is None
    streamed = fold_tool_calls(stream(tools_server.base_url, "/v1/chat/completions", request, "chat_chunk"))
    assert [(c["name"], json.loads(c["arguments"])) for c in streamed] == expected


def test_history_with_tool_results(tools_server):
    messages = [{"role": "user", "content": "weather in Oslo?"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "get_weather",
                                                                      "arguments": '{"city": "Oslo"}'}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": '{"sky": "sunny"}'}]
    whole = check("chat", post(tools_server.base_url, "/v1/chat/completions",
                               {"model": MODEL, "messages": messages, "tools": TOOLS}).json())
    assert whole["choices"][0]["message"]["content"] == "It is sunny in Oslo."
    assert whole["choices"][0]["finish_reason"] == "stop"


def test_lenient_json_is_the_default_for_models_without_a_tool_format(scripted_server):
    """The embedded model's template speaks no tool format: the lenient json parser reads a fenced
    call, and only when the name is one of the request's tools."""
    request = ask("weather tool please")
    whole = check("chat", post(scripted_server.base_url, "/v1/chat/completions", request).json())
    message = whole["choices"][0]["message"]
    assert plain(message["tool_calls"]) == [("get_weather", {"city": "Oslo"})]
    assert message["content"] == "Sure!\n" and whole["choices"][0]["finish_reason"] == "tool_calls"
    streamed = fold_tool_calls(stream(scripted_server.base_url, "/v1/chat/completions", request, "chat_chunk"))
    assert [(c["name"], json.loads(c["arguments"])) for c in streamed] == plain(message["tool_calls"])
    other = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}
    untouched = post(scripted_server.base_url, "/v1/chat/completions", ask("weather tool please", tools=[other])).json()
    assert untouched["choices"][0]["message"]["content"].startswith("Sure!\n```json")
    assert "tool_calls" not in untouched["choices"][0]["message"]


def test_logprobs_cover_tool_call_tokens(tools_server):
    request = ask("weather in Oslo?", logprobs=True)
    whole = check("chat", post(tools_server.base_url, "/v1/chat/completions", request).json())
    assert len(whole["choices"][0]["logprobs"]["content"]) == whole["usage"]["completion_tokens"]
    folded = fold_chat_stream(stream(tools_server.base_url, "/v1/chat/completions", request, "chat_chunk"))
    assert folded[0]["logprobs"] == whole["choices"][0]["logprobs"]["content"]


WRITE_FILE = {"type": "function", "function": {"name": "write_file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["path", "content"]}}}
MAGIC = {"type": "function", "function": {"name": "magic_function", "parameters": {
    "type": "object", "properties": {"input": {"type": "integer"}}, "required": ["input"]}}}


def test_long_arguments_stream_as_they_are_written(tools_server):
    """Chat: a call's arguments arrive in many deltas, and fold into the non-streamed arguments exactly."""
    request = ask("write the file", tools=[WRITE_FILE])
    whole = check("chat", post(tools_server.base_url, "/v1/chat/completions", request).json())
    call = whole["choices"][0]["message"]["tool_calls"][0]
    assert json.loads(call["function"]["arguments"])["content"].startswith("def step_0(x):\n")
    chunks = stream(tools_server.base_url, "/v1/chat/completions", request, "chat_chunk")
    deltas = [d for c in chunks for ch in c["choices"] for d in ch["delta"].get("tool_calls") or []
              if "id" not in d and d["function"]["arguments"]]
    assert len(deltas) > 20
    assert fold_tool_calls(chunks)[0]["arguments"] == call["function"]["arguments"]


def test_responses_function_call_arguments_stream(tools_server):
    from test_api_responses import raw_stream

    body = {"model": MODEL, "input": "write the file", "tools": [{"type": "function", **WRITE_FILE["function"]}]}
    events = raw_stream(tools_server.base_url, body)
    deltas = [e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta"]
    done = next(e for e in events if e["type"] == "response.function_call_arguments.done")
    assert len(deltas) > 20 and "".join(deltas) == done["arguments"]
    whole = post(tools_server.base_url, "/v1/responses", body).json()
    item = next(i for i in whole["output"] if i["type"] == "function_call")
    assert item["arguments"] == done["arguments"]


@pytest.mark.parametrize("tool_choice", [{"type": "function", "function": {"name": "magic_function"}}])
def test_forced_call_carries_only_schema_properties(tools_server, tool_choice):
    """Issue 13: a forced call to magic_function(input: int) came back with "output_type" too."""
    request = ask("magic please", tools=[MAGIC], tool_choice=tool_choice)
    whole = check("chat", post(tools_server.base_url, "/v1/chat/completions", request).json())
    assert plain(whole["choices"][0]["message"]["tool_calls"]) == [("magic_function", {"input": 3})]
    streamed = fold_tool_calls(stream(tools_server.base_url, "/v1/chat/completions", request, "chat_chunk"))
    assert [(c["name"], c["arguments"]) for c in streamed] == [("magic_function", '{"input": 3}')]


def test_fenced_json_calls_are_found_after_hermes_unless_strict(tools_server):
    """The recorded Qwen2.5-Coder answer: a fenced JSON block where its template asks for <tool_call>
    (hermes). By default the lenient layers find the call; --strict-tool-parsing leaves it text."""
    from servers import DATA, RunningServer

    request = ask("fenced please")
    for body in (post(tools_server.base_url, "/v1/chat/completions", request).json(),):
        assert plain(body["choices"][0]["message"]["tool_calls"]) == [("get_weather", {"city": "Oslo"})]
        assert body["choices"][0]["message"]["content"] is None
    assert fold_tool_calls(stream(tools_server.base_url, "/v1/chat/completions", request, "chat_chunk"))[0][
        "name"] == "get_weather"
    strict = RunningServer(["--engine", "scripted", "--script", str(DATA / "tools.jsonl"), "--tool-call-parser", "hermes",
                           "--strict-tool-parsing"])
    try:
        body = check("chat", post(strict.base_url, "/v1/chat/completions", request).json())
        assert "tool_calls" not in body["choices"][0]["message"]
        assert body["choices"][0]["message"]["content"].startswith("```json")
    finally:
        strict.stop()
