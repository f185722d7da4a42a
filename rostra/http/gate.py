"""The one gate every piece of engine work passes: generations (generation_endpoint.py) and the rest (embedding,
counting, tokenizing: `gated`).

In order: an admission slot (--max-concurrency / --max-queue: a 429 with Retry-After beyond the queue), then a
lease on the model (loading it if need be), then the work; the request's deadline (--request-timeout) bounds
all three, the admission wait included, and a client that goes away cancels whichever is under way (a client
gone while it waits for admission is dropped at once, holding nothing). The slot and the lease are given back
when the work ends, however it ends, by whatever outlives the call: both belong to the request's scope (scope.py),
which the route or whoever outlives it closes once. Admission comes before the lease so that --max-concurrency also
bounds the model loads that requests cause.

A batch line (api/batches/dispatch.py) comes through the same gate but waits behind online traffic by design: its
wait for a slot is bounded by its batch's completion window, not by --request-timeout (nor refused by --max-queue:
--batch-concurrency bounds those waits), and its deadline for the rest (the model's lease, the generation) starts
when it is admitted, as an online request's would had it come just then.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Awaitable, Callable, TypeVar

from starlette.requests import HTTPConnection

from rostra.http.admission import Admission
from rostra.http.context import server_context
from rostra.http.scope import RequestScope
from rostra.http.sse import until_disconnected
from rostra.engines.thread_budget import batch_work
from rostra.images.budget import RequestImageBudgets
from rostra.models.bundle import ModelBundle
from rostra.models.manager import Lease
from rostra.serving.deadline import Deadline

T = TypeVar("T")


@dataclass(frozen=True)
class BatchLine:
    """In a batch line's request state (`batch_line`): when its batch's completion window ends (epoch seconds;
    None: never, offline)."""

    window_ends: float | None

    def admission_deadline(self) -> Deadline:
        if self.window_ends is None:
            return Deadline.after(None)
        left = self.window_ends - time.time()
        return Deadline(left, asyncio.get_running_loop().time() + left,
                        "the batch's completion window ended before the line was admitted")


async def admit(request: HTTPConnection, model: str | None, priority: int = 0) -> RequestScope | None:
    """The request's scope (scope.py), holding an admission slot, then a lease on `model`, both taken within the
    request's deadline (--request-timeout; a batch line's: see BatchLine); None, holding nothing, when the client
    went away first. Beyond the queue a 429, past the deadline a 504 (neither holds anything either). `priority`:
    its place in line (lower first, admission.py)."""
    context = server_context(request)
    admission = context.admission
    line: BatchLine | None = getattr(request.state, "batch_line", None)
    if line is not None:  # its engine work yields the cores to online requests' (engines/thread_budget.py)
        batch_work.set(True)
    deadline = Deadline.after(context.settings.request_timeout)
    if admission.has_free_slot():
        # Taken here, at once, in the route's own task: a request that need not wait never yields its place to one
        # that comes after it (batch lines stay behind online requests by watching the queue, api/batches/worker.py).
        await admission.acquire()
    elif line is not None:
        await line.admission_deadline().wait_for(admission.acquire(online=False))
        deadline = Deadline.after(context.settings.request_timeout)  # from its admission on
    elif await _watched(request, _slot(admission, deadline, priority), lambda _: admission.release()) is None:
        return None
    try:
        lease = await _watched(request, deadline.wait_for(context.models.acquire(model)), Lease.release)
    except BaseException:  # refused, timed out, or cancelled: the slot goes back at once
        admission.release()
        raise
    if lease is None:
        admission.release()
        return None
    images = RequestImageBudgets()
    images.activate()
    scope = RequestScope(request, lease.bundle, deadline, images)
    scope.hold(admission.release)  # given back last
    scope.hold(lease.release)
    return scope


async def _slot(admission: Admission, deadline: Deadline, priority: int) -> bool:
    await deadline.wait_for(admission.acquire(priority=priority))
    return True


async def _watched(request: HTTPConnection, work: Awaitable[T], give_back: Callable[[T], None]) -> T | None:
    """`work`'s result unless the client goes away first (None); what it got is given back if this call is cancelled
    just as it came, so that nothing goes astray."""
    task = asyncio.ensure_future(work)
    try:
        return await until_disconnected(request, task)
    except BaseException:
        if task.done() and not task.cancelled() and task.exception() is None:
            give_back(task.result())
        raise


async def gated(request: HTTPConnection, model: str | None, work: Callable[[ModelBundle], Awaitable[T]]) -> T | None:
    """`work` on the model's bundle, in a scope the route owns from start to end (counting, tokenizing,
    embedding); None when the client went away first."""
    scope = await admit(request, model)
    if scope is None:
        return None
    async with scope:
        return await scope.run(work(scope.bundle))
