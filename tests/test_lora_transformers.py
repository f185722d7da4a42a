"""LoRA adapters by model name on the transformers engine (issue 48): PEFT adapter directories over a tiny random
causal LM, both built here (tests/lora_adapters.py), listed by the model's --models-config entry (what `--lora
NAME=PATH` gives a single model: the same Settings.lora). Each adapter's answer equals transformers +
PEFT's own `generate` with that adapter (PeftModel.from_pretrained, greedy) on the same prompt ids, the base's equals
the model's without; the base and two adapters in one decode batch each get their own answer (PEFT's mixed batches);
vLLM's admin routes load and unload adapters while serving, and `/v1/models` and `vllm:lora_requests_info` follow."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import openai
import pytest
import torch

from harness import InProcessServer
from lora_adapters import build_peft_adapter, tiny_causal_checkpoint
from rostra.lora import LoraAdapter

CACHE = Path(__file__).resolve().parent.parent / ".cache" / "lora"
BASE = "tiny-base"
ADMIN = "admin-key-48"
PROMPT = "The three most useful kitchen tools are"
TOKENS = 10


@pytest.fixture(scope="module")
def checkpoint(transformers_checkpoint) -> Path:
    return tiny_causal_checkpoint(transformers_checkpoint, CACHE / "tiny-llama")


@pytest.fixture(scope="module")
def adapters(checkpoint) -> dict[str, Path]:
    return {"sql-expert": build_peft_adapter(checkpoint, CACHE / "peft-sql-expert", seed=1),
            "poet": build_peft_adapter(checkpoint, CACHE / "peft-poet", seed=2)}


@pytest.fixture(scope="module")
def prompt(checkpoint) -> list[int]:
    from transformers import AutoTokenizer  # noqa: PLC0415

    return AutoTokenizer.from_pretrained(checkpoint).encode(PROMPT, add_special_tokens=False)


@pytest.fixture(scope="module")
def expected(checkpoint, adapters, prompt) -> dict[str, list[int]]:
    """transformers + PEFT's own generate, greedy: the base, then each adapter over it."""
    from peft import PeftModel  # noqa: PLC0415
    from transformers import AutoModelForCausalLM  # noqa: PLC0415

    answers = {BASE: generate(AutoModelForCausalLM.from_pretrained(checkpoint).eval(), prompt)}
    for name, path in adapters.items():
        model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(checkpoint), path).eval()
        answers[name] = generate(model, prompt)
    assert len({tuple(answer) for answer in answers.values()}) == 3, answers  # the adapters change the answer
    return answers


def generate(model, ids: list[int]) -> list[int]:
    with torch.inference_mode():
        out = model.generate(input_ids=torch.tensor([ids]), max_new_tokens=TOKENS, do_sample=False)[0, len(ids):]
    eos = model.config.eos_token_id
    tokens = out.tolist()
    return tokens[:tokens.index(eos)] if eos in tokens else tokens


@pytest.fixture(scope="module")
async def server(tmp_path_factory, checkpoint, adapters):
    """One server for the module, its model and adapters declared by a --models-config entry (`lora:`, loaded with
    the model on its first request); the tests run in order: the last unloads every adapter."""
    directory = tmp_path_factory.mktemp("lora")
    config = {"models": [{"name": BASE, "model": str(checkpoint), "parallel": 4, "max_model_len": 1024,
                          "lora": {name: str(path) for name, path in adapters.items()}}]}
    (directory / "models.yaml").write_text(json.dumps(config))  # (JSON is YAML)
    async with InProcessServer(directory, [], models_config=str(directory / "models.yaml"),
                               admin_keys=[ADMIN]) as started:
        yield started


async def complete(server: InProcessServer, model: str, prompt: list[int]) -> list[int]:
    client = openai.AsyncOpenAI(api_key="none", base_url="http://rostra/v1", http_client=server.client)
    answer = await client.completions.create(model=model, prompt=prompt, max_tokens=TOKENS, temperature=0,
                                             extra_body={"return_token_ids": True})
    assert answer.model == model  # the answer names the adapter asked for
    return answer.choices[0].token_ids  # type: ignore[attr-defined]  # vLLM's return_token_ids


async def admin(server: InProcessServer, route: str, body: dict, key: str = ADMIN):
    return await server.client.post(f"/v1/{route}", json=body, headers={"Authorization": f"Bearer {key}"})


async def test_adapters_answer_as_peft_does_alone_and_in_one_batch(server, adapters, expected, prompt):
    for state in ("unloaded", "loaded"):  # listed with their base before the model's first load, and after
        listed = {model["id"]: model for model in (await server.client.get("/v1/models")).json()["data"]}
        assert listed["poet"]["parent"] == BASE and listed["poet"]["root"] == str(adapters["poet"])
        assert "parent" not in listed[BASE] and listed["sql-expert"]["state"] == state
        if state == "unloaded":  # a request for an adapter loads its model
            assert await complete(server, "sql-expert", prompt) == expected["sql-expert"]
    assert {model: await complete(server, model, prompt) for model in expected} == expected
    # All at once: the base and both adapters share the decode batch (PEFT's adapter_names per row).
    together = await asyncio.gather(*(complete(server, model, prompt) for model in [*expected, *expected]))
    assert together == [*expected.values(), *expected.values()]
    metrics = (await server.client.get("/metrics")).text
    assert ('vllm:lora_requests_info{max_lora="2",model_name="tiny-base",running_lora_adapters="",'
            'waiting_lora_adapters=""}') in metrics


async def test_adapters_load_and_unload_at_run_time(tmp_path, server, adapters, expected, prompt):
    assert (await admin(server, "load_lora_adapter", {"lora_name": "verse", "lora_path": str(adapters["poet"])},
                        key="not-admin")).status_code == 401
    loaded = await admin(server, "load_lora_adapter", {"lora_name": "verse", "lora_path": str(adapters["poet"])})
    assert loaded.status_code == 200 and loaded.text == "Success: LoRA adapter 'verse' added successfully."
    assert await complete(server, "verse", prompt) == expected["poet"]
    assert await complete(server, BASE, prompt) == expected[BASE]
    listed = {model["id"]: model for model in (await server.client.get("/v1/models")).json()["data"]}
    assert listed["verse"]["parent"] == BASE
    again = await admin(server, "load_lora_adapter", {"lora_name": "verse", "lora_path": str(adapters["poet"])})
    assert again.status_code == 400 and "already been loaded" in again.json()["error"]["message"]
    missing = await admin(server, "load_lora_adapter", {"lora_name": "x", "lora_path": str(tmp_path / "none")})
    assert missing.status_code == 404
    removed = await admin(server, "unload_lora_adapter", {"lora_name": "verse"})
    assert removed.status_code == 200 and removed.text == "Success: LoRA adapter 'verse' removed successfully."
    assert "verse" not in {model["id"] for model in (await server.client.get("/v1/models")).json()["data"]}
    with pytest.raises(openai.NotFoundError):
        await complete(server, "verse", prompt)
    assert await complete(server, "poet", prompt) == expected["poet"]  # the others are untouched
    assert (await admin(server, "unload_lora_adapter", {"lora_name": "verse"})).status_code == 404
    for name in ("poet", "sql-expert"):  # the last gone, the LoRA layers go: the base runs as it was
        assert (await admin(server, "unload_lora_adapter", {"lora_name": name})).status_code == 200
    assert await complete(server, BASE, prompt) == expected[BASE]
