"""One scope per request: everything a request holds, owned in one place and given back exactly once.

The gate (gate.py) opens a request's scope: its admission slot and its lease on the model are the first things
the scope holds, then what preparing the request opens (a relayed upstream's connection: `hold(job.close)`); the
scope carries the request's deadline and its image budget. `run` is how work happens inside it: bounded by the
deadline and cancelled when the client goes away, `prepare` and the generation alike.

Whoever outlives the route takes the scope (`hand_off`) and closes it when it is done: the streamed response when
its stream is over (whether it ever started or not), a background run when its task has ended (even one cancelled
before it began). Otherwise the route's `async with` closes it. `close` runs once whatever calls it, in the order
opposite to taking: what preparing opened, then the lease, then the admission slot.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Awaitable, Callable, TypeVar

from starlette.requests import HTTPConnection

from rostra.http.sse import until_disconnected
from rostra.images.budget import RequestImageBudgets
from rostra.models.bundle import ModelBundle
from rostra.serving.deadline import Deadline

T = TypeVar("T")
Release = Callable[[], Awaitable[None] | None]
log = logging.getLogger("rostra.server")

# Closes still running after their scope's owner let go of it (a sync `close` that had async releases to run).
_closing: set[asyncio.Task[None]] = set()


class RequestScope:
    """A request through the gate: its model's bundle, its deadline, its image budget and what it holds."""

    def __init__(self, connection: HTTPConnection, bundle: ModelBundle, deadline: Deadline,
                 images: RequestImageBudgets):
        self.connection = connection
        self.bundle = bundle
        self.deadline = deadline
        self.images = images
        self._held: list[Release] = []
        self._closed = False
        self._handed_off = False
        self._finishing: asyncio.Task[None] | None = None  # a `close`'s asynchronous releases, still running

    @property
    def closed(self) -> bool:
        return self._closed

    def hold(self, release: Release) -> None:
        """Something the request holds from now on, given back when the scope closes (at once if it is closed)."""
        if self._closed:  # taken after the end (a late prepare): nothing may stay open
            result = self._release(release)
            if result is not None:
                task = asyncio.get_running_loop().create_task(self._drain(result))
                _closing.add(task)
                task.add_done_callback(_closing.discard)
            return
        self._held.append(release)

    async def run(self, work: Awaitable[T]) -> T | None:
        """`work` inside the scope: past the deadline a 504 (RequestTimeout), cancelled and None when the client
        went away first."""
        return await until_disconnected(self.connection, self.deadline.wait_for(work))

    def hand_off(self) -> RequestScope:
        """The scope, for whoever outlives the route (a stream, a background run): from now on it closes it."""
        self._handed_off = True
        return self

    async def aclose(self) -> None:
        """Give back everything, once, the last taken first; a release that fails is logged, the others still
        run. While a `close` from a callback is still running, this waits for it."""
        if self._finishing is not None:
            await asyncio.shield(self._finishing)
            return
        if self._closed:
            return
        self._closed = True
        await self._drain()

    def close(self) -> None:
        """`aclose` from a callback (a response's end, a task's done callback): the synchronous releases (the
        lease, the slot) at once, in order; from the first asynchronous one on (a job's close), in a task."""
        if self._closed:
            return
        self._closed = True
        while self._held:
            result = self._release(self._held.pop())
            if result is not None:
                self._finishing = asyncio.get_running_loop().create_task(self._drain(result))
                _closing.add(self._finishing)
                self._finishing.add_done_callback(_closing.discard)
                return

    async def _drain(self, pending: Awaitable[None] | None = None) -> None:
        while pending is not None or self._held:
            if pending is None:
                pending = self._release(self._held.pop())
            if pending is not None:
                try:
                    await pending
                except Exception:
                    log.exception("a request's release failed")
                pending = None

    @staticmethod
    def _release(release: Release) -> Awaitable[None] | None:
        """Runs `release`; what is left to await of it, if it is asynchronous."""
        try:
            result = release()
        except Exception:
            log.exception("a request's release failed")
            return None
        return result if inspect.isawaitable(result) else None

    async def __aenter__(self) -> RequestScope:
        return self

    async def __aexit__(self, *exc: object) -> None:
        """The route's end: closed here unless someone who outlives the route took it."""
        if not self._handed_off:
            await self.aclose()

