"""A request's output budget and sampling: max_tokens against the context the prompt leaves (a 400, or cut to fit),
the server's generation defaults for what a request leaves out, and the engine's sampling parameters."""

from __future__ import annotations

import logging
from typing import Any

from rostra.core import SamplingParams
from rostra.errors import InvalidRequest
from rostra.generation_defaults import GenerationDefaults
from rostra.guided.constraints import Constraint
from rostra.sampling import Sampling

log = logging.getLogger("rostra.serving")


def check_context(prompt_tokens: int, max_tokens: int | None, context_length: int,
                  prompt_param: str, max_tokens_param: str, fit: bool = False) -> int:
    """The max_tokens to use: what was asked, or all that fits. 400 when the prompt alone fills the
    context; a budget longer than the room left is cut to that room (`fit`) or refused (OpenAI's way)."""
    if prompt_tokens >= context_length:
        raise InvalidRequest(
            f"This model's maximum context length is {context_length} tokens. However, your prompt is "
            f"{prompt_tokens} tokens long.", param=prompt_param, code="context_length_exceeded")
    room = context_length - prompt_tokens
    if max_tokens is None:
        return room
    if max_tokens > room and fit:
        log.info("output budget: %s %d asked, %d granted (prompt %d tokens of a %d-token context)",
                 max_tokens_param, max_tokens, room, prompt_tokens, context_length)
        return room
    if max_tokens > room:
        raise InvalidRequest(
            f"This model's maximum context length is {context_length} tokens. However, you requested "
            f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the prompt, {max_tokens} for the completion). "
            f"Please reduce the prompt or the completion length.", param=max_tokens_param, code="context_length_exceeded")
    return max_tokens


def completion_budget(prompt_tokens: int, requested: int | None, defaults: GenerationDefaults,
                      context_length: int, prompt_param: str, max_tokens_param: str,
                      openai_default: int | None = None, min_tokens: int = 0, fit: bool = False) -> int:
    """max_tokens: the request's (`fit`: cut to the room the prompt leaves; else a 400 if it does not fit),
    else the server's default length, else OpenAI's (`openai_default`; None: all that fits). A default longer
    than the room left is cut to it. `min_tokens` more than that is a 400 (vLLM's extension)."""
    budget = check_context(prompt_tokens, requested, context_length, prompt_param, max_tokens_param, fit)
    default = defaults.get("max_tokens", openai_default)
    budget = budget if requested is not None or default is None else min(budget, default)
    if min_tokens > budget:
        raise InvalidRequest(f"min_tokens ({min_tokens}) must not exceed max_tokens ({budget})", param="min_tokens")
    log.debug("output budget: %s %s asked, %d granted", max_tokens_param, requested, budget)
    return budget


def sampling_params(request: Sampling, max_tokens: int, top_logprobs: int | None,
                    constraint: Constraint | None = None,
                    defaults: GenerationDefaults = GenerationDefaults(), **extensions: Any) -> SamplingParams:
    """What the request sets; for what it leaves out, the server's generation defaults (the model's
    recommendation, see rostra/generation_defaults.py), else OpenAI's (temperature 1, top_p 1, no
    top_k / min_p, no penalties). `extensions`: the engine-level vLLM extensions, as resolved."""
    def given(name: str, openai_default: float) -> Any:
        value = getattr(request, name)
        return defaults.get(name, openai_default) if value is None else value

    return SamplingParams(
        max_tokens=max_tokens,
        temperature=given("temperature", 1.0),
        top_p=given("top_p", 1.0),
        top_k=max(0, given("top_k", 0)),
        min_p=given("min_p", 0.0),
        seed=request.seed,
        presence_penalty=given("presence_penalty", 0.0),
        frequency_penalty=given("frequency_penalty", 0.0),
        repetition_penalty=given("repetition_penalty", 1.0),
        logit_bias={int(k): v for k, v in (request.logit_bias or {}).items()},
        top_logprobs=top_logprobs,
        ignore_eos=request.ignore_eos,
        json_schema=constraint.json_schema if constraint else None,
        grammar=constraint.grammar if constraint else None,
        structural_tag=constraint.structural_tag if constraint else None,
        **extensions,
    )
