"""tabby's tfs and top_a: run by the transformers engine's sampler (rostra/engines/transformers_truncation.py),
accepted by the scripted engine, forwarded by the gateway, a 400 naming the engine and the field on
llama.cpp (which removed tail-free sampling and never had top-a) and vLLM."""

import pytest
import torch

from harness import InProcessServer
from rostra.core import Prompt, SamplingParams
from rostra.engines.llamacpp import LlamaCppEngine
from rostra.engines.remote.engine import completion_body
from rostra.engines.transformers_sampling import RequestSampler
from rostra.engines.transformers_truncation import tail_free, top_a
from rostra.engines.vllm import VllmEngine
from rostra.errors import InvalidRequest
from wire import post

PROBS = [0.5, 0.3, 0.15, 0.05]


def draws(probs: list[float], n: int = 200, **params) -> set[int]:
    chooser = RequestSampler(SamplingParams(max_tokens=1, temperature=1.0, seed=1, **params), prompt_ids=[0],
                             vocab_size=len(probs), usable_vocab=len(probs), eos_ids=[], constraint=None,
                             device=torch.device("cpu"))
    logits = torch.tensor(probs).log()
    return {chooser.sample(logits).token_id for _ in range(n)}


def test_top_a_cuts_below_a_times_the_top_probability_squared():
    assert draws(PROBS, top_a=0.5) == {0, 1, 2}  # 0.5 * 0.5**2 = 0.125
    assert draws(PROBS, top_a=1.0) == {0, 1}  # 0.25
    assert draws([0.25] * 4, top_a=1.0) == {0, 1, 2, 3}  # flat: 0.0625, nothing cut
    assert torch.equal(top_a(torch.tensor(PROBS), 0.0), torch.tensor(PROBS))


def test_tail_free_cuts_where_the_curvature_mass_passes_z():
    # Sorted [.5, .3, .15, .05]: the inner tokens' curvature |.5 - .6 + .15| and |.3 - .3 + .05|, .05 each.
    assert draws(PROBS, tfs=0.4) == {0, 1}  # token 2 has half the mass ahead of it
    assert draws(PROBS, tfs=0.9) == {0, 1, 2}  # the last token never stays
    assert draws(PROBS) == {0, 1, 2, 3}  # 1: off
    shuffled = torch.tensor([0.05, 0.3, 0.5, 0.15])  # in any order
    assert tail_free(shuffled, 0.4).nonzero().flatten().tolist() == [1, 2]
    assert torch.equal(tail_free(torch.tensor([0.4, 0.3, 0.2, 0.1]), 0.5), torch.tensor([0.4, 0.3, 0.2, 0.1]))


@pytest.mark.parametrize("engine_class,name", [(LlamaCppEngine, "llama.cpp"), (VllmEngine, "vLLM")])
@pytest.mark.parametrize("field,value", [("tfs", 0.9), ("top_a", 0.2)])
def test_engines_without_them_refuse_by_name(engine_class, name, field, value):
    engine = object.__new__(engine_class)  # check_params reads class attributes only
    with pytest.raises(InvalidRequest, match=f"{field} is not supported by the {name} engine") as raised:
        engine.check_params(SamplingParams(max_tokens=4, **{field: value}))
    assert raised.value.param == field
    engine.check_params(SamplingParams(max_tokens=4, tfs=1.0, top_a=0.0))  # their "off" values pass


def test_the_gateway_forwards_them():
    body = completion_body(Prompt([1, 2], model="m"), SamplingParams(max_tokens=4, tfs=0.9, top_a=0.1))
    assert body["tfs"] == 0.9 and body["top_a"] == 0.1
    assert "tfs" not in completion_body(Prompt([1], model="m"), SamplingParams(max_tokens=4))


async def test_request_fields_reach_the_engine(tmp_path):
    async with InProcessServer(tmp_path, []) as server:
        seen = []
        generate = server.engine.generate
        server.engine.generate = lambda rid, prompt, params: seen.append(params) or generate(rid, prompt, params)
        body = {"model": "scripted", "messages": [{"role": "user", "content": "hi"}], "tfs": 0.95, "top_a": 0.2}
        assert (await server.client.post("/v1/chat/completions", json=body)).status_code == 200
        assert (seen[0].tfs, seen[0].top_a) == (0.95, 0.2)
        bad = await server.client.post("/v1/chat/completions", json={**body, "tfs": 0})
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "tfs"


def test_llama_cpp_answers_400_over_http(real_server):
    response = post(real_server.base_url, "/v1/chat/completions", {
        "model": "SmolLM2-135M-Instruct", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "tfs": 0.9})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "tfs" and "llama.cpp engine" in error["message"]
