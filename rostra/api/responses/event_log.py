"""A stored response's stream events on their way to the store, written in batches.

A stream makes an event per token; one store write per event costs a transaction (and on SQLite
a hop to the store's thread) per token, and made the stream wait for it. Here an event is kept in
memory at once and the stream goes on; a writer task stores what has piled up every `interval`
seconds, in one transaction per batch (`ResponseStore.append_events`). What the store holds is
therefore always a gapless prefix of the stream, batch after batch in order: a follower on any
replica, reading by sequence number, never misses an event nor sees one out of order; it only
sees them up to `interval` later. A crash loses at most the events of the last `interval`, and
recovery (`mark_interrupted`, expired leases) appends `response.failed` right after the last one
stored. `flush()` writes the rest at once: the service calls it before a terminal event goes out
and before the response's final state is written, so a finished response's log is complete.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from rostra.store.base import ResponseStore, StoreError

# Seconds between batch writes: followers on another replica see events this much later, and a
# crash loses at most this much of a stream; at ~60 tokens/s a batch holds a few tokens' events.
DEFAULT_INTERVAL = 0.05


class EventLog:
    def __init__(self, store: ResponseStore, response_id: str, interval: float = DEFAULT_INTERVAL):
        self.store, self.response_id, self.interval = store, response_id, interval
        self._pending: list[dict[str, Any]] = []
        self._writer: asyncio.Task[None] | None = None
        self._hurry = asyncio.Event()  # set by flush(): write what is pending without waiting
        self._failure: BaseException | None = None

    def append(self, event: dict[str, Any]) -> None:
        """Queue an event for the store. Raises the error of an earlier write that failed: the events
        after a lost batch must not be stored (the log would have a gap)."""
        if self._failure is not None:
            raise self._failure
        self._pending.append(event)
        if self._writer is None:
            self._writer = asyncio.create_task(self._write())

    async def flush(self) -> None:
        """Store every queued event now; raises if a write failed. The writes go on if the caller is
        cancelled meanwhile (shielded), so a cancelled run still leaves a complete log behind it."""
        while self._writer is not None:
            self._hurry.set()
            await asyncio.shield(self._writer)
        if self._failure is not None:
            raise self._failure

    async def _write(self) -> None:
        try:
            while self._pending:
                if not self._hurry.is_set():  # let a batch gather
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(self.interval):
                            await self._hurry.wait()
                batch, self._pending = self._pending, []
                await self.store.append_events(self.response_id, batch)
        except asyncio.CancelledError:  # the server is stopping: what is pending is lost, as in a crash
            self._failure = StoreError("writing the event log was cancelled")
            self._pending = []
        except Exception as exc:  # kept for append() and flush() to raise: the stream fails
            self._failure = exc
            self._pending = []
        finally:
            self._writer = None
            self._hurry.clear()  # events queued after this flush wait for an interval again
