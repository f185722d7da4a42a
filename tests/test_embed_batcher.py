"""The embedding batcher (rostra/engines/embed_batcher.py): concurrent requests' inputs share forward passes,
grouped by length under the size and padded-token budgets, and each request gets its own vectors back."""

from __future__ import annotations

import asyncio
import threading

import pytest

from rostra.engines.embed_batcher import EmbeddingBatcher


class Recorder:
    """A stand-in model: a row's vector is [its length, its first id]; the batches it saw are kept."""

    def __init__(self, delay: float = 0.0, fail_on: int | None = None):
        self.batches: list[list[list[int]]] = []
        self.delay = delay
        self.fail_on = fail_on
        self.threads: set[str] = set()

    def __call__(self, rows: list[list[int]]) -> list[list[float]]:
        self.batches.append(rows)
        self.threads.add(threading.current_thread().name)
        if self.delay:
            threading.Event().wait(self.delay)
        if self.fail_on is not None and any(row[0] == self.fail_on for row in rows):
            raise RuntimeError("the model failed")
        return [[float(len(row)), float(row[0])] for row in rows]


def run(batcher: EmbeddingBatcher, requests: list[list[list[int]]]) -> list:
    async def main():
        batcher.start()
        try:
            return await asyncio.gather(*(batcher.embed(inputs) for inputs in requests), return_exceptions=True)
        finally:
            await asyncio.to_thread(batcher.stop)

    return asyncio.run(main())


def test_each_request_gets_its_own_vectors_in_order():
    model = Recorder(delay=0.01)
    requests = [[[i, 1] * (i % 5 + 1), [100 + i]] for i in range(20)]
    answers = run(EmbeddingBatcher(model), requests)
    for inputs, vectors in zip(requests, answers):
        assert vectors == [[float(len(row)), float(row[0])] for row in inputs]
    assert model.threads == {"rostra-embed"}  # the model never runs on the event loop's thread
    assert len(model.batches) < len(requests)  # concurrent requests shared forward passes


def test_batches_group_similar_lengths_under_the_budgets():
    batcher = EmbeddingBatcher(Recorder(), max_batch_size=4, max_batch_tokens=40)
    rows = [[7] * length for length in (30, 2, 9, 3, 10, 2, 8, 3, 1)]

    class Job:
        inputs = rows

    batches = batcher.batches([(Job, index) for index in range(len(rows))])  # type: ignore[list-item]
    lengths = [[len(rows[index]) for _, index in batch] for batch in batches]
    assert lengths == [[1, 2, 2, 3], [3, 8, 9, 10], [30]]
    assert all(len(batch) * max(batch) <= 40 or len(batch) == 1 for batch in lengths)


def test_a_failed_batch_fails_its_requests_only_and_the_worker_goes_on():
    model = Recorder(fail_on=13)
    batcher = EmbeddingBatcher(model, max_batch_size=1)
    answers = run(batcher, [[[1]], [[13]], [[2, 2]]])
    assert answers[0] == [[1.0, 1.0]] and answers[2] == [[2.0, 2.0]]
    assert isinstance(answers[1], RuntimeError)


def test_a_stopped_batcher_refuses_work():
    batcher = EmbeddingBatcher(Recorder())
    batcher.start()
    batcher.stop()
    with pytest.raises(RuntimeError, match="stopped"):
        asyncio.run(batcher.embed([[1]]))


class Gated(Recorder):
    """A model whose first batch waits until the test opens the gate: the queue fills meanwhile."""

    def __init__(self):
        super().__init__()
        self.gate = threading.Event()
        self.entered = threading.Event()

    def __call__(self, rows):
        self.entered.set()
        self.gate.wait(10)
        return super().__call__(rows)


def test_the_rows_of_a_cancelled_request_are_never_embedded():
    """Clients that dropped thousands of texts left minutes of work behind (issue 33): their rows leave the
    queue, and a round already taken skips them."""
    async def main():
        model = Gated()
        batcher = EmbeddingBatcher(model, max_batch_size=4)
        batcher.start()
        try:
            first = asyncio.ensure_future(batcher.embed([[1]]))
            await asyncio.to_thread(model.entered.wait, 10)  # the worker runs the first batch
            dropped = asyncio.ensure_future(batcher.embed([[7, i] for i in range(40)]))
            kept = asyncio.ensure_future(batcher.embed([[8]]))
            await asyncio.sleep(0.01)
            dropped.cancel()
            await asyncio.gather(dropped, return_exceptions=True)
            model.gate.set()
            assert await first == [[1.0, 1.0]] and await kept == [[1.0, 8.0]]
        finally:
            await asyncio.to_thread(batcher.stop)
        return [row for batch in model.batches for row in batch]

    embedded = asyncio.run(main())
    assert [7, 0] not in embedded and all(row[0] != 7 for row in embedded)


def test_beyond_the_queue_bound_a_request_is_refused_with_retry_after():
    from rostra.errors import TooManyRequests

    async def main():
        model = Gated()
        batcher = EmbeddingBatcher(model, max_pending=100)
        batcher.start()
        try:
            first = asyncio.ensure_future(batcher.embed([[1]]))
            await asyncio.to_thread(model.entered.wait, 10)
            queued = asyncio.ensure_future(batcher.embed([[2]] * 80))
            await asyncio.sleep(0)
            with pytest.raises(TooManyRequests) as refused:
                await batcher.embed([[3]] * 40)  # 80 + 40 > 100
            model.gate.set()
            await asyncio.gather(first, queued)
            assert len(await batcher.embed([[4]] * 40)) == 40  # room again
            return refused.value
        finally:
            model.gate.set()
            await asyncio.to_thread(batcher.stop)

    error = asyncio.run(main())
    assert error.status_code == 429 and "Retry-After" in error.headers
