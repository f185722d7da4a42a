"""A request's deadline (`--request-timeout`), applied between the items of a stream.

The deadline is an absolute loop time fixed when the request is admitted, so a stream that is followed
by other work (storing, a background run) is held to the same end.
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from dataclasses import dataclass
from typing import AsyncGenerator, Awaitable, TypeVar

from rostra.errors import RequestTimeout

T = TypeVar("T")


@dataclass(frozen=True)
class Deadline:
    seconds: float | None  # None: no limit
    at: float | None
    reason: str | None = None  # what the 504 says (default: the request took longer than `seconds`)

    @classmethod
    def after(cls, seconds: float | None) -> "Deadline":
        return cls(seconds, asyncio.get_running_loop().time() + seconds if seconds else None)

    def error(self) -> RequestTimeout:
        return RequestTimeout(self.reason or f"the request took longer than {self.seconds} s")

    async def wait_for(self, work: Awaitable[T]) -> T:
        """`work`'s result if it comes before the deadline; past it, RequestTimeout (and `work` is cancelled).
        Bounds the waits before a request runs (admission, a model's load) as well as its work."""
        if self.at is None:
            return await work
        scope = asyncio.timeout_at(self.at)
        try:
            async with scope:
                return await work
        except TimeoutError:
            if scope.expired():
                raise self.error() from None
            raise

    def bound(self, stream: AsyncGenerator[T, None]) -> AsyncGenerator[T, None]:
        """`stream`'s items until the deadline; past it, RequestTimeout (and `stream` is closed).
        Without a deadline, `stream` itself: no hop per item."""
        return stream if self.at is None else self._bounded(stream)

    async def _bounded(self, stream: AsyncGenerator[T, None]) -> AsyncGenerator[T, None]:
        async with aclosing(stream):
            while True:
                try:
                    async with asyncio.timeout_at(self.at):
                        item = await anext(stream)
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    raise self.error() from None
                yield item


NO_DEADLINE = Deadline(None, None)
