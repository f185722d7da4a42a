"""LoRA adapters and priority on the real vLLM engine (issue 48).

`--lora NAME=PATH` on `--engine vllm`: two tiny PEFT adapters built here over the SmolLM2 checkpoint (random, so
that each changes what the model writes) are served by name through rostra's HTTP app; each answer, greedy, equals
vLLM's own OpenAI server started with `--enable-lora --lora-modules` on the same adapters; the base and both
adapters asked at once (one batch: max_num_seqs 3) each get their own answer. Adapters load and unload at runtime
(`load_adapter`/`unload_adapter`, what the /v1/load_lora_adapter routes call). With `--vllm-arg scheduling_policy=priority` each request's
`priority` reaches vLLM's scheduler: under a full batch a later request of better priority runs first.

The vLLM parts run where tests/vllm_env.py says (.ci/run's vLLM step: ROSTRA_TEST_VLLM=cpu); the engine-argument
mapping runs everywhere.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import aclosing
from pathlib import Path

import pytest

from rostra.core import Prompt, SamplingParams
from rostra.engines.vllm_lora import AdapterProblem, adapter_rank, lora_engine_kwargs, vllm_rank_bound
from rostra.lora import LoraAdapter
from vllm_env import VLLM_SERVER_FLAGS, loop, real, test_model  # noqa: F401 (fixtures)

BASE = "smollm2"
QUESTIONS = ["Name a colour.", "What is two plus two?"]
TOKENS = 12


# vLLM's LoRA engine arguments from the adapters' configs (everywhere)

def _config(folder: Path, **config) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", **config}))
    return str(folder)


def test_lora_settings_come_from_the_adapters(tmp_path):
    small, large = _config(tmp_path / "s", r=8), _config(tmp_path / "l", r=4, rank_pattern={"v_proj": 24})
    assert adapter_rank(large) == 24 and vllm_rank_bound(24) == 32 and vllm_rank_bound(8) == 8
    adapters = [LoraAdapter("s", small), LoraAdapter("l", large)]
    assert lora_engine_kwargs(adapters, {}) == {"enable_lora": True, "max_loras": 2, "max_lora_rank": 32}
    # --vllm-arg sets any of them itself (room for a larger adapter loaded later)
    assert lora_engine_kwargs(adapters, {"max_lora_rank": 64}) == {"enable_lora": True, "max_loras": 2}
    assert lora_engine_kwargs([], {}) == {}


def test_an_adapter_that_is_not_peft_is_named(tmp_path):
    with pytest.raises(AdapterProblem, match="--lora odd: .*no adapter_config.json"):
        lora_engine_kwargs([LoraAdapter("odd", str(tmp_path))], {})
    with pytest.raises(AdapterProblem, match="ranks up to 512"):
        vllm_rank_bound(1024)


# The real engine

def build_peft_adapter(base: Path, folder: Path, seed: int, rank: int) -> Path:
    """A PEFT LoRA over q_proj and v_proj, its weights random (PEFT's init_lora_weights=False: B is not zero, so the
    adapter changes the output), saved as PEFT saves one (adapter_config.json, adapter_model.safetensors)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    if (folder / "adapter_config.json").exists():
        return folder
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(base, torch_dtype=torch.float32)
    peft_model = get_peft_model(model, LoraConfig(r=rank, lora_alpha=rank, target_modules=["q_proj", "v_proj"],
                                                  init_lora_weights=False))
    peft_model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def adapters(test_model, tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("peft")
    return {"poet": build_peft_adapter(Path(test_model), folder / "poet", seed=1, rank=8),
            "critic": build_peft_adapter(Path(test_model), folder / "critic", seed=2, rank=16),
            "wide": build_peft_adapter(Path(test_model), folder / "wide", seed=3, rank=32)}


def _chat(model: str, question: str) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": question}], "max_tokens": TOKENS,
            "temperature": 0}


@pytest.fixture(scope="module")
def reference(test_model, adapters) -> dict[tuple[str, str], str]:
    """vLLM's own server with the same adapters (--enable-lora --lora-modules), greedy: each model's answers."""
    import httpx

    from vllm_server import VllmServer

    server = VllmServer(test_model, "--served-model-name", BASE, "--max-model-len", "2048", "--enable-lora",
                        "--lora-modules", f"poet={adapters['poet']}", f"critic={adapters['critic']}",
                        "--max-lora-rank", "16", "--max-loras", "2", *VLLM_SERVER_FLAGS)
    try:
        answers = {}
        for model in (BASE, "poet", "critic"):
            for question in QUESTIONS:
                reply = httpx.post(f"{server.base_url}/v1/chat/completions", json=_chat(model, question), timeout=300)
                reply.raise_for_status()
                answers[model, question] = reply.json()["choices"][0]["message"]["content"]
        return answers
    finally:
        server.stop()


