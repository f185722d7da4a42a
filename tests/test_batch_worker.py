"""The batch worker on a real SQLite store and real files. Its finalizer, with a disk slower than the lease, renews
its lease while it writes, so the batch ends once; one that lost its lease writes nothing final (issue 42: such a
batch stayed `finalizing`, was claimed and rewritten forever, and held up the worker). A cancel and the finalizer's
claim in one loop turn; a long chunk keeps its process's models announced.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

import pytest

from rostra.api.batches.objects import FINAL_STATUSES
from rostra.api.batches.service import BatchesService
from rostra.api.batches.worker import BatchSettings, BatchWorker, output_file_id
from rostra.errors import InvalidRequest
from rostra.store.batch_sqlite import SqliteBatchStore
from rostra.store.batch_objects import Batch, RequestCounts
from rostra.store.batch_store import BatchLine, WorkFilter
from rostra.store.blobs import DirectoryBlobs
from rostra.store.tenancy import EVERYONE

CHAT = "/v1/chat/completions"
LEASE = 0.3


class SlowDisk(DirectoryBlobs):
    """A disk that takes `pause` seconds per chunk written (a large output on a busy disk)."""

    pause = 3 * LEASE

    async def write(self, blob_id: str, chunks: AsyncIterator[bytes], max_bytes: int | None = None) -> int:
        async def slowly() -> AsyncIterator[bytes]:
            async for chunk in chunks:
                await asyncio.sleep(self.pause)
                yield chunk
        return await super().write(blob_id, slowly(), max_bytes)


async def answered_batch(store: SqliteBatchStore, batch_id: str, count: int) -> None:
    """A batch in progress whose lines are all answered (every chunk done): next, its finalization."""
    now = int(time.time())
    await store.create_batch(Batch(id=batch_id, endpoint=CHAT, status="validating", created_at=now,
                                   expires_at=now + 3600, input_file_id="file-in"), None)
    claimed = await store.claim_batch("validator", 5)
    assert claimed is not None
    assert await store.add_lines(batch_id, "validator", [BatchLine(n, f"c{n}", "{}") for n in range(count)], count)
    assert await store.update_batch(claimed[0].moved("in_progress", now), "validator")
    chunk = await store.claim_chunk("runner", 5, WorkFilter((CHAT,)))
    assert chunk is not None
    for line in chunk.lines:
        result = json.dumps({"custom_id": line.custom_id, "response": {"status_code": 200, "body": {"n": line.number}}})
        assert await store.record_line(batch_id, 0, "runner", line.number, result, False)
    await store.release_chunk(batch_id, 0, "runner")


def worker_on(store: SqliteBatchStore, blobs: DirectoryBlobs) -> BatchWorker:
    async def no_app(scope, receive, send) -> None:  # every line is answered already: none is run
        raise AssertionError("no line should run")
    return BatchWorker(store, blobs, no_app, BatchSettings(lease_seconds=LEASE, chunk_lines=100),
                       busy=lambda: False, work=lambda: WorkFilter((CHAT,)))


def test_a_finalizer_slower_than_its_lease_ends_the_batch_once(tmp_path):
    async def main():
        store, blobs = SqliteBatchStore(tmp_path / "batches.sqlite3"), SlowDisk(tmp_path / "files")
        await store.open()
        try:
            # ~30 KB of output, one chunk: 0.9 s of writing against a 0.3 s lease.
            await answered_batch(store, "batch_slow", 400)
            worker = worker_on(store, blobs)
            started = time.monotonic()
            assert await worker.step()
            assert time.monotonic() - started > LEASE * 2  # it did outlive its lease
            batch = await store.get_batch("batch_slow")
            assert batch.status == "completed", batch.status
            assert batch.request_counts == RequestCounts(total=400, completed=400, failed=0)
            assert batch.output_file_id == output_file_id("batch_slow", "o")
            written = b"".join([chunk async for chunk in blobs.read(batch.output_file_id)]).splitlines()
            assert [json.loads(line)["custom_id"] for line in written] == [f"c{n}" for n in range(400)]
            assert not await worker.step()  # nothing left: not claimed again
        finally:
            await store.close()
    asyncio.run(main())


def test_a_finalizer_that_lost_its_lease_stops_and_the_next_ends_the_batch(tmp_path):
    """Another process claimed the batch meanwhile (this one was stalled past its lease): this one stops at its next
    renewal, writes no final object, and the other's finalization is the one written."""
    async def main():
        store, blobs = SqliteBatchStore(tmp_path / "batches.sqlite3"), SlowDisk(tmp_path / "files")
        await store.open()
        try:
            await answered_batch(store, "batch_two", 400)
            stalled, other = worker_on(store, blobs), worker_on(store, DirectoryBlobs(tmp_path / "files"))
            first = asyncio.create_task(stalled.step())
            while (await store.get_batch("batch_two")).status != "finalizing":
                await asyncio.sleep(0.01)
            # The stalled finalizer's lease lapses (as if its process froze) and the other claims the batch.
            await store.renew_batch("batch_two", stalled.owner, -1.0)
            assert await other.step()
            assert (await store.get_batch("batch_two")).status == "completed"
            assert await first  # it stopped without writing (the batch is final: nothing is rewritten)
            batch = await store.get_batch("batch_two")
            assert batch.status == "completed" and batch.request_counts.completed == 400
        finally:
            await store.close()
    asyncio.run(main())


