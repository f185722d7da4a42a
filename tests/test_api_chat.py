"""Chat Completions over real HTTP against the scripted engine."""

import httpx
import pytest

from wire import check, fold_chat_stream, post, stream

MODEL = "scripted"


def chat(server, content, **extra):
    return {"model": MODEL, "messages": [{"role": "user", "content": content}], **extra}


def test_models_health_version(scripted_server):
    from spec import validate

    models = httpx.get(f"{scripted_server.base_url}/v1/models").json()
    validate("ListModelsResponse", models)
    assert [m["id"] for m in models["data"]] == [MODEL]
    one = httpx.get(f"{scripted_server.base_url}/v1/models/{MODEL}").json()
    validate("Model", one)
    assert httpx.get(f"{scripted_server.base_url}/health").json()["status"] == "ok"
    assert httpx.get(f"{scripted_server.base_url}/version").json()["version"]


def test_scripted_reply_non_stream(scripted_server):
    body = check("chat", post(scripted_server.base_url, "/v1/chat/completions", chat(scripted_server, "say hello")).json())
    choice = body["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "Hello! How can I help you today?", "refusal": None}
    assert choice["finish_reason"] == "stop"
    usage = body["usage"]
    assert usage["completion_tokens"] > 3 and usage["prompt_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert body["timings"]["predicted_n"] == usage["completion_tokens"]


def test_no_match_echoes_last_message(scripted_server):
    body = post(scripted_server.base_url, "/v1/chat/completions", chat(scripted_server, "nothing matches this")).json()
    assert body["choices"][0]["message"]["content"] == "nothing matches this"


def test_role_restricted_line(scripted_server):
    messages = [{"role": "user", "content": "call it"},
                {"role": "assistant", "content": None,
                 "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "only for tools"}]
    body = post(scripted_server.base_url, "/v1/chat/completions", {"model": MODEL, "messages": messages}).json()
    assert body["choices"][0]["message"]["content"] == "The tool said something."
    # The same text from a user does not match the tool-only line: it is echoed.
    body = post(scripted_server.base_url, "/v1/chat/completions", chat(scripted_server, "only for tools")).json()
    assert body["choices"][0]["message"]["content"] == "only for tools"


@pytest.mark.parametrize("content", ["say hello", "unicode please", "count to ten"])
def test_stream_equals_non_stream(scripted_server, content):
    request = chat(scripted_server, content, stream_options={"include_usage": True})
    whole = check("chat", post(scripted_server.base_url, "/v1/chat/completions", request).json())
    chunks = stream(scripted_server.base_url, "/v1/chat/completions", request, "chat_chunk")
    folded = fold_chat_stream(chunks)
    assert folded[0]["content"] == whole["choices"][0]["message"]["content"]
    assert folded[0]["finish_reason"] == whole["choices"][0]["finish_reason"]
    assert folded[0]["roles"] == 1 and folded[0]["finishes"] == 1
    # Realistic chunking: one token per content chunk (a character split over tokens waits for its end).
    content_chunks = [c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")]
    tokens = whole["usage"]["completion_tokens"]
    if whole["choices"][0]["message"]["content"].isascii():
        assert len(content_chunks) == tokens
    else:
        assert 1 < len(content_chunks) < tokens
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == whole["usage"]
    assert all(c["usage"] is None for c in chunks[:-1])
    assert len({c["id"] for c in chunks}) == 1


def test_continuous_usage_stats(scripted_server):
    request = chat(scripted_server, "count to ten", stream_options={"include_usage": True, "continuous_usage_stats": True})
    chunks = stream(scripted_server.base_url, "/v1/chat/completions", request, "chat_chunk")
    counts = [c["usage"]["completion_tokens"] for c in chunks]
    assert counts == sorted(counts) and counts[-1] > 0


def test_n_choices_each_indexed_and_finished_once(scripted_server):
    request = chat(scripted_server, "count to ten", n=3)
    whole = check("chat", post(scripted_server.base_url, "/v1/chat/completions", request).json())
    assert [c["index"] for c in whole["choices"]] == [0, 1, 2]
    folded = fold_chat_stream(stream(scripted_server.base_url, "/v1/chat/completions", request, "chat_chunk"))
    assert sorted(folded) == [0, 1, 2]
    for index, state in folded.items():
        assert state["content"] == whole["choices"][index]["message"]["content"]
        assert state["finishes"] == 1 and state["roles"] == 1
    single = post(scripted_server.base_url, "/v1/chat/completions", chat(scripted_server, "count to ten")).json()
    assert whole["usage"]["completion_tokens"] == 3 * single["usage"]["completion_tokens"]
    assert whole["usage"]["prompt_tokens"] == single["usage"]["prompt_tokens"]


@pytest.mark.parametrize("stop", [" STOP", ["STOP", "zzz"], "ST", "a b"])
def test_stop_strings_never_leak(scripted_server, stop):
    request = chat(scripted_server, "STOPTEST", stop=stop)
    whole = post(scripted_server.base_url, "/v1/chat/completions", request).json()
    expected = {" STOP": "alpha beta", "ST": "alpha beta "}.get(stop if isinstance(stop, str) else "", None)
    content = whole["choices"][0]["message"]["content"]
    if stop == ["STOP", "zzz"]:
        expected = "alpha beta "
    if stop == "a b":
        expected = "alph"
    assert content == expected
    assert whole["choices"][0]["finish_reason"] == "stop"
    folded = fold_chat_stream(stream(scripted_server.base_url, "/v1/chat/completions", request, "chat_chunk"))
    assert folded[0]["content"] == content


def test_stop_token_ids(scripted_server, scripted_client):
    from rostra.embedded import embedded_model_path
    from rostra.tokenizer import tokenizer_from_gguf

    ids = tokenizer_from_gguf(embedded_model_path()).encode("alpha beta STOP gamma delta")
    request = chat(scripted_server, "STOPTEST", stop_token_ids=[ids[2]])
    whole = post(scripted_server.base_url, "/v1/chat/completions", request).json()
    assert whole["choices"][0]["finish_reason"] == "stop"
    assert whole["usage"]["completion_tokens"] == 3  # the stop token is generated, not shown
    text = whole["choices"][0]["message"]["content"]
    assert "alpha beta STOP gamma delta".startswith(text) and "STOP" not in text


def test_max_tokens_cuts_with_length(scripted_server):
    for key in ("max_tokens", "max_completion_tokens"):
        request = chat(scripted_server, "count to ten", **{key: 3})
        whole = check("chat", post(scripted_server.base_url, "/v1/chat/completions", request).json())
        assert whole["choices"][0]["finish_reason"] == "length"
        assert whole["usage"]["completion_tokens"] == 3
        folded = fold_chat_stream(stream(scripted_server.base_url, "/v1/chat/completions", request, "chat_chunk"))
        assert folded[0]["finish_reason"] == "length"
        assert folded[0]["content"] == whole["choices"][0]["message"]["content"]


def test_logprobs(scripted_server):
    request = chat(scripted_server, "unicode please", logprobs=True, top_logprobs=2)
    whole = check("chat", post(scripted_server.base_url, "/v1/chat/completions", request).json())
    content = whole["choices"][0]["logprobs"]["content"]
    assert len(content) == whole["usage"]["completion_tokens"]
    assert b"".join(bytes(t["bytes"]) for t in content).decode() == whole["choices"][0]["message"]["content"]
    assert all(t["logprob"] == 0.0 and len(t["top_logprobs"]) <= 2 for t in content)
    folded = fold_chat_stream(stream(scripted_server.base_url, "/v1/chat/completions", request, "chat_chunk"))
    assert folded[0]["logprobs"] == content


def test_content_parts_and_roles(scripted_server):
    messages = [{"role": "developer", "content": "be brief"}, {"role": "system", "content": "really"},
                {"role": "user", "content": [{"type": "text", "text": "say"}, {"type": "text", "text": "hello"}]}]
    body = check("chat", post(scripted_server.base_url, "/v1/chat/completions",
                              {"model": MODEL, "messages": messages, "user": "u-1"}).json())
    assert body["choices"][0]["message"]["content"] == "say\nhello"


def test_echo_and_continue_final_message(scripted_server):
    messages = [{"role": "user", "content": "say hello"}, {"role": "assistant", "content": "Sure: "}]
    request = {"model": MODEL, "messages": messages, "add_generation_prompt": False,
               "continue_final_message": True, "echo": True}
    body = check("chat", post(scripted_server.base_url, "/v1/chat/completions", request).json())
    # No script line matches "Sure: ", so the model echoes it; `echo` puts it in front too.
    assert body["choices"][0]["message"]["content"] == "Sure: Sure: "
    folded = fold_chat_stream(stream(scripted_server.base_url, "/v1/chat/completions", request, "chat_chunk"))
    assert folded[0]["content"] == "Sure: Sure: "


def test_request_id_echoed_or_generated(scripted_server):
    given = post(scripted_server.base_url, "/v1/chat/completions", chat(scripted_server, "say hello"),
                 headers={"x-request-id": "abc-123"})
    assert given.headers["x-request-id"] == "abc-123"
    made = post(scripted_server.base_url, "/v1/chat/completions", chat(scripted_server, "say hello"))
    assert len(made.headers["x-request-id"]) >= 16
    error = post(scripted_server.base_url, "/v1/chat/completions", {"model": MODEL})
    assert error.headers["x-request-id"]
    with httpx.stream("POST", f"{scripted_server.base_url}/v1/chat/completions",
                      json=chat(scripted_server, "say hello", stream=True), headers={"x-request-id": "s-1"}) as r:
        assert r.headers["x-request-id"] == "s-1"


def test_null_means_not_given(scripted_server):
    request = chat(scripted_server, "say hello", stream=None, n=None, stop=None, temperature=None, logprobs=None,
                   stream_options=None, max_tokens=None)
    body = check("chat", post(scripted_server.base_url, "/v1/chat/completions", request).json())
    assert body["choices"][0]["message"]["content"] == "Hello! How can I help you today?"
