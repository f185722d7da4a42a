"""A generation that continues the prompt after tokens already written in the same completion.

Think-then-constrain (think_first.py, harmony_answer.py) runs one completion as several generations: each one
continues the prompt with what the completion holds so far (the model's thinking, markers written for it), and
all of them count as one completion within the request's `max_tokens`.
"""

from __future__ import annotations

import dataclasses
from contextlib import aclosing
from typing import AsyncGenerator, Sequence

from rostra.core import EngineOutput, Prompt, SamplingParams, TokenStep
from rostra.engines.base import Engine


def written_steps(engine: Engine, token_ids: Sequence[int]) -> tuple[TokenStep, ...]:
    """Tokens written for the model, as the steps of an output (no logprob: they were not sampled)."""
    return tuple(TokenStep(token_id, engine.token_bytes(token_id)) for token_id in token_ids)


async def continued_generation(engine: Engine, request_id: str, prompt: Prompt, params: SamplingParams,
                               written: list[int]) -> AsyncGenerator[EngineOutput, None]:
    """A generation of `params` continuing the prompt after `written` (tokens already part of this completion,
    the model's or written for it): counted as one completion with them, within the same `max_tokens`."""
    left = params.max_tokens - len(written)
    if left <= 0:
        yield EngineOutput(finish_reason="length")
        return
    text = None if prompt.text is None else prompt.text + await engine.detokenize(written)  # (a prompt with images)
    continued = dataclasses.replace(prompt, token_ids=list(prompt.token_ids) + written, text=text)
    answer = dataclasses.replace(params, max_tokens=left)
    async with aclosing(engine.generate(request_id, continued, answer)) as outputs:
        async for output in outputs:
            # The prompt's cache hits and its size were reported by the free part; its tokens count on.
            count = None if output.completion_tokens is None else output.completion_tokens + len(written)
            yield dataclasses.replace(output, cached_tokens=None, cache_write_tokens=None, prompt_tokens=None,
                                      prompt_logprobs=None, completion_tokens=count)
