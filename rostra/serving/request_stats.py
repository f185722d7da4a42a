"""A request's usage and timings, filled in while its events flow: what every API reports of its tokens (usage,
continuous usage, the output budget it was granted) and llama.cpp's `timings` extension."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

from rostra.parsing.events import Event, Finish


class BudgetUsage(TypedDict):
    requested: int
    granted: int


class PromptTokensDetails(TypedDict):
    cached_tokens: int
    cache_write_tokens: int


class CompletionTokensDetails(TypedDict):
    reasoning_tokens: int


class Usage(TypedDict):
    """Chat's and Completions' `usage` as the wire has it (OpenAI's CompletionUsage; `cache_write_tokens` and
    `output_budget` are rostra's, which SDKs keep as unknown fields)."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails
    completion_tokens_details: NotRequired[CompletionTokensDetails]
    output_budget: NotRequired[BudgetUsage]


@dataclass(frozen=True)
class OutputBudget:
    """The output tokens a request asked for and those it was granted (usage's `output_budget`)."""

    requested: int
    granted: int

    def usage(self) -> BudgetUsage:
        return {"requested": self.requested, "granted": self.granted}


@dataclass
class RequestStats:
    """Usage and timings of one request, filled in while its events flow."""

    prompt_tokens: int = 0
    completion_tokens: int = 0  # of the choices that finished
    generated: int = 0  # tokens sampled so far, all choices
    # Per choice (the running count continuous usage reports on that choice's chunks, as vLLM does).
    generated_by_choice: dict[int, int] = field(default_factory=dict)
    cached_by_group: dict[int, int] = field(default_factory=dict)  # prompt tokens from the prefix cache
    cached_tokens: int = 0  # their sum, kept as they come (usage is read per chunk: no sum over all prompts)
    written_by_group: dict[int, int] = field(default_factory=dict)  # prompt tokens written into the prefix cache
    cache_write_tokens: int = 0  # their sum, kept as they come
    reasoning_tokens: int | None = None  # None: no reasoning parser, the detail is left out
    started: float = field(default_factory=time.monotonic)
    first_token: float | None = None
    finished: float | None = None
    # Set when a request's output budget was cut to the room its prompt left (--output-budget fit).
    output_budget: OutputBudget | None = None

    def observe(self, event: Event) -> None:
        if self.first_token is None:
            self.first_token = time.monotonic()
        if isinstance(event, Finish):
            self.completion_tokens += event.completion_tokens
            if self.reasoning_tokens is not None:
                self.reasoning_tokens += event.reasoning_tokens
            self.finished = time.monotonic()

    def note_budget(self, requested: int | None, granted: int) -> None:
        """The budget one prompt was granted; usage reports the smallest cut of a request's prompts."""
        if requested is not None and granted < requested and (
                self.output_budget is None or granted < self.output_budget.granted):
            self.output_budget = OutputBudget(requested, granted)

    def note_cached(self, group: int, cached: int) -> None:
        before = self.cached_by_group.get(group, 0)
        if cached > before:
            self.cached_by_group[group] = cached
            self.cached_tokens += cached - before

    def note_cache_write(self, group: int, written: int) -> None:
        """A prompt's tokens the engine evaluated into its prefix cache (once per prompt, as its cache hits)."""
        before = self.written_by_group.get(group, 0)
        if written > before:
            self.written_by_group[group] = written
            self.cache_write_tokens += written - before

    def note_generated(self, choice: int, tokens: int) -> None:
        self.generated += tokens
        self.generated_by_choice[choice] = self.generated_by_choice.get(choice, 0) + tokens

    def usage(self, running: bool = False, choice: int | None = None) -> Usage:
        """`running`: mid-stream, the tokens generated so far (continuous_usage_stats): of `choice`, when the
        chunk is that choice's and its count is known (a relayed upstream's comes with its last usage only)."""
        completion = self.completion_tokens
        if running and choice is not None and choice in self.generated_by_choice:
            completion = self.generated_by_choice[choice]
        elif running:
            completion = max(self.generated, self.completion_tokens)
        usage: Usage = {"prompt_tokens": self.prompt_tokens, "completion_tokens": completion,
                        "total_tokens": self.prompt_tokens + completion,
                        "prompt_tokens_details": {"cached_tokens": self.cached_tokens,
                                                  "cache_write_tokens": self.cache_write_tokens}}
        if self.reasoning_tokens is not None:
            usage["completion_tokens_details"] = {"reasoning_tokens": self.reasoning_tokens}
        if self.output_budget is not None:  # rostra extension: SDKs keep unknown usage fields
            usage["output_budget"] = self.output_budget.usage()
        return usage

    def timings(self) -> dict[str, float | int | None]:
        """rostra extension (SDKs ignore it): prompt and generation time, tokens per second."""
        now = time.monotonic()
        first = self.first_token or now
        end = self.finished or now
        prompt_ms = (first - self.started) * 1000
        predicted_ms = (end - first) * 1000
        return {
            "prompt_n": self.prompt_tokens,
            "prompt_ms": round(prompt_ms, 3),
            "prompt_per_second": round(self.prompt_tokens / prompt_ms * 1000, 3) if prompt_ms > 0 else None,
            "predicted_n": self.completion_tokens,
            "predicted_ms": round(predicted_ms, 3),
            "predicted_per_second": round(self.completion_tokens / predicted_ms * 1000, 3) if predicted_ms > 0 else None,
        }
