"""Dynamic batching for embedding engines that run one forward pass at a time (transformers).

Concurrent requests' inputs go into one queue; a worker thread takes what is waiting, sorts it by length
(so rows of one batch are alike and padding stays small), splits it into batches under a size and a
padded-token budget, runs each, and hands every request its vectors once all of its inputs are done. Items
that arrive while a batch runs simply wait for the next, so batches grow with the load by themselves; the
short wait (`wait`) is only taken while requests come concurrently (the last batch served more than one),
so a lone client never pays it. Tokenization happens before (in the engine's threads) and pooling in the
`run` function, in the worker thread: neither on the event loop.

The queue is bounded (`max_pending` rows waiting): a request that would pass it is refused at once with a 429
and Retry-After rather than queued without end; one alone is always taken, whatever its size (the API bounds
a request's inputs). A request cancelled while it waits (its client gone, its deadline) takes its rows out of
the queue, and rows of it already taken into the worker's round are skipped: no one's work is done for a
request no one will read.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Callable

from rostra.errors import TooManyRequests

RunBatch = Callable[[list[list[int]]], list[list[float]]]  # token-id rows -> one vector per row, blocking


@dataclass
class _Job:
    """One request's inputs; resolved on its event loop when the last of them is embedded."""

    inputs: list[list[int]]
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop
    results: list[list[float] | None] = field(default_factory=list)
    remaining: int = 0
    cancelled: bool = False  # its request was cancelled: its rows are not embedded

    def deliver(self, index: int, vector: list[float]) -> None:
        self.results[index] = vector
        self.remaining -= 1
        if self.remaining == 0:
            self.loop.call_soon_threadsafe(_resolve, self.future, self.results)

    def fail(self, error: BaseException) -> None:
        if self.remaining > 0:
            self.remaining = 0
            self.loop.call_soon_threadsafe(_reject, self.future, error)


def _resolve(future: asyncio.Future, value: object) -> None:
    if not future.done():
        future.set_result(value)


def _reject(future: asyncio.Future, error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)


MAX_PENDING_ROWS = 16_384  # eight requests of the API's 2,048 inputs


class EmbeddingBatcher:
    def __init__(self, run: RunBatch, max_batch_size: int = 64, max_batch_tokens: int = 8192,
                 wait: float = 0.002, name: str = "rostra-embed", prepare: Callable[[], None] | None = None,
                 max_pending: int = MAX_PENDING_ROWS):
        self.run = run
        self.prepare = prepare  # run first in the worker thread (per-thread library settings)
        self.max_batch_size = max_batch_size
        self.max_batch_tokens = max_batch_tokens  # rows x the longest row, padding included
        self.wait = wait
        self.max_pending = max_pending
        self._pending: list[tuple[_Job, int]] = []
        self._ready = threading.Condition()
        self._stopped = False
        self._concurrent = False  # the last round served more than one request
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._ready:
            self._stopped = True
            self._ready.notify()
        self._thread.join()

    def waiting_requests(self) -> int:
        """The requests with inputs in the queue (/metrics; 0 once idle, whatever was cancelled)."""
        with self._ready:
            return len({id(job) for job, _ in self._pending})

    async def embed(self, inputs: list[list[int]]) -> list[list[float]]:
        loop = asyncio.get_running_loop()
        job = _Job(inputs, loop.create_future(), loop, [None] * len(inputs), len(inputs))
        with self._ready:
            if self._stopped:
                raise RuntimeError("the embedding engine is stopped")
            if self._pending and len(self._pending) + len(inputs) > self.max_pending:
                raise TooManyRequests(f"the embedding queue is full ({len(self._pending)} inputs waiting); "
                                      "retry shortly")
            self._pending.extend((job, index) for index in range(len(inputs)))
            self._ready.notify()
        try:
            return await job.future  # type: ignore[no-any-return]
        except asyncio.CancelledError:
            with self._ready:
                job.cancelled = True
                self._pending = [item for item in self._pending if item[0] is not job]
            raise

    def _work(self) -> None:
        if self.prepare is not None:
            self.prepare()
        while True:
            with self._ready:
                while not self._pending and not self._stopped:
                    self._ready.wait()
                if self._stopped:
                    for job, _ in self._pending:
                        job.fail(RuntimeError("the embedding engine stopped"))
                    return
                if self._concurrent and len(self._pending) < self.max_batch_size:
                    self._ready.wait(self.wait)  # others are likely on their way: let them join
                taken, self._pending = self._pending, []
            self._concurrent = len({id(job) for job, _ in taken}) > 1
            for batch in self.batches(taken):
                with self._ready:  # (a request may have been cancelled since the round was taken)
                    batch = [item for item in batch if not item[0].cancelled]
                if not batch:
                    continue
                try:
                    vectors = self.run([job.inputs[index] for job, index in batch])
                except BaseException as exc:  # the requests learn of it; the worker serves the next ones
                    for job, _ in batch:
                        job.fail(exc)
                    continue
                for (job, index), vector in zip(batch, vectors):
                    if job.remaining:
                        job.deliver(index, vector)

    def batches(self, items: list[tuple[_Job, int]]) -> list[list[tuple[_Job, int]]]:
        """Items by length, cut into batches of at most max_batch_size rows and max_batch_tokens padded tokens."""
        ordered = sorted(items, key=lambda item: len(item[0].inputs[item[1]]))
        batches: list[list[tuple[_Job, int]]] = []
        current: list[tuple[_Job, int]] = []
        for item in ordered:
            length = len(item[0].inputs[item[1]])  # the longest so far, since sorted
            if current and (len(current) >= self.max_batch_size or (len(current) + 1) * length > self.max_batch_tokens):
                batches.append(current)
                current = []
            current.append(item)
        if current:
            batches.append(current)
        return batches
