"""Unknown parameters and vLLM's extensions over real HTTP, on the scripted engine (exact outputs).

Bodies and SSE events are validated against the spec and the SDK types (wire.check): extension fields
are extra properties the spec allows and the SDK keeps.
"""

from __future__ import annotations

import json

import httpx
import openai
import pytest
from openai import OpenAI

from servers import DATA, RunningServer
from wire import check, check_error, fold_chat_stream, post, stream, echoed_as_spec_says

MODEL = "scripted"
HELLO = [{"role": "user", "content": "say hello"}]


@pytest.fixture(scope="module")
def ext_server():
    """Lenient about unknown fields; a chat template that renders `documents`."""
    server = RunningServer(["--engine", "scripted", "--script", str(DATA / "extensions.jsonl"), "--max-model-len",
                            "2048", "--chat-template", str(DATA / "documents_template.jinja"),
                            "--unknown-params", "ignore"])
    yield server
    server.stop()


def chat(server, **fields) -> dict:
    response = post(server.base_url, "/v1/chat/completions", {"model": MODEL, "messages": HELLO, **fields})
    assert response.status_code == 200, response.text
    return check("chat", response.json())


def completion(server, prompt: str, **fields) -> dict:
    response = post(server.base_url, "/v1/completions", {"model": MODEL, "prompt": prompt, **fields})
    assert response.status_code == 200, response.text
    return check("completion", response.json())


def detokenize(server, ids: list[int]) -> str:
    return post(server.base_url, "/detokenize", {"tokens": ids}).json()["prompt"]


# -- unknown parameters ----------------------------------------------------------------------------

@pytest.mark.parametrize("path,body", [
    ("/v1/chat/completions", {"messages": HELLO}),
    ("/v1/completions", {"prompt": "say hello"}),
    ("/v1/responses", {"input": "say hello"}),
])
def test_an_unknown_parameter_is_a_400_naming_it(scripted_server, path, body):
    error = check_error(post(scripted_server.base_url, path, {"model": MODEL, **body, "max_token": 5}), 400,
                        "max_token")
    assert error["message"] == "Unrecognized request argument supplied: max_token"
    assert error["type"] == "invalid_request_error"
    assert post(scripted_server.base_url, path, {"model": MODEL, **body}).status_code == 200  # still serving


def test_the_sdk_sees_the_400(scripted_client: OpenAI):
    with pytest.raises(openai.BadRequestError) as caught:
        scripted_client.chat.completions.create(model=MODEL, messages=HELLO, extra_body={"frobnicate": True})
    assert caught.value.body["param"] == "frobnicate"


def test_a_refused_value_is_a_400_naming_the_field(scripted_server):
    check_error(post(scripted_server.base_url, "/v1/chat/completions",
                     {"model": MODEL, "messages": HELLO, "modalities": ["text", "audio"]}), 400, "modalities")


def test_min_tokens_beyond_the_default_length_is_a_400(scripted_server):
    """Completions without max_tokens get OpenAI's 16 (no server default here): min_tokens 20 cannot be honoured."""
    check_error(post(scripted_server.base_url, "/v1/completions",
                     {"model": MODEL, "prompt": "say hello", "min_tokens": 20}), 400, "min_tokens")
    assert post(scripted_server.base_url, "/v1/completions",
                {"model": MODEL, "prompt": "say hello", "min_tokens": 20, "max_tokens": 30}).status_code == 200


def test_unknown_params_ignore_logs_and_serves(ext_server):
    reply = chat(ext_server, max_token=3, stream_options=None)
    assert reply["choices"][0]["message"]["content"] == "say hello"  # max_token did nothing: ignored
    assert "max_token" in ext_server.log_path.read_text()


# -- stop strings: include_stop_str_in_output, min_tokens -------------------------------------------

@pytest.mark.parametrize("fields,text", [
    ({"stop": ["STOP"]}, "alpha beta "),
    ({"stop": ["STOP"], "include_stop_str_in_output": True}, "alpha beta STOP"),
    ({"stop": ["beta"]}, "alpha "),
    ({"stop": ["beta"], "min_tokens": 12}, "alpha beta STOP gamma delta"),  # no stop before 12 tokens
])
def test_stop_extensions(ext_server, fields, text):
    body = {"max_tokens": 30, **fields}
    assert completion(ext_server, "STOPTEST", **body)["choices"][0]["text"] == text
    chunks = stream(ext_server.base_url, "/v1/completions", {"model": MODEL, "prompt": "STOPTEST", **body},
                    "completion_chunk")
    assert "".join(choice["text"] for chunk in chunks for choice in chunk["choices"]) == text


# -- skip_special_tokens -------------------------------------------------------------------------

