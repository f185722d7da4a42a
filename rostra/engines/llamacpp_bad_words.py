"""vLLM's `bad_words` on llama.cpp, whose server can only ban a token everywhere (logit_bias).

A word of one token is banned that way, exactly. A word of several tokens must only lose its last token
where the others precede it: banning its first token everywhere would also forbid every other word that
starts with it. So generation runs unconstrained until the sampled tokens complete a bad word; that last
token is dropped, the generation is stopped there, one token is sampled again from the tokens kept with
the last tokens of every word they would complete banned, and generation goes on from there (llama.cpp's
prefix cache holds the tokens already sampled, so each resumption re-reads nothing).

A grammar cannot be resumed halfway: with a constraint the caller bans the first tokens instead.
"""

from __future__ import annotations

import dataclasses
from contextlib import aclosing
from typing import AsyncGenerator, Callable, Sequence

from rostra.core import EngineOutput, SamplingParams

Generate = Callable[[list[int], SamplingParams], AsyncGenerator[EngineOutput, None]]


def completed_word_ends(sampled: Sequence[int], words: Sequence[tuple[int, ...]]) -> set[int]:
    """The tokens that would complete a bad word after `sampled` (each word's last, where its others end it)."""
    return {word[-1] for word in words
            if len(word) - 1 <= len(sampled) and tuple(sampled[len(sampled) - len(word) + 1:]) == word[:-1]}


async def generate_without_bad_words(generate: Generate, prompt_ids: list[int], params: SamplingParams,
                                     words: Sequence[tuple[int, ...]]) -> AsyncGenerator[EngineOutput, None]:
    """`generate`'s outputs, with no word of `words` (token sequences of two or more) ever completed."""
    sampled: list[int] = []
    banned_once: set[int] = set()
    while len(sampled) < params.max_tokens:
        # After a dropped token: one token with the words' ends banned, then the rest unconstrained.
        part = dataclasses.replace(params, max_tokens=1 if banned_once else params.max_tokens - len(sampled),
                                   logit_bias={**params.logit_bias, **dict.fromkeys(banned_once, float("-inf"))})
        banned_once, before = set(), len(sampled)
        async with aclosing(generate(prompt_ids + sampled, part)) as outputs:
            async for output in outputs:
                kept = []
                for step in output.tokens:
                    ends = completed_word_ends(sampled, words)
                    if step.token_id in ends:
                        banned_once = ends
                        break
                    kept.append(step)
                    sampled.append(step.token_id)
                # A one-token step's "length" is only its own end; "stop" (end of generation) ends it all.
                final = not banned_once and output.finish_reason is not None and (
                    output.finish_reason == "stop" or part.max_tokens > 1 or len(sampled) >= params.max_tokens)
                yield dataclasses.replace(
                    output, tokens=tuple(kept), finish_reason=output.finish_reason if final else None,
                    completion_tokens=None if output.completion_tokens is None else before + output.completion_tokens,
                    # Later parts re-read the tokens sampled so far: their cache hits and scores are not the prompt's.
                    cached_tokens=output.cached_tokens if before == 0 else None,
                    cache_write_tokens=output.cache_write_tokens if before == 0 else None,
                    prompt_logprobs=output.prompt_logprobs if before == 0 else None)
                if final:
                    return
                if banned_once:
                    break  # leaving the stream stops llama.cpp's generation there
        if not banned_once and len(sampled) == before:  # nothing came and nothing ended it: do not spin
            yield EngineOutput(finish_reason="stop")
            return
    yield EngineOutput(finish_reason="length")
