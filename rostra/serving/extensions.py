"""vLLM's request extensions, mapped once for Chat Completions and Completions.

Sampling-side ones (min_tokens, bad_words, allowed_token_ids, prompt_logprobs) become engine
parameters, which each engine honours or refuses (`Engine.check_params`); text-side ones
(include_stop_str_in_output, skip_special_tokens) shape the per-choice decoder;
truncate_prompt_tokens cuts the prompt before it is checked against the context.
"""

from __future__ import annotations

from typing import Any, Callable, Collection, Sequence

from rostra.engines.base import Engine
from rostra.core import TokenStep
from rostra.errors import InvalidRequest
from rostra.parsing.decoder import Decoder
from rostra.protocol.logprobs import wire_logprob
from rostra.sampling import Sampling


async def engine_extensions(engine: Engine, request: Sampling, model: str | None = None) -> dict[str, Any]:
    """SamplingParams keywords for the sampling-side extensions (and the LoRA adapter `model` names, if one)."""
    extensions: dict[str, Any] = {"min_tokens": request.min_tokens, "stop_token_ids": request.stop_token_ids,
                                  "prompt_logprobs": request.prompt_logprobs,
                                  "samplers": request.samplers, "priority": request.priority,
                                  "tfs": 1.0 if request.tfs is None else request.tfs, "top_a": request.top_a or 0.0}
    if model is not None and model in engine.adapters:
        extensions["adapter"] = model
    if request.allowed_token_ids is not None:
        if any(not 0 <= token_id < engine.vocab_size for token_id in request.allowed_token_ids):
            raise InvalidRequest(f"allowed_token_ids: ids must be within the vocabulary (0..{engine.vocab_size - 1})",
                                 param="allowed_token_ids")
        extensions["allowed_token_ids"] = tuple(sorted(set(request.allowed_token_ids)))
    if request.bad_words:
        extensions["bad_words"] = request.bad_words
        extensions["bad_words_ids"] = await bad_words_ids(engine, request.bad_words)
    return extensions


async def bad_words_ids(engine: Engine, words: Sequence[str]) -> tuple[tuple[int, ...], ...]:
    """Each word's tokenizations, alone and after a space (as it appears mid-text), without duplicates."""
    sequences: dict[tuple[int, ...], None] = {}
    for word in words:
        for variant in {word.lstrip(), " " + word.lstrip()}:
            ids = tuple(await engine.tokenize(variant, add_special=False))
            if ids:
                sequences[ids] = None
    return tuple(sequences)


def prompt_extensions(engine: Engine, request: Sampling) -> dict[str, Any]:
    """Prompt keywords: the prefix-cache salt, and the multimodal processor's options where the engine takes them
    (empty ones change nothing anywhere)."""
    if request.mm_processor_kwargs and not engine.takes_mm_processor_kwargs:
        raise InvalidRequest(f"mm_processor_kwargs is not supported by the {engine.engine_name} engine: it has no "
                             "multimodal processor to pass them to (vLLM has)", param="mm_processor_kwargs")
    if request.mm_processor_kwargs and not engine.trusts_request_mm_kwargs:
        raise InvalidRequest("mm_processor_kwargs are off: they change how much work and memory an image costs; "
                             "the server's operator turns them on with --trust-request-mm-kwargs",
                             param="mm_processor_kwargs")
    kwargs = request.mm_processor_kwargs
    return {"cache_salt": request.cache_salt, "mm_processor_kwargs": dict(kwargs) if kwargs else None}


def truncate_prompt(token_ids: list[int], keep: int | None, context_length: int) -> list[int]:
    """truncate_prompt_tokens: the last `keep` tokens (-1: as many as the context holds)."""
    if keep is None:
        return token_ids
    keep = context_length if keep == -1 else keep
    return token_ids[-keep:] if keep else []


def choice_decoder(request: Sampling, engine: Engine, parsers_read_markup: bool) -> Decoder:
    """Special tokens' text is left out with skip_special_tokens (the default) unless a reasoning or
    tool parser reads the output: their markers are often special tokens (vLLM keeps them then too)."""
    hidden: Collection[int] = ()
    if request.skip_special_tokens and not parsers_read_markup:
        hidden = engine.special_token_ids
    return Decoder(request.stop, request.stop_token_ids, request.include_stop_str_in_output,
                   request.min_tokens, hidden, lambda token_id: engine.token_bytes(token_id).decode(errors="replace"))


def vllm_prompt_logprobs(steps: tuple[TokenStep | None, ...] | None,
                         detokenize: Callable[[bytes], str]) -> list[dict[str, Any] | None] | None:
    """vLLM's shape: per prompt token, None for the first, else {token id: {logprob, rank, decoded_token}}
    holding the prompt's own token and the top alternatives."""
    if steps is None:
        return None
    out: list[dict[str, Any] | None] = []
    for step in steps:
        if step is None:
            out.append(None)
            continue
        entry = {str(top.token_id): {"logprob": wire_logprob(top.logprob), "rank": rank,
                                     "decoded_token": detokenize(top.token_bytes)}
                 for rank, top in enumerate(step.top_logprobs, start=1)}
        if str(step.token_id) not in entry:
            rank = 1 + sum(1 for top in step.top_logprobs if top.logprob > (step.logprob or 0.0))
            entry[str(step.token_id)] = {"logprob": None if step.logprob is None else wire_logprob(step.logprob), "rank": rank,
                                         "decoded_token": detokenize(step.token_bytes)}
        out.append(entry)
    return out