@pytest.fixture(scope="module")
def rostra(loop, test_model, adapters, reference, tmp_path_factory):  # after the reference: one engine at a time
    from harness import InProcessServer

    server = InProcessServer(tmp_path_factory.mktemp("rostra"), [], engine="vllm", model=test_model,
                             served_model_name=[BASE], max_model_len=2048,
                             lora=[LoraAdapter(name, str(adapters[name])) for name in ("poet", "critic")],
                             vllm_args=["enforce_eager=true", "max_num_seqs=3", "scheduling_policy=priority"])
    loop.run_until_complete(server.__aenter__())
    yield server
    loop.run_until_complete(server.__aexit__(None, None, None))


def _answers(loop, server, models: list[str], question: str) -> list[str]:
    async def ask(model: str) -> str:
        reply = await server.client.post("/v1/chat/completions", json=_chat(model, question), timeout=300)
        assert reply.status_code == 200, reply.text
        return reply.json()["choices"][0]["message"]["content"]

    async def all_at_once() -> list[str]:
        return list(await asyncio.gather(*(ask(model) for model in models)))

    return loop.run_until_complete(all_at_once())


@real
def test_each_adapter_answers_as_vllms_own_server(loop, rostra, reference):
    models = [BASE, "poet", "critic"]
    for question in QUESTIONS:  # one at a time, as the reference was asked
        answers = [_answers(loop, rostra, [model], question)[0] for model in models]
        assert answers == [reference[model, question] for model in models]
    assert len({reference[model, QUESTIONS[0]] for model in models}) == 3  # each adapter changes the answer
    listed = {card["id"]: card for card in loop.run_until_complete(rostra.client.get("/v1/models")).json()["data"]}
    assert listed["poet"]["parent"] == BASE and listed["critic"]["root"].endswith("critic")


@real
def test_the_base_and_two_adapters_in_one_batch_each_get_their_own(loop, rostra, reference):
    """Asked at once (max_num_seqs 3: one batch). A batch of three computes each row apart from a batch of one in
    reduced precision, so a late token may differ from the answer asked alone (seen on the base: 8 words alike,
    then not); what must hold is that no adapter leaks into another's row: the three answers stay apart."""
    answers = _answers(loop, rostra, [BASE, "poet", "critic"], QUESTIONS[0])
    assert len(set(answers)) == 3 and all(answer.strip() for answer in answers)


@real
def test_adapters_load_and_unload_at_runtime(loop, rostra, adapters, reference):
    from rostra.errors import InvalidRequest, NotFound

    engine = rostra.engine
    loop.run_until_complete(engine.load_adapter(LoraAdapter("poet-again", str(adapters["poet"]))))
    assert _answers(loop, rostra, ["poet-again"], QUESTIONS[0]) == [reference["poet", QUESTIONS[0]]]
    loop.run_until_complete(engine.unload_adapter("poet-again"))
    gone = loop.run_until_complete(rostra.client.post("/v1/chat/completions", json=_chat("poet-again", "Hi")))
    assert gone.status_code in (400, 404) and "poet-again" in gone.text
    with pytest.raises(NotFound):
        loop.run_until_complete(engine.unload_adapter("poet-again"))
    with pytest.raises(InvalidRequest, match="rank 32 is over this engine's max_lora_rank 16"):
        loop.run_until_complete(engine.load_adapter(LoraAdapter("wide", str(adapters["wide"]))))
    with pytest.raises(InvalidRequest, match="already served"):
        loop.run_until_complete(engine.load_adapter(LoraAdapter("poet", str(adapters["critic"]))))
    with pytest.raises(InvalidRequest, match="no adapter_config.json"):
        loop.run_until_complete(engine.load_adapter(LoraAdapter("nothing", str(adapters["poet"].parent))))
    assert engine.adapters == ("poet", "critic")


@real
def test_priority_reaches_vllms_scheduler(loop, rostra):
    """Three slots (max_num_seqs 3) held, one of them briefly; then `late` (priority 5) and `urgent` (priority 1)
    wait, in that order. When the brief one ends vLLM's priority queue gives its slot to `urgent` first: it ends
    first (first come, first served would run `late` first)."""
    engine = rostra.engine
    assert engine.schedules_by_priority
    prompt = loop.run_until_complete(engine.tokenize("Once upon a time", add_special=True))
    ended: list[str] = []

    async def run(request_id: str, tokens: int, priority: int = 0, started: asyncio.Event | None = None) -> None:
        params = SamplingParams(max_tokens=tokens, temperature=0.0, ignore_eos=True, priority=priority)
        async with aclosing(engine.generate(request_id, Prompt(prompt), params)) as stream:
            async for _ in stream:
                if started is not None:
                    started.set()
        ended.append(request_id)

    async def scenario() -> None:
        holders = [asyncio.Event() for _ in range(3)]
        running = [asyncio.create_task(run(f"hold-{i}", tokens, started=holders[i]))
                   for i, tokens in enumerate((32, 200, 200))]
        await asyncio.gather(*(event.wait() for event in holders))
        waiting = [asyncio.create_task(run("late", 4, priority=5))]
        await asyncio.sleep(0.05)  # (so that vLLM has `late` first)
        waiting.append(asyncio.create_task(run("urgent", 4, priority=1)))
        await asyncio.gather(*running, *waiting)

    loop.run_until_complete(asyncio.wait_for(scenario(), 600))
    assert ended.index("urgent") < ended.index("late") < ended.index("hold-1"), ended
