"""Completions (legacy): prompts as text or token ids, `echo`, legacy-format logprobs."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Callable

from rostra.engines.base import Engine, Prompt, TokenStep
from rostra.errors import InvalidRequest
from rostra.generation_defaults import GenerationDefaults
from rostra.guided.constraints import response_constraint
from rostra.parsing.decoder import Decoder
from rostra.parsing.events import Event, Finish, Text
from rostra.parsing.parser import ChoicePipeline
from rostra.protocol.completions import CompletionRequest
from rostra.serving.generation import (
    ChoiceRun,
    ChunkRenderer,
    GenerationService,
    Job,
    RequestStats,
    completion_budget,
    params_for_choice,
    sampling_params,
    token_text,
)
from rostra.serving.relay import relay_job
from rostra.serving.validation import check_logit_bias, check_model, check_stop_token_ids

OPENAI_MAX_TOKENS = 16  # OpenAI's default length for Completions when neither request nor server sets one


def _prompts(prompt) -> list[str | list[int]]:
    if isinstance(prompt, str):
        return [prompt]
    if not prompt:
        raise InvalidRequest("prompt must not be empty", param="prompt")
    if all(isinstance(p, int) for p in prompt):
        return [list(prompt)]
    return list(prompt)


class LegacyLogprobs:
    """The Completions logprobs format: parallel lists, text offsets counted per choice."""

    def __init__(self):
        self.offset = 0

    def render(self, text: str, tokens: tuple[TokenStep, ...]) -> dict:
        out = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
        for step in tokens:
            token = token_text(step.token_bytes)
            out["tokens"].append(token)
            out["token_logprobs"].append(step.logprob if step.logprob is not None else 0.0)
            out["top_logprobs"].append({token_text(top.token_bytes): top.logprob for top in step.top_logprobs})
            out["text_offset"].append(self.offset)
            self.offset += len(token)
        if not tokens:
            self.offset += len(text)
        return out


class CompletionChunkRenderer(ChunkRenderer):
    object_name = "text_completion"
    null_usage = False

    def __init__(self, job: Job):
        super().__init__(job)
        self.logprobs = {run.index: LegacyLogprobs() for run in job.runs}

    def render(self, index: int, event: Event) -> dict | None:
        with_logprobs = self.job.request.logprobs is not None
        if isinstance(event, Text):
            logprobs = self.logprobs[index].render(event.text, event.logprobs) if with_logprobs else None
            return self.chunk([{"index": index, "text": event.text, "logprobs": logprobs, "finish_reason": None}])
        if isinstance(event, Finish):
            return self.chunk([{"index": index, "text": "", "logprobs": None, "finish_reason": event.reason}])
        return None


@dataclass
class _ChoiceState:
    text: list[str] = field(default_factory=list)
    logprobs: dict = field(default_factory=lambda: {"tokens": [], "token_logprobs": [], "top_logprobs": [],
                                                    "text_offset": []})
    legacy: LegacyLogprobs = field(default_factory=LegacyLogprobs)
    finish_reason: str | None = None


class CompletionFold:
    def __init__(self, job: Job):
        self.job = job
        self.choices = {run.index: _ChoiceState() for run in job.runs}

    def add(self, index: int, event: Event) -> None:
        state = self.choices[index]
        if isinstance(event, Text):
            state.text.append(event.text)
            for key, values in state.legacy.render(event.text, event.logprobs).items():
                state.logprobs[key].extend(values)
        elif isinstance(event, Finish):
            state.finish_reason = event.reason

    def response(self) -> dict:
        with_logprobs = self.job.request.logprobs is not None
        choices = [{"index": index, "text": "".join(state.text),
                    "logprobs": state.logprobs if with_logprobs else None,
                    "finish_reason": state.finish_reason or "stop"}
                   for index, state in sorted(self.choices.items())]
        return self.job.response("text_completion", choices)


class CompletionService(GenerationService):
    renderer = CompletionChunkRenderer
    fold = CompletionFold

    def __init__(self, engine: Engine, served_names: Callable[[], list[str]],
                 defaults: GenerationDefaults = GenerationDefaults()):
        super().__init__(engine, defaults)
        self.served_names = served_names

    async def prepare(self, request: CompletionRequest) -> Job:
        check_model(request.model, self.served_names())
        if self.engine.relays(request.model):
            prompts = _prompts(request.prompt)
            first = prompts[0] if prompts and isinstance(prompts[0], str) else ""
            return await relay_job(self.engine, request, "completions", "cmpl", len(prompts) * request.n, first)
        if request.suffix:
            raise InvalidRequest("suffix (fill-in-the-middle) is not supported", param="suffix")
        if request.best_of is not None and request.best_of != request.n:
            raise InvalidRequest("best_of other than n is not supported", param="best_of")
        if request.echo and request.logprobs is not None:
            raise InvalidRequest("echo together with logprobs is not supported: the engine does not score prompts",
                                 param="echo")
        constraint = response_constraint(None, request.guided())
        engine = self.engine
        check_logit_bias(request.logit_bias, engine.vocab_size)
        check_stop_token_ids(request.stop_token_ids, engine.vocab_size)
        runs: list[ChoiceRun] = []
        stats = RequestStats()
        for prompt_index, prompt in enumerate(_prompts(request.prompt)):
            if isinstance(prompt, str):
                text, token_ids = prompt, await engine.tokenize(prompt, add_special=True)
            else:
                if any(not 0 <= t < engine.vocab_size for t in prompt):
                    raise InvalidRequest("prompt token id outside the vocabulary", param="prompt")
                text, token_ids = await engine.detokenize(prompt), prompt
            if not token_ids:
                raise InvalidRequest("prompt must not be empty", param="prompt")
            stats.prompt_tokens += len(token_ids)
            max_tokens = completion_budget(len(token_ids), request.max_tokens, self.defaults,
                                           engine.model_info(request.model).context_length, "prompt", "max_tokens",
                                           openai_default=OPENAI_MAX_TOKENS)
            params = sampling_params(request, max_tokens, request.logprobs, constraint, self.defaults)
            for n in range(request.n):
                pipeline = ChoicePipeline(Decoder(request.stop_strings(), request.stop_token_ids or ()),
                                          with_logprobs=request.logprobs is not None)
                runs.append(ChoiceRun(prompt_index * request.n + n, Prompt(token_ids, text, None, request.model),
                                      params_for_choice(params, n), pipeline,
                                      prefix=text if request.echo else ""))
        return Job(request, f"cmpl-{uuid.uuid4().hex}", request.model, runs, stats)
