"""The turn's sampling: what the engines and the decoder need of a request, in no API's wire vocabulary.

Each API builds it from its own request (Chat and Completions: `SamplingFields.sampling()`; Messages:
api/messages/service.py; Responses: api/responses/to_chat.py) and checks it with `checked`, giving the names its
own clients wrote: a Messages stop string at fault is `stop_sequences`, not Chat's `stop`. Unset numbers stay
None, so the server's generation defaults (rostra/generation_defaults.py) fill them later
(`serving.generation.sampling_params`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Mapping

from rostra.core import NativeSamplers
from rostra.errors import InvalidRequest

MAX_N = 128
INT32_MAX = 2**31 - 1  # top_k and the like: engines read them as 32-bit integers
MAX_STOP_STRINGS = 16  # the decoder holds back every stop string's prefixes
MAX_PROMPT_LOGPROBS = 20

# name: (least, most, whether the least itself is allowed); None for no bound on that side.
_RANGES: dict[str, tuple[float | None, float | None, bool]] = {
    "n": (1, MAX_N, True), "temperature": (0, 2, True), "top_p": (0, 1, False), "top_k": (-1, INT32_MAX, True),
    "min_p": (0, 1, True), "presence_penalty": (-2, 2, True), "frequency_penalty": (-2, 2, True),
    "repetition_penalty": (0, 10, False), "min_tokens": (0, INT32_MAX, True), "tfs": (0, 1, False),
    "top_a": (0, 1, True), "prompt_logprobs": (0, MAX_PROMPT_LOGPROBS, True),
    "truncate_prompt_tokens": (-1, INT32_MAX, True),
}


@dataclass(frozen=True)
class Sampling:
    """How the answer is sampled and where it stops. Numbers left None take the server's defaults."""

    n: int = 1
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None  # 0 or -1: off
    min_p: float | None = None
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repetition_penalty: float | None = None
    logit_bias: Mapping[int, float] = field(default_factory=lambda: MappingProxyType({}))  # token id: bias
    ignore_eos: bool = False
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    # vLLM's extensions
    echo: bool = False  # Chat: the continued assistant message repeated before the answer; Completions: the prompt
    min_tokens: int = 0
    include_stop_str_in_output: bool = False
    skip_special_tokens: bool = True
    bad_words: tuple[str, ...] = ()
    allowed_token_ids: tuple[int, ...] | None = None
    return_token_ids: bool = False
    truncate_prompt_tokens: int | None = None
    prompt_logprobs: int | None = None
    priority: int = 0
    cache_salt: str | None = None
    mm_processor_kwargs: Mapping[str, Any] | None = None
    # llama.cpp's samplers, and tabby's tail-free (tfs) and top-a samplers
    samplers: NativeSamplers = field(default_factory=NativeSamplers)
    tfs: float | None = None
    top_a: float | None = None

    def checked(self, names: Mapping[str, str] = MappingProxyType({})) -> Sampling:
        """The sampling, or a 400 for a value out of range naming the parameter as its API calls it (`names`: the
        API's name for each field that its clients spell otherwise)."""
        for name, (least, most, closed) in _RANGES.items():
            value = getattr(self, name)
            if value is None:
                continue
            low = least is None or (value >= least if closed else value > least)
            if not low or (most is not None and value > most):
                side = "at least" if closed else "greater than"
                raise InvalidRequest(f"{names.get(name, name)}: must be {side} {least} and at most {most}, not {value}",
                                     param=names.get(name, name))
        if len(self.stop) > MAX_STOP_STRINGS or any(not text for text in self.stop):
            raise InvalidRequest(f"{names.get('stop', 'stop')}: at most {MAX_STOP_STRINGS} strings, none empty",
                                 param=names.get("stop", "stop"))
        if any(not word for word in self.bad_words):
            raise InvalidRequest("bad_words must not contain empty strings", param=names.get("bad_words", "bad_words"))
        return self

    def set_fields(self) -> Mapping[str, Any]:
        """The fields that differ from their defaults, by name (an upstream is sent only what a client set)."""
        default = Sampling()
        return {item.name: getattr(self, item.name) for item in fields(self)
                if getattr(self, item.name) != getattr(default, item.name)}
