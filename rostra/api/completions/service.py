"""Completions (legacy): prompts as text or token ids, `echo`, legacy-format logprobs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from rostra.engines.base import Engine
from rostra.core import Prompt, SamplingParams, TokenStep
from rostra.errors import InvalidRequest
from rostra.generation_defaults import GenerationDefaults
from rostra.guided.constraints import response_constraint
from rostra.parsing.events import Event, Finish, Text
from rostra.parsing.parser import ChoicePipeline
from rostra.protocol.completions import CompletionRequest
from rostra.protocol.logprobs import wire_logprob
from rostra.serving.budget import completion_budget, sampling_params
from rostra.serving.choices import ChoiceRun, params_for_choice
from rostra.serving.generation import GenerationService
from rostra.serving.job import Job, job_id
from rostra.serving.rendering import STOP_FIELDS, GenerationStream, stop_fields, token_label, token_text
from rostra.serving.request_stats import RequestStats
from rostra.serving.extensions import (choice_decoder, engine_extensions, prompt_extensions, truncate_prompt,
                                       vllm_prompt_logprobs)
from rostra.serving.relay import relay_job
from rostra.serving.validation import check_logit_bias, check_model, check_stop_token_ids

OPENAI_MAX_TOKENS = 16
MAX_CHOICES = 1024  # prompts x n in one request (--max-choices)
# Prompt tokens scored over all choices: each is a dict of alternatives in the answer (~100 bytes).
MAX_SCORED_PROMPT_TOKENS = 262_144  # OpenAI's default length for Completions when neither request nor server sets one


def _prompts(prompt: str | list[str] | list[int] | list[list[int]]) -> list[str | list[int]]:
    if isinstance(prompt, str):
        return [prompt]
    if not prompt:
        raise InvalidRequest("prompt must not be empty", param="prompt")
    if all(isinstance(p, int) for p in prompt):
        return [[p for p in prompt if isinstance(p, int)]]
    return [p for p in prompt if not isinstance(p, int)]


class LegacyLogprobs:
    """The Completions logprobs format: parallel lists, text offsets counted per choice."""

    def __init__(self, tokens_as_ids: bool = False) -> None:
        self.offset = 0
        self.tokens_as_ids = tokens_as_ids  # vLLM's return_tokens_as_token_ids: tokens named "token_id:N"

    def render(self, text: str, tokens: tuple[TokenStep, ...]) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
        for step in tokens:
            token = token_text(step.token_bytes)
            out["tokens"].append(token_label(step.token_id, step.token_bytes, self.tokens_as_ids))
            unscored = step.logprob is None and not step.top_logprobs  # an echoed prompt's first token (null)
            out["token_logprobs"].append(None if unscored else wire_logprob(step.logprob or 0.0))
            out["top_logprobs"].append(None if unscored else
                                       {token_label(top.token_id, top.token_bytes, self.tokens_as_ids): wire_logprob(top.logprob)
                                        for top in step.top_logprobs})
            out["text_offset"].append(self.offset)
            self.offset += len(token)
        if not tokens:
            self.offset += len(text)
        return out


class EchoTracker:
    """Tells the echoed prompt (a choice's first Text event with `echo`) from generated text: the
    prompt's tokens are not among the choice's `token_ids`."""

    def __init__(self, job: Job):
        self.pending = {run.index for run in job.runs if run.prefix}

    def generated_ids(self, index: int, event: Text) -> list[int]:
        if index in self.pending:
            self.pending.discard(index)
            return []
        return [step.token_id for step in event.logprobs]


def _extension_fields(job: Job, run: ChoiceRun) -> dict[str, Any]:
    """vLLM's per-choice prompt fields: prompt_token_ids (return_token_ids), prompt_logprobs."""
    fields: dict[str, Any] = {}
    if job.options.return_token_ids:
        fields["prompt_token_ids"] = list(run.prompt.token_ids)
    if job.options.prompt_logprobs:
        fields["prompt_logprobs"] = (run.relayed_prompt_logprobs if run.relayed_prompt_logprobs is not None
                                     else vllm_prompt_logprobs(run.prompt_logprobs, token_text))
    return fields


@dataclass
class _ChoiceState:
    text: list[str] = field(default_factory=list)
    logprobs: dict[str, list[Any]] = field(default_factory=lambda: {"tokens": [], "token_logprobs": [],
                                                                    "top_logprobs": [], "text_offset": []})
    token_ids: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    stop: dict[str, Any] = field(default_factory=dict)  # stop_reason and stop_str, as the finishing chunk said
    prompt_logprobs: list[Any] | None = None  # from the last chunk: built once per choice


class CompletionStream(GenerationStream):
    """A completion: events -> text_completion chunks; each choice is the fold of its chunks."""

    object_name = "text_completion"
    null_usage = False

    def __init__(self, job: Job):
        super().__init__(job)
        self.logprobs = {run.index: LegacyLogprobs(self.options.tokens_as_ids) for run in job.runs}
        self.echo = EchoTracker(job)
        self.started: set[int] = set()
        self.choices = {run.index: _ChoiceState() for run in job.runs}
        self.runs = {run.index: run for run in job.runs}  # looked up per chunk: never a scan of all choices

    def render(self, index: int, event: Event) -> dict[str, Any] | None:
        if isinstance(event, Text):
            logprobs = self.logprobs[index].render(event.text, event.logprobs) if self.options.logprobs else None
            choice = {"index": index, "text": event.text, "logprobs": logprobs, "finish_reason": None}
            if self.options.return_token_ids:
                choice["token_ids"] = self.echo.generated_ids(index, event)
                if index not in self.started:  # vLLM: the prompt's ids on the choice's first chunk
                    self.started.add(index)
                    choice["prompt_token_ids"] = _extension_fields(self.job, self.runs[index])["prompt_token_ids"]
            return self.chunk([choice])
        if isinstance(event, Finish):
            choice = {"index": index, "text": "", "logprobs": None, "finish_reason": event.reason, **stop_fields(event)}
            if self.options.prompt_logprobs:
                choice["prompt_logprobs"] = _extension_fields(self.job, self.runs[index])["prompt_logprobs"]
            return self.chunk([choice])
        return None

    def fold_choice(self, choice: dict[str, Any]) -> None:
        state = self.choices[choice["index"]]
        state.text.append(choice["text"])
        for key, values in (choice["logprobs"] or {}).items():
            state.logprobs[key].extend(values)
        state.token_ids.extend(choice.get("token_ids", ()))
        if choice["finish_reason"]:
            state.finish_reason = choice["finish_reason"]
            state.stop = {key: choice[key] for key in STOP_FIELDS if key in choice}
        if "prompt_logprobs" in choice:
            state.prompt_logprobs = choice["prompt_logprobs"]

    def response(self) -> dict[str, Any]:
        choices = []
        for index, state in sorted(self.choices.items()):
            choice = {"index": index, "text": "".join(state.text),
                      "logprobs": state.logprobs if self.options.logprobs else None,
                      "finish_reason": state.finish_reason or "stop", **dict.fromkeys(STOP_FIELDS), **state.stop}
            if self.options.return_token_ids:
                choice["prompt_token_ids"] = list(self.runs[index].prompt.token_ids)
            if self.options.prompt_logprobs:
                choice["prompt_logprobs"] = (state.prompt_logprobs if state.prompt_logprobs is not None
                                             else _extension_fields(self.job, self.runs[index])["prompt_logprobs"])
            if self.options.return_token_ids:
                choice["token_ids"] = state.token_ids
            choices.append(choice)
        return self.job.response("text_completion", choices)


class CompletionService(GenerationService):
    output = CompletionStream

    def __init__(self, engine: Engine, served_names: Callable[[], list[str]],
                 defaults: GenerationDefaults = GenerationDefaults(), max_choices: int = MAX_CHOICES,
                 fit_budgets: bool = True):
        self.fit_budgets = fit_budgets  # a max_tokens beyond the room left: cut to it, else a 400 (strict)
        super().__init__(engine, defaults)
        self.served_names = served_names
        self.max_choices = max_choices

    def _check_fan_out(self, prompts: int, n: int) -> None:
        """prompts x n choices run at once, each with its own pipeline and task: bounded."""
        if prompts * n > self.max_choices:
            param = "n" if n > 1 else "prompt"
            raise InvalidRequest(f"{prompts} prompts x n={n} is {prompts * n} choices; this server runs at most "
                                 f"{self.max_choices} per request (--max-choices)", param=param)

    async def _prompt_tokens(self, prompt: str | list[int], keep: int | None, context_length: int,
                             add_special: bool = True) -> tuple[str, list[int]]:
        """A prompt's text and token ids (cut to the last `keep` tokens with truncate_prompt_tokens)."""
        engine = self.engine
        if isinstance(prompt, str):
            token_ids = await engine.tokenize(prompt, add_special=add_special)
        else:
            if prompt and not (min(prompt) >= 0 and max(prompt) < engine.vocab_size):  # C speed: long lists too
                raise InvalidRequest("prompt token id outside the vocabulary", param="prompt")
            token_ids = prompt
        if not token_ids:
            raise InvalidRequest("prompt must not be empty", param="prompt")
        cut = truncate_prompt(token_ids, keep, context_length)
        if not cut:
            raise InvalidRequest("truncate_prompt_tokens left nothing of the prompt", param="truncate_prompt_tokens")
        text = prompt if isinstance(prompt, str) and cut is token_ids else await engine.detokenize(cut)
        return text, cut

    def _check_params(self, params: SamplingParams, scored: bool) -> None:
        try:
            self.engine.check_params(params)
        except InvalidRequest as exc:
            if scored and exc.param == "prompt_logprobs":
                raise InvalidRequest("echo together with logprobs is not supported by this engine: "
                                     "it cannot score prompt tokens", param="echo") from exc
            raise

    async def prepare(self, request: CompletionRequest) -> Job:
        check_model(request.model, self.served_names())
        prompts = _prompts(request.prompt)
        self._check_fan_out(len(prompts), request.n)
        if self.engine.relays(request.model):
            first = prompts[0] if prompts and isinstance(prompts[0], str) else ""
            return await relay_job(self.engine, request, "completions", "cmpl", len(prompts) * request.n, first)
        if request.suffix:
            raise InvalidRequest("suffix (fill-in-the-middle) is not supported", param="suffix")
        if request.best_of is not None and request.best_of != request.n:
            raise InvalidRequest("best_of other than n is not supported", param="best_of")
        echo_only = request.max_tokens == 0
        if echo_only and not request.echo:
            raise InvalidRequest("max_tokens 0 generates nothing: it needs echo (the prompt back, scored with "
                                 "logprobs)", param="max_tokens")
        constraint = response_constraint(None, request.guided())
        engine, sampling = self.engine, request.sampling()
        check_logit_bias(sampling.logit_bias, engine.vocab_size)
        check_stop_token_ids(sampling.stop_token_ids, engine.vocab_size)
        # echo with logprobs scores the prompt: the engine must be able to (else its 400 names `echo`).
        scored = request.echo and request.logprobs is not None
        extensions = await engine_extensions(engine, sampling, request.model)
        if scored:  # the prompt's alternatives as many as either asks for
            extensions["prompt_logprobs"] = max(request.logprobs or 0, request.prompt_logprobs or 0)
        prompt_fields = prompt_extensions(engine, sampling)
        runs: list[ChoiceRun] = []
        stats = RequestStats()
        context_length = engine.model_info(request.model).context_length
        scored_tokens = 0
        for prompt_index, prompt in enumerate(prompts):
            text, token_ids = await self._prompt_tokens(prompt, request.truncate_prompt_tokens, context_length,
                                                          request.add_special_tokens)
            stats.prompt_tokens += len(token_ids)
            if extensions["prompt_logprobs"] is not None:
                scored_tokens += len(token_ids) * request.n
                if scored_tokens > MAX_SCORED_PROMPT_TOKENS:
                    raise InvalidRequest(f"scoring the prompts (prompt_logprobs, echo with logprobs) is limited to "
                                         f"{MAX_SCORED_PROMPT_TOKENS} prompt tokens over all choices",
                                         param="echo" if scored else "prompt_logprobs")
            # echo_only: the engine runs one step at most, for the prompt's scores.
            asked = 1 if echo_only else request.max_tokens
            max_tokens = completion_budget(len(token_ids), asked, self.defaults, context_length,
                                           "prompt", "max_tokens", openai_default=OPENAI_MAX_TOKENS,
                                           min_tokens=0 if echo_only else request.min_tokens, fit=self.fit_budgets)
            stats.note_budget(request.max_tokens, max_tokens)
            params = sampling_params(sampling, max_tokens, request.logprobs, constraint, self.defaults, **extensions)
            self._check_params(params, scored)
            engine_prompt = Prompt(token_ids, text, None, request.model, **prompt_fields)
            for n in range(request.n):
                pipeline = ChoicePipeline(choice_decoder(sampling, engine, parsers_read_markup=False),
                                          with_logprobs=request.logprobs is not None or request.return_token_ids)
                runs.append(ChoiceRun(prompt_index * request.n + n, engine_prompt,
                                      params_for_choice(params, n), pipeline, prefix=text if request.echo else "",
                                      score_prefix=scored, prompt_group=prompt_index, echo_only=echo_only))
        return Job(request, job_id("cmpl", request), request.model, runs, stats)
