"""The transformers engine, driven directly (no HTTP) on the embedded model as a checkpoint."""

import asyncio
import json
import os
import queue
import re
import time

import jsonschema
import pytest
import torch

from rostra.core import Prompt, SamplingParams
from rostra.engines import thread_budget
from rostra.engines.thread_budget import MachineSample
from rostra.engines.transformers import TransformersEngine, cpu_threads
from rostra.engines.transformers_batch import BatchDecoder, Sequence, prefill_groups
from rostra.engines.transformers_sampling import RequestSampler
from rostra.guided.constraints import choice_grammar, regex_grammar

QUESTIONS = ["Say hello in one short sentence.", "What is 2+2?", "Name three colors.", "Write a haiku about rain."]


@pytest.fixture(scope="module")
def engine(transformers_checkpoint):
    engine = TransformersEngine(str(transformers_checkpoint), parallel=4)
    asyncio.run(engine.start())
    yield engine
    asyncio.run(engine.close())


def chat_ids(engine, question: str) -> list[int]:
    text = engine.tokenizer.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True,
                                                tokenize=False)
    return engine.tokenizer.encode(text, add_special_tokens=False)


async def collect(engine, request_id: str, ids: list[int], params: SamplingParams):
    """All outputs of one generation."""
    return [output async for output in engine.generate(request_id, Prompt(ids), params)]


def tokens_of(outputs) -> list[int]:
    return [step.token_id for output in outputs for step in output.tokens]


GREEDY = SamplingParams(max_tokens=10, temperature=0)


def test_greedy_equals_transformers_generate(engine):
    ids = chat_ids(engine, QUESTIONS[2])
    outputs = asyncio.run(collect(engine, "greedy", ids, GREEDY))
    with torch.inference_mode():
        reference = engine.hf_model.generate(torch.tensor([ids], device=engine.device), max_new_tokens=10, do_sample=False)[0, len(ids):]
    reference = [t for t in reference.tolist() if t not in engine.eos_ids]
    assert tokens_of(outputs) == reference
    assert outputs[-1].finish_reason == ("length" if len(reference) == 10 else "stop")


def test_streams_one_token_per_output_and_exact_bytes(engine):
    ids = chat_ids(engine, QUESTIONS[0])
    outputs = asyncio.run(collect(engine, "stream", ids, SamplingParams(max_tokens=10, temperature=0,
                                                                         ignore_eos=True)))
    assert [len(o.tokens) for o in outputs] == [1] * 10
    assert [o.finish_reason for o in outputs] == [None] * 9 + ["length"]
    text = b"".join(step.token_bytes for o in outputs for step in o.tokens).decode()
    assert text == engine.tokenizer.decode(tokens_of(outputs))


def test_ends_at_eos_with_stop_and_no_end_token(engine):
    outputs = asyncio.run(collect(engine, "eos", chat_ids(engine, QUESTIONS[1]),
                                  SamplingParams(max_tokens=60, temperature=0)))
    assert outputs[-1].finish_reason == "stop"
    assert 0 < len(tokens_of(outputs)) < 60 and not set(tokens_of(outputs)) & engine.eos_ids


def test_token_bytes_are_exact(engine):
    for text in ["Hello, world!", "  two spaces\tand a tab\n", "naïve café", "日本語のテキスト", "emoji 🦀🎉 end"]:
        ids = engine.tokenizer.encode(text, add_special_tokens=False)
        assert b"".join(engine.token_bytes(i) for i in ids).decode("utf-8") == text
    assert engine.token_bytes(engine.tokenizer.convert_tokens_to_ids("<|im_start|>")) == b"<|im_start|>"
    assert all(engine.token_bytes(i) == b"" for i in engine.eos_ids)


def test_logprobs_are_the_models(engine):
    ids = chat_ids(engine, QUESTIONS[0])
    outputs = asyncio.run(collect(engine, "logprobs", ids, SamplingParams(max_tokens=6, temperature=0,
                                                                           top_logprobs=5)))
    for step in (s for o in outputs for s in o.tokens):
        tops = [t.logprob for t in step.top_logprobs]
        assert len(tops) == 5 and tops == sorted(tops, reverse=True) and all(t <= 0 for t in tops)
        assert step.top_logprobs[0].token_id == step.token_id  # greedy takes the top-1
        assert step.logprob == pytest.approx(tops[0]) and step.logprob <= 0
        assert step.top_logprobs[0].token_bytes == step.token_bytes
    with torch.inference_mode():
        first = torch.log_softmax(engine.hf_model(torch.tensor([ids], device=engine.device)).logits[0, -1].float(), dim=-1)
    assert outputs[0].tokens[0].logprob == pytest.approx(float(first.max()), abs=1e-4)


