"""The generation service Chat Completions and Completions share: a job's choices run on the engine (choices.py),
their events rendered as chunks and folded into the response (rendering.py), and the job's end reported."""

from __future__ import annotations

from contextlib import aclosing
from typing import Any, AsyncGenerator, Callable

from rostra.engines.base import Engine
from rostra.generation_defaults import GenerationDefaults
from rostra.parsing.events import Event, Finish
from rostra.serving.choices import run_choices
from rostra.serving.deadline import NO_DEADLINE, Deadline
from rostra.serving.job import Job
from rostra.serving.rendering import GenerationStream, folded, rendered


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
