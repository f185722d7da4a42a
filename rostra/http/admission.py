"""Admission control: at most `max_running` generation requests at once and `max_waiting` in line;
beyond that a 429 with Retry-After, at once, rather than an unbounded queue.

The line is ordered by the request's `priority` (vLLM's field: lower first, 0 by default), then by arrival, so a
request that came first among equals goes first. Batch lines wait behind every online request."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import sys

from rostra.errors import TooManyRequests

# A batch line's place in line: after every online request, whatever its priority.
BATCH_PRIORITY = sys.maxsize


class Admission:
    def __init__(self, max_running: int | None, max_waiting: int):
        self.max_running = max_running or None
        self.max_waiting = max_waiting
        self.running = 0
        self.waiting = 0  # online requests in line (batch lines are not counted)
        self._line: list[tuple[int, int, asyncio.Future[None]]] = []  # a heap: (priority, arrival, its grant)
        self._arrivals = itertools.count()

    def has_free_slot(self) -> bool:
        """A slot is free and no one waits for one: acquire() takes it at once, without suspending its caller."""
        return self.max_running is None or (self.running < self.max_running and not self._line)

    async def acquire(self, online: bool = True, priority: int = 0) -> None:
        """A slot, waiting in line for one. A batch line (`online=False`) is neither refused by the queue bound nor
        counted in `waiting`, and waits behind every online request: --batch-concurrency bounds them."""
        if self.has_free_slot():
            self.running += 1
            return
        if online and self.waiting >= self.max_waiting:
            raise TooManyRequests(f"the server is at capacity ({self.running} running, {self.waiting} waiting); "
                                  "retry shortly")
        entry = (priority if online else BATCH_PRIORITY, next(self._arrivals),
                 asyncio.get_running_loop().create_future())
        heapq.heappush(self._line, entry)
        self.waiting += online
        try:
            await entry[2]  # granted by release(), which counted it running
        except BaseException:
            if entry[2].done() and not entry[2].cancelled():
                self.release()  # granted just as it was cancelled: the slot goes on to the next in line
            elif entry in self._line:  # (release() may have popped it already, passing over its cancelled grant)
                entry[2].cancel()
                self._line.remove(entry)
                heapq.heapify(self._line)
            raise
        finally:
            self.waiting -= online

    def release(self) -> None:
        self.running -= 1
        while self._line and self.max_running is not None and self.running < self.max_running:
            _, _, grant = heapq.heappop(self._line)
            if not grant.done():
                self.running += 1
                grant.set_result(None)