def test_seed_reproduces_even_beside_other_requests(engine):
    ids = chat_ids(engine, "Tell me a story.")
    params = SamplingParams(max_tokens=8, temperature=1.0, seed=1234, ignore_eos=True)

    async def run():
        alone = tokens_of(await collect(engine, "seed-a", ids, params))
        crowded = await asyncio.gather(collect(engine, "seed-b", ids, params),
                                       collect(engine, "other", chat_ids(engine, QUESTIONS[3]), params))
        other_seed = tokens_of(await collect(engine, "seed-c", ids, SamplingParams(
            max_tokens=8, temperature=1.0, seed=99, ignore_eos=True)))
        return alone, tokens_of(crowded[0]), other_seed

    alone, crowded, other_seed = asyncio.run(run())
    assert alone == crowded
    assert alone != other_seed


def test_concurrent_requests_are_batched_and_match_their_solo_runs(engine):
    prompts = [chat_ids(engine, q) for q in QUESTIONS]

    async def run():
        solo = [tokens_of(await collect(engine, f"solo-{i}", ids, GREEDY)) for i, ids in enumerate(prompts)]
        widest = 0

        async def watch():
            nonlocal widest
            while True:
                widest = max(widest, engine.batch_size())
                await asyncio.sleep(0.01)

        watcher = asyncio.create_task(watch())
        together = await asyncio.gather(*(collect(engine, f"batch-{i}", ids, GREEDY) for i, ids in enumerate(prompts)))
        watcher.cancel()
        return solo, [tokens_of(t) for t in together], widest

    solo, together, widest = asyncio.run(run())
    assert together == solo
    assert widest > 1  # they shared decode steps
    deadline = time.monotonic() + 5  # finished rows leave the batch at the worker's next step
    while engine.batch_size() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert engine.running_requests() == 0 and engine.batch_size() == 0


def test_waiting_prompts_are_prefilled_together_and_match_their_solo_runs(engine):
    """Prompts of different lengths, all waiting before the loop starts: one left-padded prefill,
    then a decode batch that a later group joins; greedy tokens equal each prompt run alone. One
    prompt ends at its first token (its row leaves the group before joining the batch)."""
    prompts = [chat_ids(engine, q) for q in [*QUESTIONS, "Hi", "Explain in detail why the sky is blue at noon."]]
    budgets = [10, 10, 1, 10, 10, 10]
    solo = [tokens_of(asyncio.run(collect(engine, f"alone-{i}", ids, SamplingParams(max_tokens=n, temperature=0))))
            for i, (ids, n) in enumerate(zip(prompts, budgets))]

    decoder = BatchDecoder(engine.hf_model, 8, engine.eos_ids, engine.token_bytes)
    groups: list[list[str]] = []
    prefill = decoder._prefill
    decoder._prefill = lambda group: (groups.append([s.request_id for s in group]), prefill(group))  # type: ignore[method-assign]
    outputs: dict[str, queue.Queue] = {}

    def submit(index: int) -> None:
        params = SamplingParams(max_tokens=budgets[index], temperature=0)
        sampler = RequestSampler(params, prompts[index], engine.vocab_size, engine._usable_vocab,
                                 sorted(engine.eos_ids), None, engine.device)
        outputs[str(index)] = queue.Queue()
        decoder.submit(Sequence(str(index), prompts[index], budgets[index], sampler, outputs[str(index)].put))

    def tokens(index: int) -> list[int]:
        got = []
        while True:
            output = outputs[str(index)].get(timeout=60)
            got += [step.token_id for step in output.tokens]
            if output.finish_reason:
                return got

    for index in range(4):
        submit(index)
    decoder.start()
    try:
        first = [tokens(0)]  # the batch is decoding; the next two wait for the loop's next admission
        submit(4)
        submit(5)
        together = first + [tokens(index) for index in range(1, 6)]
    finally:
        decoder.stop()
    assert sorted(groups[0]) == ["0", "1", "2", "3"]  # (longest first)
    assert together == solo


def test_on_cpu_decode_steps_leave_a_core_and_prefills_take_every_core(engine, monkeypatch):
    """Without --threads the engine's decode thread runs torch on all cores but one for decode steps and on
    every core for a prefill, its decode count restored after. (torch's count is per thread once a thread
    has used it, so it is read in the forward passes themselves, in the engine's own decode thread.) The machine
    is taken as quiet: with other processes busy, the thread budget would give it fewer (test_thread_budget.py)."""
    monkeypatch.setattr(thread_budget, "sample_machine", lambda: MachineSample(0.0, 0.0, time.monotonic()))
    thread_budget.process_budget().set_taken(0)
    seen: list[tuple[int, int]] = []  # (tokens in the forward pass, torch's threads meanwhile)
    hook = engine.hf_model.register_forward_pre_hook(
        lambda module, args, kwargs: seen.append((kwargs["input_ids"].shape[1], torch.get_num_threads())),
        with_kwargs=True)
    try:
        ids = chat_ids(engine, QUESTIONS[0])
        asyncio.run(collect(engine, "threads", ids, SamplingParams(max_tokens=3, temperature=0, ignore_eos=True)))
    finally:
        hook.remove()
    assert seen[0] == (len(ids), len(os.sched_getaffinity(0)))  # the prefill
    assert [threads for _, threads in seen[1:]] == [cpu_threads()] * 2  # the two decode steps


