"""The seeds' fields that change generation, on llama.cpp with the embedded model (tests/test_seeds.py: the
same fields on the scripted engine, exactly)."""

from __future__ import annotations

import json
import re

import pytest

from servers import RunningServer
from wire import check, post

MODEL = "SmolLM2-135M-Instruct"
ASK = [{"role": "user", "content": "Tell me about the sea in three sentences."}]
GREEDY = {"model": MODEL, "temperature": 0, "max_tokens": 40}
SEEDED = {"model": MODEL, "temperature": 1.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0, "seed": 1234, "max_tokens": 40}


@pytest.fixture(scope="module")
def real_server():
    """The embedded model on llama.cpp, as `rostra serve` starts it (a generous start-up: CI machines are shared)."""
    server = RunningServer(["--parallel", "2", "--max-model-len", "2048"], startup_timeout=600)
    yield server
    server.stop()


def chat(server, **fields) -> dict:
    response = post(server.base_url, "/v1/chat/completions", {**GREEDY, "messages": ASK, **fields}, timeout=300)
    assert response.status_code == 200, response.text
    return check("chat", response.json())


def content(reply: dict) -> str:
    return reply["choices"][0]["message"]["content"]


def test_stop_reason_on_llama_cpp(real_server):
    free = chat(real_server, return_token_ids=True)["choices"][0]
    word = free["message"]["content"].split()[2]
    stopped = chat(real_server, stop=[word])["choices"][0]
    assert stopped["stop_reason"] == stopped["stop_str"] == word and stopped["finish_reason"] == "stop"
    third = free["token_ids"][2]
    by_token = chat(real_server, stop_token_ids=[third])["choices"][0]
    assert by_token["stop_reason"] == third and by_token["finish_reason"] == "stop"
    assert free["stop_reason"] is None


def test_structured_outputs_choice(real_server):
    assert content(chat(real_server, structured_outputs={"choice": ["calm", "stormy"]})) in ("calm", "stormy")


def test_json_schema(real_server):
    schema = {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"],
              "additionalProperties": False}
    reply = json.loads(content(chat(real_server, json_schema=schema, max_tokens=60)))
    assert set(reply) == {"colour"} and isinstance(reply["colour"], str)


def test_regex_pattern(real_server):
    assert re.fullmatch(r"[0-9]{3}-[a-z]{2}", content(chat(real_server, regex_pattern="[0-9]{3}-[a-z]{2}")))


def test_banned_strings(real_server):
    free = content(chat(real_server))
    word = next(w.strip(",.!") for w in free.split() if len(w.strip(",.!")) >= 4)
    banned = content(chat(real_server, banned_strings=[word]))
    assert word in free and word not in banned and banned.strip()


def test_banned_tokens(real_server):
    first = chat(real_server, return_token_ids=True)["choices"][0]["token_ids"][0]
    again = chat(real_server, banned_tokens=str(first), return_token_ids=True)["choices"][0]["token_ids"]
    assert again[0] != first and first not in again


def test_allowed_tokens(real_server):
    allowed = post(real_server.base_url, "/tokenize", {"model": MODEL, "prompt": " the sea is blue and calm",
                                                       "add_special_tokens": False}).json()["tokens"]
    ids = chat(real_server, allowed_tokens=",".join(map(str, allowed)), max_tokens=8,
               return_token_ids=True)["choices"][0]["token_ids"]
    assert ids and set(ids) <= set(allowed)


def test_ban_eos_token(real_server):
    hello = [{"role": "user", "content": "Say hello in one short sentence."}]
    short = chat(real_server, messages=hello, max_tokens=60)
    assert short["choices"][0]["finish_reason"] == "stop" and short["usage"]["completion_tokens"] < 60
    held = chat(real_server, messages=hello, max_tokens=60, ban_eos_token=True)
    assert held["choices"][0]["finish_reason"] == "length" and held["usage"]["completion_tokens"] == 60


@pytest.mark.parametrize("sampler", [
    {"typical_p": 0.3},
    {"mirostat": 2, "mirostat_tau": 2.0, "mirostat_eta": 0.5},
    {"dry_multiplier": 3.0, "dry_base": 3.0, "dry_allowed_length": 1, "dry_penalty_last_n": -1},
    {"xtc_probability": 1.0, "xtc_threshold": 0.05},
])
def test_native_samplers_change_the_sampling(real_server, sampler):
    """Same seed, same prompt: llama.cpp's sampler (sent under its own name) makes another text."""
    baseline = content(chat(real_server, **SEEDED))
    assert content(chat(real_server, **SEEDED)) == baseline  # the seed alone decides
    assert content(chat(real_server, **SEEDED, **sampler)) != baseline


def test_native_samplers_go_to_llama_cpp_under_its_names():
    from rostra.core import NativeSamplers, SamplingParams
    from rostra.engines.llamacpp import _request_body

    samplers = NativeSamplers(typical_p=0.5, mirostat=2, mirostat_tau=4.0, mirostat_eta=0.2, dry_multiplier=0.8,
                              dry_base=1.75, dry_allowed_length=2, dry_penalty_last_n=-1,
                              dry_sequence_breakers=("\n",), xtc_probability=0.5, xtc_threshold=0.1)
    body = _request_body([1, 2], SamplingParams(8, samplers=samplers), 100, context_length=2048)
    assert {name: body[name] for name in samplers.given()} == {**samplers.given(), "dry_sequence_breakers": ["\n"],
                                                              "dry_penalty_last_n": 2048}  # -1: the whole context
    assert not {"typical_p", "mirostat", "dry_multiplier"} & set(_request_body([1], SamplingParams(8), 100))


def test_bad_words_ban_a_longer_word_only_where_it_completes(real_server):
    """The first token of a banned word of several tokens stays allowed (llama.cpp's own bias would ban it
    everywhere): the answer still starts with it, and the word never appears."""
    ids = chat(real_server, return_token_ids=True)["choices"][0]["token_ids"]
    word = post(real_server.base_url, "/detokenize", {"model": MODEL, "tokens": ids[:2]}).json()["prompt"]
    first = post(real_server.base_url, "/detokenize", {"model": MODEL, "tokens": ids[:1]}).json()["prompt"]
    assert len(word.strip()) > len(first.strip()) > 0
    banned = chat(real_server, bad_words=[word.strip()], return_token_ids=True)["choices"][0]
    assert banned["token_ids"][0] == ids[0]  # the word's first token is still sampled
    assert word.strip() not in banned["message"]["content"] and len(banned["token_ids"]) > 2
