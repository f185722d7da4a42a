"""vLLM's extensions on llama.cpp with the embedded model: min_tokens, bad_words, allowed_token_ids,
cached_tokens from llama.cpp's prefix cache, prompt scoring (echo with logprobs, prompt_logprobs), and clear
400s for what llama.cpp cannot do."""

from __future__ import annotations

import json

import httpx
import pytest
from openai import OpenAI

from wire import check, check_error, echoed_as_spec_says, post, stream

MODEL = "SmolLM2-135M-Instruct"
HELLO = [{"role": "user", "content": "Say hello in one short sentence."}]
GREEDY = {"model": MODEL, "temperature": 0, "max_tokens": 60}


@pytest.fixture(scope="module")
def client(real_server) -> OpenAI:
    return OpenAI(base_url=f"{real_server.base_url}/v1", api_key="unused", max_retries=0)


def chat(server, **fields) -> dict:
    response = post(server.base_url, "/v1/chat/completions", {**GREEDY, "messages": HELLO, **fields})
    assert response.status_code == 200, response.text
    return check("chat", response.json())


def test_min_tokens_holds_back_the_end(real_server):
    free = chat(real_server)
    assert free["choices"][0]["finish_reason"] == "stop"
    natural = free["usage"]["completion_tokens"]
    longer = chat(real_server, min_tokens=natural + 8)
    assert longer["usage"]["completion_tokens"] >= natural + 8
    assert longer["choices"][0]["message"]["content"].startswith(free["choices"][0]["message"]["content"].rstrip())


def test_bad_words_are_never_generated(real_server):
    free = chat(real_server)["choices"][0]["message"]["content"]
    word = next(w.strip(",.!") for w in free.split() if len(w.strip(",.!")) >= 4)
    banned = chat(real_server, bad_words=[word])["choices"][0]["message"]["content"]
    assert word in free and word not in banned and banned.strip()


def test_allowed_token_ids_are_all_that_is_sampled(real_server):
    allowed = post(real_server.base_url, "/tokenize", {"prompt": " yes no maybe", "add_special_tokens": False}
                   ).json()["tokens"]
    reply = chat(real_server, allowed_token_ids=allowed, max_tokens=8, temperature=1, seed=3, return_token_ids=True)
    choice = reply["choices"][0]
    assert len(choice["token_ids"]) == 8 and set(choice["token_ids"]) <= set(allowed)
    assert choice["finish_reason"] == "length"  # the end token is not among them


LONG = "Here is a long note about caching that repeats itself to be long enough. " * 12


def test_cached_tokens_come_from_the_prefix_cache(real_server, client):
    messages = [{"role": "user", "content": LONG + "Summarise it."}]
    first = chat(real_server, messages=messages, max_tokens=4)["usage"]
    second = chat(real_server, messages=messages, max_tokens=4)["usage"]
    assert first["prompt_tokens"] == second["prompt_tokens"] > 100
    assert 0 < second["prompt_tokens_details"]["cached_tokens"] < second["prompt_tokens"]
    # What the prefix cache did not hold was evaluated and written into it (llama.cpp's timings.prompt_n): the first
    # request writes most of its prompt, the second (its prefix cached) almost none.
    for usage in (first, second):
        details = usage["prompt_tokens_details"]
        assert details["cached_tokens"] + details["cache_write_tokens"] == usage["prompt_tokens"]
    assert second["prompt_tokens_details"]["cache_write_tokens"] < first["prompt_tokens_details"]["cache_write_tokens"]
    prompt = LONG + "In short:"
    for _ in range(2):
        reply = post(real_server.base_url, "/v1/completions", {**GREEDY, "prompt": prompt, "max_tokens": 4})
    usage = reply.json()["usage"]
    assert usage["prompt_tokens_details"]["cached_tokens"] > 100
    for _ in range(2):
        response = client.responses.create(model=MODEL, input=LONG + "Go on.", max_output_tokens=4, store=False)
    assert response.usage.input_tokens_details.cached_tokens > 100
    details = response.usage.input_tokens_details
    assert 0 < details.cache_write_tokens and details.cached_tokens + details.cache_write_tokens == response.usage.input_tokens



