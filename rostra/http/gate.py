"""The one gate every piece of engine work passes that is not a generation (embedding, counting, tokenizing);
generations pass the same steps in generation_endpoint.py.

In order: an admission slot (--max-concurrency / --max-queue: a 429 with Retry-After beyond the queue), then a
lease on the model (loading it if need be), then the work; the request's deadline (--request-timeout) bounds
all three, the admission wait included, and a client that goes away cancels whichever is under way. The slot
and the lease are given back when the work ends, however it ends. Admission comes before the lease so that
--max-concurrency also bounds the model loads that requests cause.
"""

from __future__ import annotations

from typing import Awaitable, Callable, TypeVar

from starlette.requests import Request

from rostra.http.context import server_context
from rostra.http.sse import until_disconnected
from rostra.models.bundle import ModelBundle
from rostra.serving.deadline import Deadline

T = TypeVar("T")


async def gated(request: Request, model: str | None, work: Callable[[ModelBundle], Awaitable[T]]) -> T | None:
    """`work` on the model's bundle, through the gate; None when the client went away first."""
    context = server_context(request)
    deadline = Deadline.after(context.settings.request_timeout)

    async def admitted() -> T:
        await deadline.wait_for(context.admission.acquire())
        try:
            lease = await deadline.wait_for(context.models.acquire(model))
            try:
                return await deadline.wait_for(work(lease.bundle))
            finally:
                lease.release()
        finally:
            context.admission.release()

    return await until_disconnected(request, admitted())
