"""What Chat Completions and Completions share: running the choices of one request on the
engine concurrently and merging their semantic events into one stream, plus usage and timings.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, AsyncGenerator, Awaitable, Callable, Protocol, Sequence

from rostra import __version__
from rostra.engines.base import Engine, EngineError
from rostra.core import FinishReason, Prompt, SamplingParams, TokenStep
from rostra.errors import InvalidRequest, ServerError
from rostra.generation_defaults import GenerationDefaults
from rostra.guided import think_first
from rostra.guided.constraints import Constraint
from rostra.parsing.events import Event, Finish, Text
from rostra.parsing.parser import ChoicePipeline
from rostra.protocol.chat import ChatCompletionRequest
from rostra.protocol.completions import CompletionRequest
from rostra.sampling import Sampling
from rostra.serving.deadline import NO_DEADLINE, Deadline
from rostra.turn import OutputOptions, Turn

# Identifies the serving stack a response came from (OpenAI's field for backend changes).
SYSTEM_FINGERPRINT = f"fp_rostra_{__version__}"

log = logging.getLogger("rostra.serving")


@dataclass
class ChoiceRun:
    index: int
    prompt: Prompt
    # None when a gateway relays the choice: the upstream samples and parses it.
    params: SamplingParams | None = None
    pipeline: ChoicePipeline | None = None
    prefix: str = ""  # echoed text that comes before the generated text
    # Completions echo with logprobs: the prefix is released with the prompt's scores, once the engine has them.
    score_prefix: bool = False
    # Completions echo with max_tokens 0: the prefix (scored, if score_prefix) is the whole choice; nothing is
    # generated (the engine runs only to score the prompt, and is stopped at its first output).
    echo_only: bool = False
    prompt_group: int = 0  # choices of the same prompt share one group (usage counts each prompt once)
    # The engine's scores of the prompt (params.prompt_logprobs), once it sent them.
    prompt_logprobs: tuple[TokenStep | None, ...] | None = None
    # A passthrough upstream's `prompt_logprobs`, as it sent them (vLLM's wire shape): relayed as they are.
    relayed_prompt_logprobs: list[Any] | None = None


@dataclass(frozen=True)
class OutputBudget:
    """The output tokens a request asked for and those it was granted (usage's `output_budget`)."""

    requested: int
    granted: int

    def usage(self) -> dict[str, int]:
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

    def usage(self, running: bool = False, choice: int | None = None) -> dict[str, Any]:
        """`running`: mid-stream, the tokens generated so far (continuous_usage_stats): of `choice`, when the
        chunk is that choice's and its count is known (a relayed upstream's comes with its last usage only)."""
        completion = self.completion_tokens
        if running and choice is not None and choice in self.generated_by_choice:
            completion = self.generated_by_choice[choice]
        elif running:
            completion = max(self.generated, self.completion_tokens)
        usage: dict[str, Any] = {"prompt_tokens": self.prompt_tokens, "completion_tokens": completion,
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


async def choice_events(engine: Engine, request_id: str, run: ChoiceRun, stats: RequestStats) -> AsyncGenerator[Event, None]:
    """One choice: engine outputs through its pipeline. Closing it early aborts the generation."""
    if run.prefix and not run.score_prefix:
        yield Text(run.prefix)
    reason: FinishReason = "stop"
    engine_stop: int | str | None = None  # what the engine says stopped it (an upstream's stop_reason)
    pipeline, params = run.pipeline, run.params
    if pipeline is None or params is None:
        raise ServerError("a relayed choice has no generation of its own")  # relay_job gives it a source
    if run.echo_only:
        async for event in _scored_prefix(engine, request_id, run, pipeline, params):
            yield event
        return
    try:
        async with aclosing(think_first.generate(engine, f"{request_id}-{run.index}", run.prompt, params)) as outputs:
            async for output in outputs:
                if output.prompt_logprobs is not None:
                    run.prompt_logprobs = output.prompt_logprobs
                    if run.score_prefix:
                        yield Text(run.prefix, prompt_steps(run.prompt.token_ids, output.prompt_logprobs,
                                                            engine.token_bytes))
                if output.cached_tokens is not None:
                    stats.note_cached(run.prompt_group, output.cached_tokens)
                if output.cache_write_tokens is not None:
                    stats.note_cache_write(run.prompt_group, output.cache_write_tokens)
                if output.prompt_tokens is not None:  # (images: the engine's count of their tokens)
                    stats.prompt_tokens = output.prompt_tokens
                before = pipeline.completion_tokens
                events = pipeline.feed(output)
                stats.note_generated(run.index, pipeline.completion_tokens - before)  # before its chunks go out
                for event in events:
                    yield event
                reason = output.finish_reason or reason
                engine_stop = output.stop_reason if output.stop_reason is not None else engine_stop
                if pipeline.stopped:
                    break  # a stop string or stop token: closing the generation aborts it
    except EngineError as exc:
        raise ServerError(f"the engine failed: {exc}") from exc
    if run.score_prefix and run.prompt_logprobs is None:  # the engine ended before scoring: echo it unscored
        yield Text(run.prefix)
    for event in pipeline.finish(reason, engine_stop):
        yield event


async def _scored_prefix(engine: Engine, request_id: str, run: ChoiceRun, pipeline: ChoicePipeline,
                         params: SamplingParams) -> AsyncGenerator[Event, None]:
    """An echo_only choice: the prompt, with the engine's scores when asked for; ends as "length" (the budget of
    0 tokens), as vLLM's and OpenAI's legacy Completions do."""
    if run.score_prefix:
        try:
            async with aclosing(engine.generate(f"{request_id}-{run.index}", run.prompt, params)) as outputs:
                async for output in outputs:
                    if output.prompt_logprobs is not None:
                        run.prompt_logprobs = output.prompt_logprobs
                        yield Text(run.prefix, prompt_steps(run.prompt.token_ids, output.prompt_logprobs,
                                                            engine.token_bytes))
                        break  # closing the generation aborts it: its token is not wanted
        except EngineError as exc:
            raise ServerError(f"the engine failed: {exc}") from exc
        if run.prompt_logprobs is None:
            yield Text(run.prefix)
    for event in pipeline.finish("length"):
        yield event


async def run_choices(engine: Engine, request_id: str, runs: Sequence[ChoiceRun],
                      stats: RequestStats) -> AsyncGenerator[tuple[int, Event], None]:
    """All choices' events, merged as they come. Leaving early aborts every generation."""
    if len(runs) == 1:  # the common case: no tasks, no queue, one hop less per token
        async with aclosing(choice_events(engine, request_id, runs[0], stats)) as events:
            async for event in events:
                stats.observe(event)
                yield runs[0].index, event
        return
    queue: asyncio.Queue[tuple[int, Any]] = asyncio.Queue()
    done = object()

    async def drive(run: ChoiceRun) -> None:
        try:
            async with aclosing(choice_events(engine, request_id, run, stats)) as events:
                async for event in events:
                    queue.put_nowait((run.index, event))
        except Exception as exc:  # handed to the consumer, which raises it
            queue.put_nowait((run.index, exc))
        finally:
            queue.put_nowait((run.index, done))

    tasks = [asyncio.create_task(drive(run)) for run in runs]
    try:
        remaining = len(tasks)
        taken = 0
        while remaining:
            index, item = await queue.get()  # (returns at once while the queue holds items)
            taken += 1
            if taken % YIELD_EVERY == 0:  # a queue filled by a thousand choices is not emptied in one go
                await asyncio.sleep(0)
            if item is done:
                remaining -= 1
            elif isinstance(item, Exception):
                raise item
            else:
                stats.observe(item)
                yield index, item
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


# Events taken from a full queue before the loop gets a turn (other requests, /health, SIGTERM).
YIELD_EVERY = 64


def params_for_choice(params: SamplingParams, number: int) -> SamplingParams:
    """With a seed, choice k samples with seed + k: reproducible, yet the n choices differ."""
    if params.seed is None or number == 0:
        return params
    return dataclasses.replace(params, seed=params.seed + number)


def prompt_steps(token_ids: Sequence[int], scores: tuple[TokenStep | None, ...],
                 token_bytes: Callable[[int], bytes]) -> tuple[TokenStep, ...]:
    """The prompt's tokens as steps for echoed logprobs; the first, which nothing predicts, has none."""
    return tuple(step if step is not None else TokenStep(token_id, token_bytes(token_id))
                 for token_id, step in zip(token_ids, scores))


# What stopped a choice, on its finishing chunk and in the response: vLLM's and tabbyAPI's names.
STOP_FIELDS = ("stop_reason", "stop_str")


def stop_fields(finish: Finish) -> dict[str, int | str | None]:
    """vLLM's `stop_reason` (the stop string, or the stop token's id; null after end of generation or
    the length limit) and tabbyAPI's `stop_str` (the stop string, or the stop token's text)."""
    return {"stop_reason": finish.stop_reason, "stop_str": finish.stop_str}


def token_text(data: bytes) -> str:
    """A token's text for logprobs; a token holding part of a character shows U+FFFD."""
    return data.decode("utf-8", errors="replace")


def token_label(token_id: int, data: bytes, as_id: bool) -> str:
    """A token as logprobs name it: its text, or vLLM's `token_id:N` (return_tokens_as_token_ids)."""
    return f"token_id:{token_id}" if as_id else token_text(data)


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


def job_id(prefix: str, request: JobRequest) -> str:
    """vLLM's: the client's `request_id` (or its X-Request-Id header) after the prefix, else a fresh one."""
    return f"{prefix}-{getattr(request, 'request_id', None) or uuid.uuid4().hex}"


JobRequest = Turn | ChatCompletionRequest | CompletionRequest


@dataclass
class Job:
    """A validated request, ready to run: its choices and the ids every chunk repeats."""

    # What it was made of: a turn (any API's conversation), or the wire request it relays or completes whole.
    request: JobRequest
    id: str
    model: str
    runs: list[ChoiceRun]
    stats: RequestStats
    created: int = field(default_factory=lambda: int(time.time()))
    # Chat: the message field(s) the thinking goes to; empty: it is left out of the response.
    reasoning_fields: tuple[str, ...] = ()
    # Where the events come from when not from the engine's generations (a relayed upstream stream).
    source: Callable[[], AsyncGenerator[tuple[int, Event], None]] | None = None
    # What frees what preparing opened (a relayed upstream's connection) when the job may never run: idempotent.
    release: Callable[[], Awaitable[None]] | None = None
    options: OutputOptions = field(init=False)
    # The id the engine's generations run under: unique even where the client named the request
    # (request_id, X-Request-Id), a name two requests may share.
    engine_id: str = field(init=False)

    def __post_init__(self) -> None:
        self.options = OutputOptions.of(self.request)
        named = getattr(self.request, "request_id", None)
        self.engine_id = f"{self.id}-{uuid.uuid4().hex[:12]}" if named else self.id

    async def close(self) -> None:
        """Free what the job holds before (or without) running it; harmless once it ran."""
        if self.release is not None:
            await self.release()

    def envelope(self, object_name: str, choices: list[dict[str, Any]]) -> dict[str, Any]:
        """The fields every response and chunk of this job repeats."""
        return {"id": self.id, "object": object_name, "created": self.created, "model": self.model,
                "system_fingerprint": SYSTEM_FINGERPRINT, "choices": choices}

    def response(self, object_name: str, choices: list[dict[str, Any]]) -> dict[str, Any]:
        """A non-streamed response: the choices, usage and timings."""
        return {**self.envelope(object_name, choices), "usage": self.stats.usage(), "timings": self.stats.timings()}


class OverChatJob:
    """A front end's prepared request that a chat job generates (Responses, Messages): what the access log
    and the request log read of any job comes from that chat job."""

    chat: Job

    @property
    def id(self) -> str:
        return self.chat.id

    @property
    def model(self) -> str:
        return self.chat.model

    @property
    def stats(self) -> RequestStats:
        return self.chat.stats

    @property
    def runs(self) -> list[ChoiceRun]:
        return self.chat.runs

    async def close(self) -> None:
        """Free what its chat job holds (a relayed upstream) if it never ran: idempotent."""
        await self.chat.close()


class EventRenderer(Protocol):
    """An API's renderer (Chat chunks, Completions chunks, Messages events, Responses events): what a stream sends
    at its start, for each semantic event and at its end, each folded as it goes into the answer `result()`
    returns, so a non-streamed answer is the fold of the very events a stream sends."""

    def start(self) -> list[dict[str, Any]]: ...

    def add(self, index: int, event: Event) -> list[dict[str, Any]]: ...

    def end(self) -> list[dict[str, Any]]: ...

    def result(self) -> dict[str, Any]: ...


async def rendered(events: AsyncGenerator[tuple[int, Event], None],
                   renderer: EventRenderer) -> AsyncGenerator[dict[str, Any], None]:
    """The one stream loop of every API: the renderer's output for the choices' merged events.
    aclosing: a client that leaves closes this stream, and with it the generations, at once."""
    for out in renderer.start():
        yield out
    async with aclosing(events):
        async for index, event in events:
            for out in renderer.add(index, event):
                yield out
    for out in renderer.end():
        yield out


async def folded(events: AsyncGenerator[tuple[int, Event], None], renderer: EventRenderer) -> dict[str, Any]:
    """The non-streamed answer: the same loop, its output folded by the renderer instead of sent."""
    async with aclosing(rendered(events, renderer)) as outputs:
        async for _ in outputs:
            pass
    return renderer.result()


class GenerationStream:
    """One request's output, streamed or not (an EventRenderer): `add` turns a semantic event into the chunk a
    stream sends and folds that same chunk into the state `response()` returns, so a non-streamed response is
    the fold of the stream by construction. Subclasses write the event -> chunk mapping (`render`) and the fold
    of one chunk's choice (`fold_choice`) for their API, once."""

    object_name: str
    # Chat chunks carry "usage": null until the last one when usage is asked for; the spec
    # has no null usage for Completions chunks, so they leave it out.
    null_usage: bool

    def __init__(self, job: Job):
        self.job = job
        self.options = job.options

    def start(self) -> list[dict[str, Any]]:
        chunks = self.opening()
        for chunk in chunks:
            for choice in chunk["choices"]:
                self.fold_choice(choice)
        return chunks

    def opening(self) -> list[dict[str, Any]]:
        """The chunks sent before any event (Chat: each choice's role)."""
        return []

    def add(self, index: int, event: Event) -> list[dict[str, Any]]:
        chunk = self.render(index, event)
        if chunk is None:
            return []
        for choice in chunk["choices"]:
            self.fold_choice(choice)
        return [chunk]

    def end(self) -> list[dict[str, Any]]:
        """After the last event: the usage chunk, when asked for."""
        usage_chunk = self.usage_chunk()
        return [] if usage_chunk is None else [usage_chunk]

    def result(self) -> dict[str, Any]:
        return self.response()

    def render(self, index: int, event: Event) -> dict[str, Any] | None:
        raise NotImplementedError

    def fold_choice(self, choice: dict[str, Any]) -> None:
        raise NotImplementedError

    def response(self) -> dict[str, Any]:
        raise NotImplementedError

    def chunk(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        chunk = self.job.envelope(self.object_name, choices)
        if self.options.continuous_usage:
            chunk["usage"] = self.job.stats.usage(running=True, choice=choices[0]["index"] if len(choices) == 1 else None)
        elif self.options.include_usage and self.null_usage:
            chunk["usage"] = None
        return chunk

    def usage_chunk(self) -> dict[str, Any] | None:
        if not self.options.include_usage:
            return None
        return self.job.response(self.object_name, [])


class GenerationService:
    """Runs a job's choices; its GenerationStream renders the events as chunks, and folds them into the
    non-streamed response."""

    output: type[GenerationStream]
    # Called once a job's generations are over (metrics): the job and its choices' finish reasons.
    on_finished: Callable[[Job, list[str]], None] | None = None

    def __init__(self, engine: Engine, defaults: GenerationDefaults = GenerationDefaults()):
        self.engine = engine
        self.defaults = defaults  # for the sampling parameters a request leaves unset

    async def events(self, job: Job) -> AsyncGenerator[tuple[int, Event], None]:
        reasons: list[str] = []
        try:
            source = job.source() if job.source else run_choices(self.engine, job.engine_id, job.runs, job.stats)
            async with aclosing(source) as events:
                async for index, event in events:
                    if isinstance(event, Finish):
                        reasons.append(event.reason)
                    yield index, event
        finally:
            if self.on_finished is not None:
                self.on_finished(job, reasons or ["abort"])

    def stream(self, job: Job, deadline: Deadline = NO_DEADLINE) -> AsyncGenerator[dict[str, Any], None]:
        return rendered(deadline.bound(self.events(job)), self.output(job))

    async def complete(self, job: Job, deadline: Deadline = NO_DEADLINE) -> dict[str, Any]:
        return await folded(deadline.bound(self.events(job)), self.output(job))
