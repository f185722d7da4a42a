"""A serving process's background loop over shared work (the batch worker, the vector store indexer): it takes one
piece of work at a time (`step`), looks again at once while there is more, and sleeps for `poll_interval` (or until
`wake`: new work here) when there is none. Other processes on the same store run the same loop; the store's
leases decide who does what, so this loop only has to keep going: a step that fails is logged and retried."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from abc import ABC, abstractmethod


class PollingWorker(ABC):
    def __init__(self, name: str, log: logging.Logger, poll_interval: float):
        self.name, self.log, self.poll_interval = name, log, poll_interval
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    @abstractmethod
    async def step(self) -> bool:
        """One piece of work, if there is one; False when idle."""

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name=f"rostra-{self.name}")

    def wake(self) -> None:
        """New work (a batch created, a file added, a cancel): look now rather than at the next poll."""
        self._wake.set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _loop(self) -> None:
        while True:
            try:
                worked = await self.step()
            except asyncio.CancelledError:
                raise
            except Exception:
                self.log.exception("%s: a step failed; retrying", self.name)
                worked = False
            if not worked:
                self._wake.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.poll_interval)