def test_cache_salt_isolates_the_prefix_cache(real_server):
    """A prompt cached under one salt is read afresh under another (and with none); the same salt reuses it.
    (A text of its own: no other test's unsalted prompt shares its prefix.)"""
    messages = [{"role": "user", "content": "A salted note for one tenant only, long enough to cache. " * 14}]
    # The same salt right after the first: on the session's shared server, every slot already holds some
    # other test's prompt, and a request of another salt may take (and re-read) this one's slot as the
    # cheapest to give up, which is eviction, not a breach.
    first = chat(real_server, messages=messages, max_tokens=2, cache_salt="tenant-a")["usage"]
    same = chat(real_server, messages=messages, max_tokens=2, cache_salt="tenant-a")["usage"]
    other = chat(real_server, messages=messages, max_tokens=2, cache_salt="tenant-b")["usage"]
    unsalted = chat(real_server, messages=messages, max_tokens=2)["usage"]
    assert first["prompt_tokens"] > 100
    assert other["prompt_tokens_details"]["cached_tokens"] == 0
    # Unsalted, at most the chat template's opening (its default system prompt) of another unsalted prompt.
    assert unsalted["prompt_tokens_details"]["cached_tokens"] < 0.3 * unsalted["prompt_tokens"]
    assert same["prompt_tokens_details"]["cached_tokens"] > 100


def test_continuous_usage_is_the_running_count(real_server):
    from wire import stream

    chunks = stream(real_server.base_url, "/v1/chat/completions",
                    {**GREEDY, "messages": HELLO, "max_tokens": 10, "ignore_eos": True,
                     "stream_options": {"include_usage": True, "continuous_usage_stats": True}}, "chat_chunk")
    counts = [chunk["usage"]["completion_tokens"] for chunk in chunks if chunk["choices"]]
    assert counts == sorted(counts) and counts[-1] == 10 and len(set(counts)) >= 5


def test_echo_with_logprobs_scores_the_prompt(real_server):
    """A log-likelihood evaluation (lm-eval-harness' request): the prompt back, each token scored, the first null."""
    request = {**GREEDY, "prompt": "The capital of France is Paris.", "echo": True, "logprobs": 2, "max_tokens": 0}
    whole = post(real_server.base_url, "/v1/completions", request).json()
    check("completion", echoed_as_spec_says(whole))
    logprobs = whole["choices"][0]["logprobs"]
    assert whole["choices"][0]["text"] == request["prompt"] and "".join(logprobs["tokens"]) == request["prompt"]
    assert logprobs["token_logprobs"][0] is None and logprobs["top_logprobs"][0] is None
    assert len(logprobs["tokens"]) == whole["usage"]["prompt_tokens"] > 3
    for value, tops in zip(logprobs["token_logprobs"][1:], logprobs["top_logprobs"][1:]):
        assert value <= 0 and len(tops) == 2 and value <= max(tops.values()) + 1e-6
    with httpx.stream("POST", f"{real_server.base_url}/v1/completions", json={**request, "stream": True},
                      timeout=120) as response:
        chunks = [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: {")]
    for chunk in chunks:
        check("completion_chunk", echoed_as_spec_says(chunk))
    folded = [lp for chunk in chunks for choice in chunk["choices"] if (lp := choice.get("logprobs"))]
    assert [value for lp in folded for value in lp["token_logprobs"]] == logprobs["token_logprobs"]


def test_prompt_logprobs_on_chat_and_completions(real_server):
    chat_reply = chat(real_server, prompt_logprobs=1, max_tokens=3)
    scored = chat_reply["prompt_logprobs"]
    assert scored[0] is None and len(scored) == chat_reply["usage"]["prompt_tokens"]
    assert all(1 <= len(entry) <= 2 and all(v["logprob"] <= 0 for v in entry.values()) for entry in scored[1:])
    completion = post(real_server.base_url, "/v1/completions", {**GREEDY, "prompt": "Hi there", "max_tokens": 2,
                                                                  "prompt_logprobs": 0}).json()
    scored = completion["choices"][0]["prompt_logprobs"]
    assert scored[0] is None and all(len(entry) == 1 for entry in scored[1:])


@pytest.mark.parametrize("path,body,param", [
    ("/v1/chat/completions", {"messages": HELLO, "min_tokens": 3, "response_format": {"type": "json_object"}},
     "min_tokens"),
])
def test_what_llama_cpp_cannot_do_is_a_400(real_server, path, body, param):
    error = check_error(post(real_server.base_url, path, {**GREEDY, **body}), 400, param)
    assert "not supported" in error["message"] or "cannot" in error["message"]