def test_special_tokens_are_skipped_unless_asked_for(ext_server):
    messages = [{"role": "user", "content": "special please"}]
    assert chat(ext_server, messages=messages)["choices"][0]["message"]["content"] == "AB"
    kept = chat(ext_server, messages=messages, skip_special_tokens=False)
    assert kept["choices"][0]["message"]["content"] == "A<|im_start|>B"
    assert completion(ext_server, "special please", skip_special_tokens=False)["choices"][0]["text"] == "A<|im_start|>B"


# -- return_token_ids, truncate_prompt_tokens, documents --------------------------------------------

def test_return_token_ids_chat_stream_and_fold_agree(ext_server):
    whole = chat(ext_server, return_token_ids=True, n=2)
    tokenized = post(ext_server.base_url, "/tokenize", {"messages": HELLO}).json()["tokens"]
    assert whole["prompt_token_ids"] == tokenized
    for choice in whole["choices"]:
        assert detokenize(ext_server, choice["token_ids"]) == choice["message"]["content"] == "say hello"
    chunks = stream(ext_server.base_url, "/v1/chat/completions",
                    {"model": MODEL, "messages": HELLO, "return_token_ids": True}, "chat_chunk")
    assert chunks[0]["prompt_token_ids"] == tokenized
    streamed = [i for chunk in chunks for choice in chunk["choices"] for i in choice.get("token_ids", [])]
    assert streamed == whole["choices"][0]["token_ids"]


def test_return_token_ids_completions(ext_server):
    whole = completion(ext_server, "count to ten", return_token_ids=True, max_tokens=4)
    choice = whole["choices"][0]
    assert detokenize(ext_server, choice["prompt_token_ids"]) == "count to ten"
    assert len(choice["token_ids"]) == 4 and detokenize(ext_server, choice["token_ids"]) == choice["text"]
    echoed = completion(ext_server, "count to ten", return_token_ids=True, max_tokens=4, echo=True)["choices"][0]
    assert echoed["token_ids"] == choice["token_ids"]  # the echoed prompt's ids are not generated ones


def test_truncate_prompt_tokens_keeps_the_last_ones(ext_server):
    prompt = "count the words of this rather long prompt"
    full = completion(ext_server, prompt, return_token_ids=True, max_tokens=1)["choices"][0]["prompt_token_ids"]
    cut = completion(ext_server, prompt, return_token_ids=True, max_tokens=1, truncate_prompt_tokens=3)
    assert cut["choices"][0]["prompt_token_ids"] == full[-3:]
    assert cut["usage"]["prompt_tokens"] == 3
    reply = chat(ext_server, return_token_ids=True, truncate_prompt_tokens=4)
    assert len(reply["prompt_token_ids"]) == 4 and reply["usage"]["prompt_tokens"] == 4


def test_documents_reach_the_chat_template(ext_server):
    documents = [{"title": "Oslo", "text": "Oslo is the capital of Norway."}, {"title": "Bergen", "text": "It rains."}]
    reply = chat(ext_server, documents=documents, return_token_ids=True)
    prompt = detokenize(ext_server, reply["prompt_token_ids"])
    assert prompt.startswith("[doc 1: Oslo] Oslo is the capital of Norway.\n[doc 2: Bergen] It rains.\nuser: say hello")


# -- prompt_logprobs, echo with logprobs ----------------------------------------------------------

def test_prompt_logprobs_chat(ext_server):
    whole = chat(ext_server, prompt_logprobs=1, return_token_ids=True)
    scores, ids = whole["prompt_logprobs"], whole["prompt_token_ids"]
    assert len(scores) == len(ids) and scores[0] is None
    for token_id, entry in zip(ids[1:], scores[1:]):  # the scripted model is certain: logprob 0, rank 1
        assert entry[str(token_id)] == {"logprob": 0.0, "rank": 1,
                                        "decoded_token": detokenize(ext_server, [token_id])}
    chunks = stream(ext_server.base_url, "/v1/chat/completions",
                    {"model": MODEL, "messages": HELLO, "prompt_logprobs": 1}, "chat_chunk")
    assert [chunk["prompt_logprobs"] for chunk in chunks if "prompt_logprobs" in chunk] == [scores]


_spec_allowance = echoed_as_spec_says  # (tests/wire.py)