def test_prefill_groups_keep_padding_small_and_scored_prompts_alone():
    def sequence(name: str, length: int, scored: bool = False) -> Sequence:
        params = SamplingParams(max_tokens=4, prompt_logprobs=1 if scored else None)
        sampler = RequestSampler(params, [1] * length, 8, 8, [], None, torch.device("cpu"))
        return Sequence(name, [1] * length, 4, sampler, lambda output: None)

    waiting = [sequence("short", 30), sequence("scored", 40, scored=True), sequence("long", 1000),
               sequence("mid", 45), sequence("long2", 900)]
    groups = [[s.request_id for s in group] for group in prefill_groups(waiting)]
    # 30 and 45 pad little beside each other; beside 1000 and 900 they would pad ~1,900 tokens.
    assert groups == [["scored"], ["long", "long2"], ["mid", "short"]]


def test_abort_and_early_close_end_the_generation(engine):
    ids = chat_ids(engine, "Tell me a long story.")
    long = SamplingParams(max_tokens=500, ignore_eos=True, temperature=0)

    async def aborted():
        count = 0
        async for output in engine.generate("to-abort", Prompt(ids), long):
            count += len(output.tokens)
            if count == 3:
                await engine.abort("to-abort")
        return count

    async def closed_early():
        generation = engine.generate("to-close", Prompt(ids), long)
        async for _ in generation:
            break
        await generation.aclose()
        for _ in range(100):  # the worker drops the row at its next step
            if engine.batch_size() == 0:
                return True
            await asyncio.sleep(0.05)
        return False

    assert asyncio.run(aborted()) == 3
    assert asyncio.run(closed_early())
    assert engine.running_requests() == 0


def test_json_schema_constraint(engine):
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
              "required": ["name", "age"], "additionalProperties": False}
    ids = chat_ids(engine, "Invent a person.")
    outputs = asyncio.run(collect(engine, "json", ids, SamplingParams(max_tokens=60, temperature=0,
                                                                       json_schema=schema)))
    assert outputs[-1].finish_reason == "stop"
    jsonschema.validate(json.loads(engine.tokenizer.decode(tokens_of(outputs))), schema)


@pytest.mark.parametrize("grammar, pattern", [
    (choice_grammar(["yes", "no"]), r"yes|no"),  # GBNF
    ('root ::= "n=" num\nnum ::= [1-9] [0-9]?', r"n=[1-9][0-9]?"),  # GBNF with rules
    (regex_grammar(r"[0-9]{3}-[a-z]{2,5}/ok"), r"[0-9]{3}-[a-z]{2,5}/ok"),  # llguidance's own format
])
def test_grammar_constraints(engine, grammar, pattern):
    outputs = asyncio.run(collect(engine, "grammar", chat_ids(engine, "Is the sky blue? Give a code."),
                                  SamplingParams(max_tokens=20, temperature=0.7, seed=3, grammar=grammar)))
    assert re.fullmatch(pattern, engine.tokenizer.decode(tokens_of(outputs)))
    assert outputs[-1].finish_reason == "stop"


def test_logit_bias_and_invalid_grammar(engine):
    target = engine.tokenizer.encode(" banana", add_special_tokens=False)[0]
    outputs = asyncio.run(collect(engine, "bias", chat_ids(engine, QUESTIONS[0]),
                                  SamplingParams(max_tokens=3, temperature=0, logit_bias={target: 100})))
    assert tokens_of(outputs) == [target] * 3
    from rostra.engines.base import EngineError

    with pytest.raises(EngineError):
        asyncio.run(collect(engine, "bad", [1, 2], SamplingParams(max_tokens=3, grammar="root ::= (")))


def sampler(**params) -> RequestSampler:
    return RequestSampler(SamplingParams(max_tokens=1, **params), prompt_ids=[0], vocab_size=4, usable_vocab=4,
                          eos_ids=[3], constraint=None, device=torch.device("cpu"))


def draws(params: dict, probs: list[float], n: int = 200) -> set[int]:
    chooser = sampler(**params)
    logits = torch.tensor(probs).log()
    return {chooser.sample(logits).token_id for _ in range(n)}