@pytest.mark.parametrize("cancel_first", [True, False])
def test_a_cancel_and_the_finalizers_claim_in_one_loop_turn(tmp_path, cancel_first):
    """Every line answered; a cancel and the worker's next step in one loop turn, in either order: the batch ends
    once, `cancelled` if the cancel was accepted (it was `cancelling` before the worker's move to finalizing, which
    then gives way), else `completed`, the cancel refused with the status it found; every line in its output."""
    async def main():
        store, blobs = SqliteBatchStore(tmp_path / "batches.sqlite3"), DirectoryBlobs(tmp_path / "files")
        await store.open()
        try:
            await answered_batch(store, "batch_race", 5)
            worker = worker_on(store, blobs)
            service = BatchesService(store, blobs, worker, max_file_bytes=1 << 20)
            cancel = service.cancel_batch("batch_race", EVERYONE)
            step = worker.step()
            results = await asyncio.gather(*((cancel, step) if cancel_first else (step, cancel)),
                                           return_exceptions=True)
            cancelled = results[0 if cancel_first else 1]
            while (await store.get_batch("batch_race")).status not in FINAL_STATUSES:
                assert await worker.step()
            batch = await store.get_batch("batch_race")
            if isinstance(cancelled, InvalidRequest):
                assert batch.status == "completed" and "is finalizing" in str(cancelled)
            else:
                assert not isinstance(cancelled, BaseException) and cancelled.status == "cancelling"
                assert batch.status == "cancelled"
            assert batch.request_counts == RequestCounts(total=5, completed=5, failed=0)
            written = b"".join([chunk async for chunk in blobs.read(batch.output_file_id)]).splitlines()
            assert len(written) == 5 and batch.error_file_id is None
            assert not await worker.step()
        finally:
            await store.close()
    asyncio.run(main())


def test_a_process_running_a_long_chunk_keeps_its_models_announced(tmp_path):
    """A chunk that runs longer than an announcement lasts: the process says again that it serves its model while
    the chunk runs, so a process of another model does not take the batch's next chunk as a model nobody serves
    (it would answer its lines model_not_found)."""
    async def main():
        store, blobs = SqliteBatchStore(tmp_path / "batches.sqlite3"), DirectoryBlobs(tmp_path / "files")
        await store.open()
        try:
            now = int(time.time())
            await store.create_batch(Batch(id="batch_long", endpoint=CHAT, status="validating", created_at=now,
                                           expires_at=now + 3600, input_file_id="file-in"), None)
            claimed = await store.claim_batch("validator", 5)
            assert claimed is not None
            assert await store.add_lines("batch_long", "validator", [BatchLine(n, f"c{n}", "{}") for n in range(2)], 1)
            assert await store.update_batch(claimed[0].moved("in_progress", now, model="alpha"), "validator")

            async def slow_app(scope, receive, send) -> None:  # a line that generates for 1.5 s
                await asyncio.sleep(1.5)
                await send({"type": "http.response.start", "status": 200, "headers": []})
                await send({"type": "http.response.body", "body": b"{}"})

            worker = BatchWorker(store, blobs, slow_app, BatchSettings(lease_seconds=0.6, announce_seconds=0.5,
                                                                       chunk_lines=1),
                                 busy=lambda: False, work=lambda: WorkFilter((CHAT,), ("alpha",)))
            running = asyncio.create_task(worker.step())  # announces, then runs chunk 0 for 1.5 s
            await asyncio.sleep(1.0)  # past its first announcement's 0.5 s
            other = WorkFilter((CHAT,), ("beta",))
            await store.announce("other", other, 30)
            assert await store.claim_chunk("other", 5, other) is None  # alpha is still served: chunk 1 is not its
            assert await running
        finally:
            await store.close()
    asyncio.run(main())
