"""Admission control: at most `max_running` generation requests at once and `max_waiting` in line;
beyond that a 429 with Retry-After, at once, rather than an unbounded queue."""

from __future__ import annotations

import asyncio

from rostra.errors import TooManyRequests


class Admission:
    def __init__(self, max_running: int | None, max_waiting: int):
        self.max_running = max_running
        self.max_waiting = max_waiting
        self.running = 0
        self.waiting = 0
        self._slots = asyncio.Semaphore(max_running) if max_running else None

    def has_free_slot(self) -> bool:
        """A slot is free and no one waits for one: acquire() takes it at once, without suspending its caller."""
        return self._slots is None or not self._slots.locked()

    async def acquire(self, online: bool = True) -> None:
        """A slot, waiting in line for one. A batch line (`online=False`) is neither refused by the queue bound nor
        counted in `waiting` (so never takes an online request's place in line): --batch-concurrency bounds them."""
        if self._slots is not None:
            if online and self._slots.locked() and self.waiting >= self.max_waiting:
                raise TooManyRequests(f"the server is at capacity ({self.running} running, {self.waiting} waiting); "
                                      "retry shortly")
            self.waiting += online
            try:
                await self._slots.acquire()
            finally:
                self.waiting -= online
        self.running += 1

    def release(self) -> None:
        self.running -= 1
        if self._slots is not None:
            self._slots.release()
