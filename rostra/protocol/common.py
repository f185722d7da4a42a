"""Fields shared by Chat Completions and Completions requests."""

from __future__ import annotations

import re
from types import MappingProxyType
from typing import Annotated, Any

from pydantic import Field, field_validator

from rostra.errors import InvalidRequest
from rostra.protocol.seeds import SeedFields
from rostra.protocol.strict import RequestModel, StrictModel
from rostra.sampling import INT32_MAX, MAX_N, MAX_STOP_STRINGS, Sampling

__all__ = ["INT32_MAX", "MAX_N", "MAX_STOP_STRINGS"]  # where Chat's and Completions' bounds are read

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_TOP_LOGPROBS = 20


MAX_BAD_WORDS = 64
MAX_LOGIT_BIAS = 1024  # entries; OpenAI allows 300
_TOKEN_ID = re.compile(r"-?[0-9]{1,10}")


class StreamOptions(StrictModel):
    include_usage: bool = False
    # Obfuscation pads delta events against side channels; rostra sends none, which the option allows.
    include_obfuscation: bool = True
    # vLLM extension: every chunk carries the usage so far.
    continuous_usage_stats: bool = False


class SamplingFields(RequestModel, SeedFields):
    """OpenAI sampling parameters plus the common extensions (top_k, min_p, repetition_penalty,
    stop_token_ids, ignore_eos) that vLLM and llama.cpp servers accept, and vLLM's other
    extensions (min_tokens, bad_words, return_token_ids, ...: README, "vLLM extensions"); vLLM's newer
    names and tabbyAPI's come from SeedFields."""

    model: str
    n: Annotated[int, Field(ge=1, le=MAX_N)] = 1
    stream: bool = False
    stream_options: StreamOptions | None = None
    stop: str | Annotated[list[str], Field(max_length=MAX_STOP_STRINGS)] | None = None
    stop_token_ids: Annotated[list[int], Field(max_length=1024)] | None = None
    max_tokens: Annotated[int, Field(ge=1, le=INT32_MAX)] | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    top_k: Annotated[int, Field(ge=-1, le=INT32_MAX)] | None = None
    min_p: Annotated[float, Field(ge=0, le=1)] | None = None
    seed: Annotated[int, Field(ge=INT64_MIN, le=INT64_MAX)] | None = None
    presence_penalty: Annotated[float, Field(ge=-2, le=2)] | None = None
    frequency_penalty: Annotated[float, Field(ge=-2, le=2)] | None = None
    repetition_penalty: Annotated[float, Field(gt=0, le=10)] | None = None
    logit_bias: Annotated[dict[str, Annotated[float, Field(ge=-100, le=100)]],
                          Field(max_length=MAX_LOGIT_BIAS)] | None = None
    ignore_eos: bool = False
    echo: bool = False
    user: str | None = None
    # Structured-output extensions (vLLM's names): a JSON schema, a list of choices, a GBNF grammar.
    guided_json: Any = None
    guided_choice: Any = None
    guided_grammar: Any = None
    guided_regex: Any = None
    structural_tag: Any = None  # vLLM's (rostra/guided/structural_tag.py): an object or its JSON text
    # vLLM extensions
    min_tokens: Annotated[int, Field(ge=0, le=INT32_MAX)] = 0
    include_stop_str_in_output: bool = False
    skip_special_tokens: bool = True
    bad_words: Annotated[list[str], Field(max_length=MAX_BAD_WORDS)] | None = None
    allowed_token_ids: Annotated[list[int], Field(min_length=1, max_length=1_000_000)] | None = None
    return_token_ids: bool = False
    truncate_prompt_tokens: Annotated[int, Field(ge=-1, le=INT32_MAX)] | None = None
    prompt_logprobs: Annotated[int, Field(ge=0, le=MAX_TOP_LOGPROBS)] | None = None

    def unsupported(self) -> InvalidRequest | None:
        if self.min_tokens and self.max_tokens is not None and self.min_tokens > self.max_tokens:
            return InvalidRequest("min_tokens must not exceed max_tokens", param="min_tokens")
        if any(word == "" for word in self.bad_words or ()):
            return InvalidRequest("bad_words must not contain empty strings", param="bad_words")
        return None

    def guided(self) -> dict[str, Any]:
        return {"guided_json": self.guided_json, "guided_choice": self.guided_choice,
                "guided_grammar": self.guided_grammar, "guided_regex": self.guided_regex,
                "structural_tag": self.structural_tag}

    @field_validator("stop")
    @classmethod
    def _stop_strings_not_empty(cls, value):
        strings = [value] if isinstance(value, str) else value or []
        if any(s == "" for s in strings):
            raise ValueError("stop strings must not be empty")
        return value

    @field_validator("logit_bias")
    @classmethod
    def _logit_bias_keys_are_token_ids(cls, value):
        for key in value or {}:
            # ASCII digits only, and few: str.isdigit() takes "²", and int() refuses 5,000 digits.
            if not _TOKEN_ID.fullmatch(key):
                raise ValueError(f"logit_bias keys must be token ids, got {key[:20]!r}")
        return value

    def sampling(self) -> Sampling:
        """The turn's sampling (rostra/sampling.py) this request asks for, under Chat's and Completions' names
        (the model checked the ranges already)."""
        return Sampling(
            n=self.n, temperature=self.temperature, top_p=self.top_p, top_k=self.top_k, min_p=self.min_p,
            seed=self.seed, presence_penalty=self.presence_penalty, frequency_penalty=self.frequency_penalty,
            repetition_penalty=self.repetition_penalty,
            logit_bias=MappingProxyType({int(key): bias for key, bias in (self.logit_bias or {}).items()}),
            ignore_eos=self.ignore_eos, stop=tuple(self.stop_strings()),
            stop_token_ids=tuple(self.stop_token_ids or ()), echo=self.echo, min_tokens=self.min_tokens,
            include_stop_str_in_output=self.include_stop_str_in_output, skip_special_tokens=self.skip_special_tokens,
            bad_words=tuple(self.bad_words or ()),
            allowed_token_ids=None if self.allowed_token_ids is None else tuple(self.allowed_token_ids),
            return_token_ids=self.return_token_ids, truncate_prompt_tokens=self.truncate_prompt_tokens,
            prompt_logprobs=self.prompt_logprobs, priority=self.priority, cache_salt=self.cache_salt,
            mm_processor_kwargs=self.mm_processor_kwargs, samplers=self.native_samplers(), tfs=self.tfs,
            top_a=self.top_a)

    def stop_strings(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else list(self.stop)
