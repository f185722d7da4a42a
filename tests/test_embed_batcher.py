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
