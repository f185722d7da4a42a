"""The one gate every piece of engine work passes: generations (generation_endpoint.py) and the rest (embedding,
counting, tokenizing: `gated`).

In order: an admission slot (--max-concurrency / --max-queue: a 429 with Retry-After beyond the queue), then a
lease on the model (loading it if need be), then the work; the request's deadline (--request-timeout) bounds
all three, the admission wait included, and a client that goes away cancels whichever is under way (a client
gone while it waits for admission is dropped at once, holding nothing). The slot and the lease are given back
when the work ends, however it ends, by whatever outlives the call. Admission comes before the lease so that
--max-concurrency also bounds the model loads that requests cause.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Awaitable, Callable, TypeVar

from starlette.requests import Request

from rostra.http.context import ServerContext, server_context
from rostra.http.sse import until_disconnected
from rostra.models.bundle import ModelBundle
from rostra.serving.deadline import Deadline

T = TypeVar("T")


@dataclass
class Admitted:
    """A request through the gate: its model's bundle, and what it holds (an admission slot and a lease on the
    model) until `release`, which whatever outlives the route calls once (a stream's end, a background run's)."""

    bundle: ModelBundle
    release: Callable[[], None]


async def admit(request: Request, model: str | None, deadline: Deadline) -> Admitted | None:
    """An admission slot, then a lease on `model`, both within `deadline`; None, holding nothing, when the client
    went away first. Beyond the queue a 429, past the deadline a 504 (neither holds anything either)."""
    taking = asyncio.ensure_future(_take(server_context(request), model, deadline))
    try:
        return await until_disconnected(request, taking)
    except BaseException:  # this call cancelled just as the slot and lease came: they go back, not astray
        if taking.done() and not taking.cancelled() and taking.exception() is None:
            taking.result().release()
        raise


async def _take(context: ServerContext, model: str | None, deadline: Deadline) -> Admitted:
    await deadline.wait_for(context.admission.acquire())
    try:
        lease = await deadline.wait_for(context.models.acquire(model))
    except BaseException:  # refused, timed out, or cancelled by a disconnect: the slot goes back at once
        context.admission.release()
        raise

    def release() -> None:
        try:
            lease.release()
        finally:
            context.admission.release()
    return Admitted(lease.bundle, release)


async def gated(request: Request, model: str | None, work: Callable[[ModelBundle], Awaitable[T]]) -> T | None:
    """`work` on the model's bundle, through the gate; None when the client went away first."""
    deadline = Deadline.after(server_context(request).settings.request_timeout)
    admitted = await admit(request, model, deadline)
    if admitted is None:
        return None
    try:
        return await until_disconnected(request, deadline.wait_for(work(admitted.bundle)))
    finally:
        admitted.release()
