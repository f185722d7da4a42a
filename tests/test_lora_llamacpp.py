"""LoRA adapters by model name on the llama.cpp engine (issue 48): `--lora NAME=PATH` serves the embedded SmolLM2
under its own name and each adapter's, in one llama.cpp server. Tiny adapters built here (tests/lora_adapters.py)
change what the model writes; each adapter's answer equals llama.cpp's own server with that adapter applied (`--lora`,
in this process through xllamacpp) on the same prompt, greedy; the base's equals llama.cpp's without adapters; and
requests for the base and both adapters running at once each get their own answer (no adapter leaks through a
shared slot or its prompt cache)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import openai
import pytest

from harness import InProcessServer
from lora_adapters import build_adapter
from rostra.embedded import EMBEDDED_MODEL_NAME, embedded_model_path
from rostra.lora import LoraAdapter

CACHE = Path(__file__).resolve().parent.parent / ".cache" / "lora"
PROMPT = "The three most useful kitchen tools are"
TOKENS = 12
ADMIN = "admin-key-48"


@pytest.fixture(scope="module")
def adapters() -> dict[str, Path]:
    return {"sql-expert": build_adapter(CACHE / "sql-expert.gguf", seed=1),
            "poet": build_adapter(CACHE / "poet.gguf", seed=2)}


def reference_text(adapter: Path | None) -> str:
    """llama.cpp's own server on the same GGUF, the adapter applied at scale 1 (its `--lora`), greedy."""
    import xllamacpp  # noqa: PLC0415

    params = xllamacpp.CommonParams()
    params.model.path = str(embedded_model_path())
    params.n_parallel = 1
    params.n_ctx = 2048
    if adapter is not None:
        info = xllamacpp.CommonAdapterLoraInfo()
        info.path, info.scale = str(adapter), 1.0
        params.lora_adapters = [info]
    server = xllamacpp.Server(params)
    try:
        reply = server.handle_completions({"prompt": PROMPT, "n_predict": TOKENS, "temperature": 0,
                                           "cache_prompt": False})
        return reply["choices"][0]["text"] if "choices" in reply else reply["content"]
    finally:
        del server


def served(tmp_path: Path, adapters: dict[str, Path]) -> InProcessServer:
    return InProcessServer(tmp_path, [], engine="llamacpp", speculative="off", parallel=2, max_model_len=2048,
                           lora=[LoraAdapter(name, str(path)) for name, path in adapters.items()], admin_keys=[ADMIN])


async def complete(server: InProcessServer, model: str) -> str:
    client = openai.AsyncOpenAI(api_key="none", base_url="http://rostra/v1", http_client=server.client)
    answer = await client.completions.create(model=model, prompt=PROMPT, max_tokens=TOKENS, temperature=0)
    assert answer.model == model  # the answer names the adapter asked for
    return answer.choices[0].text


async def test_each_adapter_answers_as_llamacpp_does_with_it(tmp_path, adapters):
    expected = {EMBEDDED_MODEL_NAME: reference_text(None),
                **{name: reference_text(path) for name, path in adapters.items()}}
    assert len(set(expected.values())) == 3, expected  # the adapters change what the model writes
    async with served(tmp_path, adapters) as server:
        listed = {model["id"]: model for model in (await server.client.get("/v1/models")).json()["data"]}
        assert listed["poet"]["parent"] == EMBEDDED_MODEL_NAME and listed["poet"]["root"] == str(adapters["poet"])
        assert "parent" not in listed[EMBEDDED_MODEL_NAME]
        # One after another (the same slot's prompt cache met by another adapter each time), then all at once.
        got = {model: await complete(server, model) for model in expected}
        assert got == expected
        for model in reversed(expected):
            assert await complete(server, model) == expected[model], model
        together = await asyncio.gather(*(complete(server, model) for model in [*expected, *expected]))
        assert together == [*expected.values(), *expected.values()]
        # The same adapter by chat, streamed: the Chat API reaches it too.
        client = openai.AsyncOpenAI(api_key="none", base_url="http://rostra/v1", http_client=server.client)
        chat = await client.chat.completions.create(model="poet", messages=[{"role": "user", "content": "Hi"}],
                                                    max_tokens=8, temperature=0)
        base = await client.chat.completions.create(model=EMBEDDED_MODEL_NAME, max_tokens=8, temperature=0,
                                                    messages=[{"role": "user", "content": "Hi"}])
        assert chat.model == "poet" and chat.choices[0].message.content != base.choices[0].message.content
        assert ('vllm:lora_requests_info{max_lora="2",model_name="SmolLM2-135M-Instruct",running_lora_adapters="",'
                'waiting_lora_adapters=""}') in (await server.client.get("/metrics")).text
        await adapters_change_at_run_time(server, adapters, expected)


async def adapters_change_at_run_time(server: InProcessServer, adapters: dict[str, Path], expected: dict) -> None:
    """vLLM's admin routes: llama.cpp's server is made again with the new adapter list, and every name still gets
    its own adapter (their indices in llama.cpp's list shift when one before them goes)."""
    def admin(route: str, body: dict):
        return server.client.post(f"/v1/{route}", json=body, headers={"Authorization": f"Bearer {ADMIN}"})

    loaded = await admin("load_lora_adapter", {"lora_name": "verse", "lora_path": str(adapters["poet"])})
    assert loaded.status_code == 200 and loaded.text == "Success: LoRA adapter 'verse' added successfully."
    assert await complete(server, "verse") == expected["poet"]
    not_adapter = await admin("load_lora_adapter", {"lora_name": "x", "lora_path": str(embedded_model_path())})
    assert not_adapter.status_code == 400 and "not a GGUF LoRA adapter" in not_adapter.json()["error"]["message"]
    assert (await admin("unload_lora_adapter", {"lora_name": "sql-expert"})).status_code == 200
    listed = {model["id"] for model in (await server.client.get("/v1/models")).json()["data"]}
    assert listed == {EMBEDDED_MODEL_NAME, "poet", "verse"}
    for model in (EMBEDDED_MODEL_NAME, "poet"):
        assert await complete(server, model) == expected[model], model
    assert await complete(server, "verse") == expected["poet"]


def test_lora_flag_is_checked():
    with pytest.raises(ValueError, match="NAME=PATH"):
        LoraAdapter.parse("no-equals-sign")
    with pytest.raises(SystemExit, match="served by the llamacpp, transformers, vllm engines"):
        from rostra.config import Settings  # noqa: PLC0415
        from rostra.engines.registry import build_engine  # noqa: PLC0415

        build_engine(Settings(engine="scripted", lora=[LoraAdapter("a", "a.gguf")]))
