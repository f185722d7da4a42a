"""Prompt scoring on llama.cpp (rostra/engines/llamacpp_scoring.py): the embedded GGUF's prompt logprobs equal
what the transformers engine computes on the checkpoint made from the same GGUF, within the quantized
arithmetic's tolerance (llama.cpp multiplies Q4_1 weights by 8-bit-quantized activations)."""

from __future__ import annotations

import asyncio

import pytest

from rostra.core import Prompt, SamplingParams
from rostra.embedded import embedded_model_path
from rostra.engines.llamacpp import LlamaCppEngine
from rostra.engines.llamacpp_scoring import forced_runs

# A chat turn: its <|im_end|> is an end-of-generation token, which is scored on its own.
CHAT = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\nThe capital is Paris."
# Measured gaps (Q4_1 arithmetic): median 0.006 nats, 0.14 at a logprob of -0.97, 0.25 at -9.2 (the rarer the
# token, the larger the gap).
TOLERANCE = {"abs": 0.2, "rel": 0.05}
CLEAR_LEAD = 0.3  # where the reference's top choice leads by this much, both engines agree on it


def test_forced_runs_put_each_end_of_generation_token_alone():
    assert forced_runs([1, 5, 6, 2, 7, 2], {2}) == [(1, 3), (3, 4), (4, 5), (5, 6)]
    assert forced_runs([1, 5, 6], {2}) == [(1, 3)]
    assert forced_runs([1], {2}) == []


@pytest.fixture(scope="module")
def llama():
    engine = LlamaCppEngine(embedded_model_path(), "smollm2", max_model_len=512, parallel=2, speculative="off")
    asyncio.run(engine.start())
    yield engine
    asyncio.run(engine.close())


@pytest.fixture(scope="module")
def transformers(transformers_checkpoint):
    from rostra.engines.transformers import TransformersEngine

    engine = TransformersEngine(str(transformers_checkpoint), parallel=1)
    asyncio.run(engine.start())
    yield engine
    asyncio.run(engine.close())


async def outputs_of(engine, request_id: str, ids: list[int], params: SamplingParams):
    return [output async for output in engine.generate(request_id, Prompt(ids), params)]


def test_prompt_logprobs_equal_the_transformers_engines(llama, transformers):
    ids = asyncio.run(llama.tokenize(CHAT, add_special=True))
    assert 2 in ids[1:], "the prompt holds an end-of-generation token"
    params = SamplingParams(max_tokens=1, temperature=0, prompt_logprobs=3)
    ours = asyncio.run(outputs_of(llama, "scored", ids, params))[0].prompt_logprobs
    reference = asyncio.run(outputs_of(transformers, "reference", ids, params))[0].prompt_logprobs
    assert ours is not None and reference is not None and len(ours) == len(reference) == len(ids)
    assert ours[0] is None and reference[0] is None
    for position, (step, expected) in enumerate(zip(ours[1:], reference[1:]), start=1):
        assert step.token_id == ids[position] and step.token_bytes == llama.token_bytes(ids[position])
        assert step.logprob == pytest.approx(expected.logprob, **TOLERANCE), position
        tops = [top.logprob for top in step.top_logprobs]
        assert len(tops) == 3 and tops == sorted(tops, reverse=True) and step.logprob <= tops[0] + 1e-6
        if expected.top_logprobs[0].logprob - expected.top_logprobs[1].logprob > CLEAR_LEAD:
            assert step.top_logprobs[0].token_id == expected.top_logprobs[0].token_id, position


def test_a_scored_prompt_generates_as_an_unscored_one_from_the_warm_slot(llama):
    ids = asyncio.run(llama.tokenize(CHAT.rsplit("The capital", 1)[0], add_special=True))
    plain = asyncio.run(outputs_of(llama, "plain", ids, SamplingParams(max_tokens=8, temperature=0)))
    scored = asyncio.run(outputs_of(llama, "then", ids, SamplingParams(max_tokens=8, temperature=0,
                                                                          prompt_logprobs=0)))
    assert scored[0].prompt_logprobs is not None and not scored[0].tokens
    assert all(not step.top_logprobs for step in scored[0].prompt_logprobs[1:])  # 0: the token's own logprob only
    assert [s.token_id for o in scored for s in o.tokens] == [s.token_id for o in plain for s in o.tokens]
    assert all(output.prompt_logprobs is None for output in scored[1:])
    assert scored[-1].cached_tokens is not None and scored[-1].cached_tokens >= len(ids) - 2
    assert llama.running_requests() == 0 and llama.slots_free() == 2