def test_truncations_and_penalties_on_a_known_distribution():
    probs = [0.5, 0.3, 0.15, 0.05]
    assert draws({"temperature": 1.0, "seed": 1}, probs) == {0, 1, 2, 3}
    assert draws({"temperature": 1.0, "top_k": 2, "seed": 1}, probs) == {0, 1}
    assert draws({"temperature": 1.0, "top_p": 0.7, "seed": 1}, probs) == {0, 1}  # 0.5 + 0.3 reaches 0.7
    assert draws({"temperature": 1.0, "min_p": 0.5, "seed": 1}, probs) == {0, 1}  # >= 0.25
    assert draws({"temperature": 0}, probs) == {0}
    assert draws({"temperature": 1.0, "ignore_eos": True, "seed": 1}, probs) == {0, 1, 2}
    penalized = sampler(temperature=0, presence_penalty=0.5, frequency_penalty=0.25, top_logprobs=4)
    logits = torch.zeros(4)
    penalized.accept(1)
    penalized.accept(1)
    raw = dict(penalized.sample(logits).top)
    # Token 1 seen twice: 0.5 + 2 * 0.25 below the others (their logprobs are equal).
    assert raw[0] - raw[1] == pytest.approx(1.0) and raw[0] == pytest.approx(raw[2])
    repeated = sampler(temperature=0, repetition_penalty=2.0, top_logprobs=4)  # prompt [0] counts as seen
    out = dict(repeated.sample(torch.tensor([2.0, 2.0, -1.0, -1.0])).top)
    assert out[1] - out[0] == pytest.approx(1.0)  # 2.0 / 2


def test_cli_needs_a_model_for_the_transformers_engine():
    from rostra.engines.registry import build_engine
    from rostra.config import Settings

    with pytest.raises(SystemExit, match="checkpoint directory"):
        build_engine(Settings(engine="transformers"))


# vLLM's extensions in the transformers engine's sampler

def test_min_tokens_holds_back_the_end_token(engine):
    ids = chat_ids(engine, QUESTIONS[1])
    free = tokens_of(asyncio.run(collect(engine, "free", ids, SamplingParams(max_tokens=60, temperature=0))))
    longer = asyncio.run(collect(engine, "min", ids, SamplingParams(max_tokens=60, temperature=0,
                                                                     min_tokens=len(free) + 5)))
    assert len(free) < 55 and len(tokens_of(longer)) >= len(free) + 5
    assert tokens_of(longer)[:len(free)] == free  # greedy: the same tokens until the end was held back


def test_bad_words_ban_the_last_token_after_the_others(engine):
    ids = chat_ids(engine, QUESTIONS[2])
    free = tokens_of(asyncio.run(collect(engine, "free-bad", ids, SamplingParams(max_tokens=20, temperature=0))))
    pair = tuple(free[2:4])  # a two-token "word" the greedy answer writes
    banned = tokens_of(asyncio.run(collect(engine, "bad", ids, SamplingParams(
        max_tokens=20, temperature=0, bad_words_ids=(pair, (free[0],))))))
    assert free[0] not in banned
    assert all(tuple(banned[i:i + 2]) != pair for i in range(len(banned) - 1))


def test_allowed_token_ids_are_all_that_is_sampled(engine):
    allowed = tuple(engine.tokenizer.encode(" yes no maybe", add_special_tokens=False))
    out = tokens_of(asyncio.run(collect(engine, "allowed", chat_ids(engine, QUESTIONS[0]), SamplingParams(
        max_tokens=12, temperature=1.0, seed=5, allowed_token_ids=allowed))))
    assert len(out) == 12 and set(out) <= set(allowed)


def test_prompt_logprobs_score_every_prompt_token(engine):
    ids = chat_ids(engine, QUESTIONS[0])
    outputs = asyncio.run(collect(engine, "scored", ids, SamplingParams(max_tokens=2, temperature=0,
                                                                         prompt_logprobs=2)))
    scores = outputs[0].prompt_logprobs
    assert len(scores) == len(ids) and scores[0] is None
    assert all(output.prompt_logprobs is None for output in outputs[1:])
    with torch.inference_mode():
        logits = engine.hf_model(torch.tensor([ids], device=engine.device)).logits[0].float()
    reference = torch.log_softmax(logits, dim=-1)
    for position in (1, len(ids) // 2, len(ids) - 1):
        step = scores[position]
        assert step.token_id == ids[position]
        assert step.logprob == pytest.approx(float(reference[position - 1, ids[position]]), abs=1e-4)
        assert len(step.top_logprobs) == 2 and step.top_logprobs[0].logprob >= step.top_logprobs[1].logprob