def test_echo_with_max_tokens_zero_scores_the_prompt_without_generating(ext_server):
    body = {"model": MODEL, "prompt": "count to ten", "echo": True, "logprobs": 1, "max_tokens": 0,
            "stream_options": {"include_usage": True}}
    whole = post(ext_server.base_url, "/v1/completions", body).json()
    check("completion", _spec_allowance(whole))
    choice, usage = whole["choices"][0], whole["usage"]
    assert (choice["text"], choice["finish_reason"], usage["completion_tokens"]) == ("count to ten", "length", 0)
    logprobs = choice["logprobs"]
    assert "".join(logprobs["tokens"]) == "count to ten" and len(logprobs["tokens"]) == usage["prompt_tokens"]
    assert logprobs["token_logprobs"][0] is None and all(v <= 0 for v in logprobs["token_logprobs"][1:])
    with httpx.stream("POST", f"{ext_server.base_url}/v1/completions", json={**body, "stream": True}) as response:
        events = [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: {")]
    tokens = [t for event in events for c in event["choices"] if c["logprobs"] for t in c["logprobs"]["tokens"]]
    assert tokens == logprobs["tokens"] and events[-1]["usage"] == usage
    for event in events:
        check("completion_chunk", _spec_allowance(event))


def test_echo_with_logprobs_scores_the_prompt(ext_server):
    body = {"model": MODEL, "prompt": "count to ten", "echo": True, "logprobs": 1, "max_tokens": 3}
    whole = post(ext_server.base_url, "/v1/completions", body).json()
    check("completion", _spec_allowance(whole))
    choice = whole["choices"][0]
    prompt_ids = completion(ext_server, "count to ten", return_token_ids=True, max_tokens=1)["choices"][0][
        "prompt_token_ids"]
    logprobs = choice["logprobs"]
    assert choice["text"].startswith("count to tenone two")
    assert len(logprobs["tokens"]) == len(prompt_ids) + 3
    assert logprobs["token_logprobs"][0] is None and logprobs["top_logprobs"][0] is None
    assert logprobs["token_logprobs"][1:] == [0.0] * (len(prompt_ids) + 2)
    assert "".join(logprobs["tokens"]) == choice["text"]
    with httpx.stream("POST", f"{ext_server.base_url}/v1/completions", json={**body, "stream": True}) as response:
        events = [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: {")]
    tokens = [t for event in events for c in event["choices"] if c["logprobs"] for t in c["logprobs"]["tokens"]]
    assert tokens == logprobs["tokens"]
    for event in events:
        check("completion_chunk", _spec_allowance(event))


# -- usage: continuous_usage_stats, cached_tokens ---------------------------------------------------

def test_continuous_usage_counts_the_tokens_so_far(ext_server):
    chunks = stream(ext_server.base_url, "/v1/completions",
                    {"model": MODEL, "prompt": "count to ten", "max_tokens": 6,
                     "stream_options": {"include_usage": True, "continuous_usage_stats": True}}, "completion_chunk")
    text_counts = [chunk["usage"]["completion_tokens"] for chunk in chunks if chunk["choices"]
                   and chunk["choices"][0]["text"]]
    assert text_counts == [1, 2, 3, 4, 5, 6]
    assert chunks[-1]["usage"]["completion_tokens"] == 6 and chunks[-1]["choices"] == []


def test_cached_tokens_are_reported(ext_server, scripted_client):
    for usage in (chat(ext_server)["usage"], completion(ext_server, "count to ten")["usage"]):
        # The scripted engine has no prefix cache: nothing read from it, nothing written to it.
        assert usage["prompt_tokens_details"] == {"cached_tokens": 0, "cache_write_tokens": 0}
    response = scripted_client.responses.create(model=MODEL, input="say hello")
    assert response.usage.input_tokens_details.cached_tokens == 0


# -- what real clients send at their defaults is never refused ----------------------------------------

def test_sdk_calls_with_client_default_fields_are_served(scripted_client: OpenAI):
    reply = scripted_client.chat.completions.create(
        model=MODEL, messages=HELLO, store=False, metadata={"app": "test"}, service_tier="auto", user="u-1",
        parallel_tool_calls=True, prompt_cache_key="k", safety_identifier="s", top_logprobs=0, logprobs=True,
        verbosity="medium", modalities=["text"], extra_body={"prompt_cache_retention": "24h"})
    assert reply.choices[0].message.content == "Hello! How can I help you today?"
    with scripted_client.chat.completions.stream(model=MODEL, messages=HELLO,
                                                 stream_options={"include_usage": True}) as events:
        assert events.get_final_completion().usage.prompt_tokens_details.cached_tokens == 0
    response = scripted_client.responses.create(
        model=MODEL, input="say hello", include=["reasoning.encrypted_content"], truncation="auto", store=False,
        parallel_tool_calls=True, prompt_cache_key="k", service_tier="default", text={"verbosity": "medium"},
        max_tool_calls=2, metadata={"a": "b"})
    assert response.output_text == "Hello! How can I help you today?" and response.truncation == "auto"
