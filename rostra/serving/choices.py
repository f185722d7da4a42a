"""The choice runner: each choice of a request generated on the engine (think-first's two generations where a
constraint waits for the thinking: think_first.py beside it) through its own parser pipeline, and every choice's
semantic events merged into one stream as they come."""

from __future__ import annotations

import asyncio
import dataclasses
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, AsyncGenerator, Callable, Sequence

from rostra.core import FinishReason, Prompt, SamplingParams, TokenStep
from rostra.engines.base import Engine, EngineError
from rostra.errors import ServerError
from rostra.parsing.events import Event, Text
from rostra.parsing.parser import ChoicePipeline
from rostra.serving import think_first
from rostra.serving.request_stats import RequestStats


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
