"""Completions over real HTTP against the scripted engine (the prompt is the matched text)."""

import pytest

from wire import check, check_error, fold_completion_stream, post, stream

MODEL = "scripted"


@pytest.mark.parametrize("prompt", ["say hello", "count to ten"])
def test_completion_stream_equals_non_stream(scripted_server, prompt):
    request = {"model": MODEL, "prompt": prompt, "max_tokens": 50, "stream_options": {"include_usage": True}}
    whole = check("completion", post(scripted_server.base_url, "/v1/completions", request).json())
    assert whole["object"] == "text_completion"
    chunks = stream(scripted_server.base_url, "/v1/completions", request, "completion_chunk")
    folded = fold_completion_stream(chunks)
    assert folded[0]["text"] == whole["choices"][0]["text"]
    assert folded[0]["finish_reason"] == whole["choices"][0]["finish_reason"] == "stop"
    assert folded[0]["finishes"] == 1
    assert chunks[-1]["usage"] == whole["usage"]


def test_default_max_tokens_is_16(scripted_server):
    whole = post(scripted_server.base_url, "/v1/completions", {"model": MODEL, "prompt": "slow story"}).json()
    assert whole["usage"]["completion_tokens"] == 16 and whole["choices"][0]["finish_reason"] == "length"


def test_prompt_forms_and_indexes(scripted_server):
    from rostra.embedded import embedded_model_path
    from rostra.tokenizer import tokenizer_from_gguf

    ids = tokenizer_from_gguf(embedded_model_path()).encode("say hello")
    for prompt in (["say hello", "count to ten"], [ids, ids]):
        whole = check("completion", post(scripted_server.base_url, "/v1/completions",
                                         {"model": MODEL, "prompt": prompt, "n": 2, "max_tokens": 40}).json())
        assert [c["index"] for c in whole["choices"]] == [0, 1, 2, 3]
        assert whole["choices"][0]["text"] == whole["choices"][1]["text"] == "Hello! How can I help you today?"
    whole = post(scripted_server.base_url, "/v1/completions", {"model": MODEL, "prompt": ids}).json()
    assert whole["choices"][0]["text"].startswith("Hello!")


def test_echo(scripted_server):
    request = {"model": MODEL, "prompt": "say hello", "echo": True, "max_tokens": 40}
    whole = check("completion", post(scripted_server.base_url, "/v1/completions", request).json())
    assert whole["choices"][0]["text"] == "say helloHello! How can I help you today?"
    assert fold_completion_stream(stream(scripted_server.base_url, "/v1/completions", request, "completion_chunk"))[0]["text"] == \
        whole["choices"][0]["text"]


def test_echo_with_max_tokens_zero_returns_the_prompt_without_generating(scripted_server):
    # As OpenAI's legacy Completions and vLLM allow (with logprobs: tests/test_api_extensions.py).
    request = {"model": MODEL, "prompt": "say hello", "echo": True, "max_tokens": 0,
               "stream_options": {"include_usage": True}}
    whole = check("completion", post(scripted_server.base_url, "/v1/completions", request).json())
    choice = whole["choices"][0]
    assert (choice["text"], choice["finish_reason"], whole["usage"]["completion_tokens"]) == ("say hello", "length", 0)
    assert whole["usage"]["prompt_tokens"] > 0 and choice["logprobs"] is None
    chunks = stream(scripted_server.base_url, "/v1/completions", request, "completion_chunk")
    folded = fold_completion_stream(chunks)[0]
    assert (folded["text"], folded["finish_reason"]) == ("say hello", "length") and chunks[-1]["usage"] == whole["usage"]


def test_max_tokens_zero_without_echo_is_refused(scripted_server):
    check_error(post(scripted_server.base_url, "/v1/completions", {"model": MODEL, "prompt": "say hello",
                                                                    "max_tokens": 0}), 400, "max_tokens")


def test_legacy_logprobs(scripted_server):
    request = {"model": MODEL, "prompt": "count to ten", "logprobs": 2, "max_tokens": 40}
    whole = check("completion", post(scripted_server.base_url, "/v1/completions", request).json())
    logprobs = whole["choices"][0]["logprobs"]
    text = whole["choices"][0]["text"]
    assert "".join(logprobs["tokens"]) == text
    assert logprobs["text_offset"][0] == 0
    assert all(text[offset:].startswith(token) for token, offset in zip(logprobs["tokens"], logprobs["text_offset"]))
    assert len(logprobs["token_logprobs"]) == len(logprobs["tokens"]) == len(logprobs["top_logprobs"])
    assert fold_completion_stream(stream(scripted_server.base_url, "/v1/completions", request, "completion_chunk"))[0]["tokens"] == \
        logprobs["tokens"]


def test_stop_in_completions(scripted_server):
    request = {"model": MODEL, "prompt": "STOPTEST", "stop": "STOP", "max_tokens": 40}
    whole = post(scripted_server.base_url, "/v1/completions", request).json()
    assert whole["choices"][0]["text"] == "alpha beta " and whole["choices"][0]["finish_reason"] == "stop"
