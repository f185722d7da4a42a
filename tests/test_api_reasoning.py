"""Reasoning over HTTP through the scripted engine (qwen3 <think> markup, hermes tool calls)."""

import json

import pytest

from test_api_tools import TOOLS, fold_tool_calls
from wire import check, fold_chat_stream, post, stream

MODEL = "scripted"


def ask(content, **extra):
    return {"model": MODEL, "messages": [{"role": "user", "content": content}], **extra}


def fold(chunks):
    """(reasoning, content) of a one-choice stream, as the one assembler (wire.fold_chat_stream) folds them."""
    for chunk in chunks:  # the server runs with --reasoning-field both: every delta carries both or neither
        assert all(c["delta"].get("reasoning") == c["delta"].get("reasoning_content") for c in chunk["choices"])
    folded = fold_chat_stream(chunks)[0]
    return folded["reasoning"], folded["content"]


@pytest.mark.parametrize("content,reasoning,answer", [
    ("think then answer", "\nI should add two and two.\n", "2 + 2 = 4."),
    ("no thinking", None, "Plain answer."),
])
def test_reasoning_separated_stream_equals_non_stream(reasoning_server, content, reasoning, answer):
    request = ask(content, stream_options={"include_usage": True})
    whole = check("chat", post(reasoning_server.base_url, "/v1/chat/completions", request).json())
    message = whole["choices"][0]["message"]
    assert message.get("reasoning_content") == reasoning and message.get("reasoning") == reasoning
    assert message["content"] == answer
    chunks = stream(reasoning_server.base_url, "/v1/chat/completions", request, "chat_chunk")
    assert fold(chunks) == (reasoning or "", answer)
    usage = whole["usage"]
    assert chunks[-1]["usage"] == usage
    thinking_tokens = usage["completion_tokens_details"]["reasoning_tokens"]
    assert (0 < thinking_tokens < usage["completion_tokens"]) if reasoning else thinking_tokens == 0


def test_include_reasoning_false_drops_it(reasoning_server):
    request = ask("think then answer", include_reasoning=False)
    whole = check("chat", post(reasoning_server.base_url, "/v1/chat/completions", request).json())
    assert "reasoning_content" not in whole["choices"][0]["message"]
    assert whole["choices"][0]["message"]["content"] == "2 + 2 = 4."
    assert whole["usage"]["completion_tokens_details"]["reasoning_tokens"] > 0  # still generated
    assert fold(stream(reasoning_server.base_url, "/v1/chat/completions", request, "chat_chunk")) == ("", "2 + 2 = 4.")


def test_thinking_disabled_is_all_answer(reasoning_server):
    request = ask("think then answer", chat_template_kwargs={"enable_thinking": False})
    whole = post(reasoning_server.base_url, "/v1/chat/completions", request).json()
    assert whole["choices"][0]["message"]["content"].startswith("<think>")
    assert "reasoning_content" not in whole["choices"][0]["message"]


def test_tool_call_right_after_thinking(reasoning_server):
    request = ask("think then call", tools=TOOLS)
    whole = check("chat", post(reasoning_server.base_url, "/v1/chat/completions", request).json())
    message = whole["choices"][0]["message"]
    assert message["reasoning_content"] == "The user wants the weather."
    assert message["content"] is None and whole["choices"][0]["finish_reason"] == "tool_calls"
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message["tool_calls"]] == \
        [("get_weather", {"city": "Oslo"})]
    chunks = stream(reasoning_server.base_url, "/v1/chat/completions", request, "chat_chunk")
    assert fold(chunks) == ("The user wants the weather.", "")
    assert [(c["name"], json.loads(c["arguments"])) for c in fold_tool_calls(chunks)] == [("get_weather", {"city": "Oslo"})]


def test_json_answer_after_thinking(reasoning_server):
    request = ask("think then json", response_format={"type": "json_object"})
    whole = check("chat", post(reasoning_server.base_url, "/v1/chat/completions", request).json())
    assert whole["choices"][0]["message"]["reasoning_content"] == "A person: Ada."
    assert json.loads(whole["choices"][0]["message"]["content"]) == {"name": "Ada", "age": 36}


def test_truncated_reasoning_is_all_reasoning(reasoning_server):
    request = ask("long thinking", max_tokens=6)
    whole = check("chat", post(reasoning_server.base_url, "/v1/chat/completions", request).json())
    choice = whole["choices"][0]
    assert choice["finish_reason"] == "length" and choice["message"]["content"] == ""
    assert choice["message"]["reasoning_content"].startswith("This will take")
    assert whole["usage"]["completion_tokens_details"]["reasoning_tokens"] == 6
    assert fold(stream(reasoning_server.base_url, "/v1/chat/completions", request, "chat_chunk")) == \
        (choice["message"]["reasoning_content"], "")


def test_reasoning_of_earlier_turns_is_accepted(reasoning_server):
    messages = [{"role": "user", "content": "hi"},
                {"role": "assistant", "content": "Hello", "reasoning_content": "greet back"},
                {"role": "assistant", "content": "Again", "reasoning": "still greeting"},
                {"role": "user", "content": "no thinking"}]
    whole = check("chat", post(reasoning_server.base_url, "/v1/chat/completions",
                               {"model": MODEL, "messages": messages}).json())
    assert whole["choices"][0]["message"]["content"] == "Plain answer."


def test_gpt_oss_harmony_channels_and_calls(harmony_server):
    whole = check("chat", post(harmony_server.base_url, "/v1/chat/completions", ask("hello")).json())
    message = whole["choices"][0]["message"]
    assert (message["reasoning_content"], message["content"]) == ("Greet.", "Hello there!")
    chunks = stream(harmony_server.base_url, "/v1/chat/completions", ask("hello"), "chat_chunk")
    assert fold(chunks) == ("Greet.", "Hello there!")
    request = ask("weather", tools=TOOLS)
    whole = check("chat", post(harmony_server.base_url, "/v1/chat/completions", request).json())
    message = whole["choices"][0]["message"]
    assert message["reasoning_content"] == "Need the weather tool."
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message["tool_calls"]] == \
        [("get_weather", {"city": "Oslo"})]
    assert whole["choices"][0]["finish_reason"] == "tool_calls"
    streamed = fold_tool_calls(stream(harmony_server.base_url, "/v1/chat/completions", request, "chat_chunk"))
    assert [(c["name"], json.loads(c["arguments"])) for c in streamed] == [("get_weather", {"city": "Oslo"})]
