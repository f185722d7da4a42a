"""llama.cpp engine options reach llama.cpp: flash attention on or off (embedded model)."""

import asyncio

import pytest

from rostra.core import Prompt, SamplingParams
from rostra.embedded import embedded_model_path
from rostra.engines.llamacpp import LlamaCppEngine


def _count_to_ten(flash_attn: str) -> list[tuple[int, float]]:
    """Eight tokens at temperature 0, each with its logprob."""
    async def scenario() -> list[tuple[int, float]]:
        engine = LlamaCppEngine(embedded_model_path(), "m", max_model_len=256, parallel=1, speculative="off",
                                flash_attn=flash_attn)
        await engine.start()
        try:
            prompt = Prompt(await engine.tokenize("Count from one to ten: one, two,", add_special=False))
            params = SamplingParams(max_tokens=8, temperature=0, ignore_eos=True, top_logprobs=0)
            return [(step.token_id, step.logprob) async for output in engine.generate("a", prompt, params)
                    for step in output.tokens]
        finally:
            await engine.close()

    return asyncio.run(scenario())


def test_flash_attention_on_and_off_run_different_kernels_to_the_same_answer():
    """llama.cpp logs nothing of it at rostra's verbosity, so the kernels show in the arithmetic: the same tokens,
    logprobs that agree closely but not to the last bit (were the setting lost, they would be identical)."""
    on, off = _count_to_ten("on"), _count_to_ten("off")
    assert [token for token, _ in on] == [token for token, _ in off]
    differences = [abs(a - b) for (_, a), (_, b) in zip(on, off)]
    assert max(differences) < 0.05
    assert max(differences) > 0


def test_unknown_flash_attention_setting_is_refused():
    with pytest.raises(ValueError, match="--flash-attn"):
        LlamaCppEngine(embedded_model_path(), "m", flash_attn="sometimes")
