"""Fields shared by Chat Completions and Completions requests."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

MAX_N = 128
MAX_STOP_STRINGS = 16
MAX_TOP_LOGPROBS = 20


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")
    include_usage: bool = False
    # vLLM extension: every chunk carries the usage so far.
    continuous_usage_stats: bool = False


def drop_nulls(data: Any) -> Any:
    """A top-level null means "not given" (as OpenAI reads it): the field keeps its default."""
    if isinstance(data, dict):
        return {key: value for key, value in data.items() if value is not None}
    return data


class SamplingFields(BaseModel):
    """OpenAI sampling parameters plus the common extensions (top_k, min_p, repetition_penalty,
    stop_token_ids, ignore_eos) that vLLM and llama.cpp servers accept."""

    model_config = ConfigDict(extra="ignore", strict=True)

    _nulls_are_defaults = model_validator(mode="before")(drop_nulls)

    model: str
    n: Annotated[int, Field(ge=1, le=MAX_N)] = 1
    stream: bool = False
    stream_options: StreamOptions | None = None
    stop: str | Annotated[list[str], Field(max_length=MAX_STOP_STRINGS)] | None = None
    stop_token_ids: list[int] | None = None
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    top_k: Annotated[int, Field(ge=-1)] | None = None
    min_p: Annotated[float, Field(ge=0, le=1)] | None = None
    seed: int | None = None
    presence_penalty: Annotated[float, Field(ge=-2, le=2)] | None = None
    frequency_penalty: Annotated[float, Field(ge=-2, le=2)] | None = None
    repetition_penalty: Annotated[float, Field(gt=0, le=10)] | None = None
    logit_bias: dict[str, Annotated[float, Field(ge=-100, le=100)]] | None = None
    ignore_eos: bool = False
    echo: bool = False
    user: str | None = None
    # Structured-output extensions (vLLM's names): a JSON schema, a list of choices, a GBNF grammar.
    guided_json: Any = None
    guided_choice: Any = None
    guided_grammar: Any = None
    guided_regex: Any = None

    def guided(self) -> dict[str, Any]:
        return {"guided_json": self.guided_json, "guided_choice": self.guided_choice,
                "guided_grammar": self.guided_grammar, "guided_regex": self.guided_regex}

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
            if not key.lstrip("-").isdigit():
                raise ValueError(f"logit_bias keys must be token ids, got {key!r}")
        return value

    def stop_strings(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else list(self.stop)
