"""The Files and Batch APIs' store and file contents, one suite run on both backends (SQLite with a directory of
files, and a real PostgreSQL server holding the contents too): files and their expiry, contents streamed in and out,
chunk leases with owner-checked writes, a line written once, takeover after a lease expires, result pages."""

from __future__ import annotations

import asyncio
import json
import time
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rostra.api.batches.routes import present
from rostra.errors import PayloadTooLarge
from rostra.store.base import StoreError
from rostra.store.batch_postgres import PostgresBatchStore, PostgresBlobs
from rostra.store.batch_sqlite import SqliteBatchStore
from rostra.store.batch_objects import Batch, FileObject
from rostra.store.batch_store import BatchLine, BatchStore, WorkFilter
from rostra.store.blobs import Blobs, DirectoryBlobs
from rostra.store.tenancy import Tenant

CHAT = "/v1/chat/completions"
WORK = WorkFilter((CHAT,))


class Backend:
    def __init__(self, kind: str, location: str | Path):
        self.kind, self.location = kind, location

    def new(self) -> tuple[BatchStore, Blobs]:
        """Another store on the same data: a restart, or another replica."""
        if self.kind == "sqlite":
            root = Path(self.location)
            return SqliteBatchStore(root / "batches.sqlite3"), DirectoryBlobs(root / "files")
        store = PostgresBatchStore(str(self.location))
        return store, PostgresBlobs(store)


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request, tmp_path) -> Backend:
    if request.param == "sqlite":
        return Backend("sqlite", tmp_path)
    return Backend("postgres", request.getfixturevalue("postgres").new_database())


def run(backend: Backend, body, replicas: int = 1):
    """`await body(*stores)` with `replicas` stores open on the backend (each a (store, blobs) pair)."""
    async def main():
        opened = [backend.new() for _ in range(replicas)]
        for store, _ in opened:
            await store.open()
        try:
            return await body(*opened)
        finally:
            for store, _ in opened:
                await store.close()
    return asyncio.run(main())


def file(file_id: str, created_at: int = 1700000000, expires_at: int | None = None,
         purpose: str = "batch") -> FileObject:
    return FileObject(id=file_id, bytes=1, created_at=created_at, filename="f.jsonl", purpose=purpose,
                      expires_at=expires_at)


def batch(batch_id: str, expires_in: float = 3600, created_at: int | None = None) -> Batch:
    return Batch(id=batch_id, endpoint=CHAT, status="validating", input_file_id="file-in",
                 created_at=int(time.time()) if created_at is None else created_at,
                 expires_at=int(time.time() + expires_in))


def moved(batch: Batch, status: str, **changes) -> Batch:
    """The batch in `status`, as the worker moves it (the store checks nothing but the move)."""
    return batch.model_copy(update={**changes, "status": status})


async def chunks_of(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def read_all(blobs: Blobs, blob_id: str) -> bytes:
    return b"".join([chunk async for chunk in blobs.read(blob_id)])


async def started(store: BatchStore, batch_id: str, count: int, chunk_lines: int, expires_in: float = 3600) -> None:
    """A batch of `count` lines validated and in progress (line 1 refused at validation)."""
    await store.create_batch(batch(batch_id, expires_in), None)
    claimed = await store.claim_batch("validator", 5)
    assert claimed is not None and claimed[0].id == batch_id
    lines = [BatchLine(n, f"c{n}", None, '{"error": true}', failed=True) if n == 1 else
             BatchLine(n, f"c{n}", f'{{"n": {n}}}') for n in range(count)]
    assert await store.add_lines(batch_id, "validator", lines, chunk_lines)
    assert await store.update_batch(moved(claimed[0], "in_progress"), "validator")


def test_files_round_trip_page_and_tenants(backend):
    async def body(pair):
        store, _ = pair
        for n in range(5):
            await store.create_file(file(f"file-{n}", created_at=1700000000 + n // 2,
                                         purpose="batch" if n % 2 == 0 else "user_data"), "key-a" if n < 4 else None)
        assert (await store.get_file("file-0")).purpose == "batch"
        assert await store.get_file("file-0", Tenant("key-b", sees_all=False)) is None
        assert await store.get_file("file-4", Tenant("key-b", sees_all=False)) is not None  # no tenant: shared
        page, more = await store.list_files(after=None, limit=2, order="asc", purpose=None)
        assert [f.id for f in page] == ["file-0", "file-1"] and more
        page, more = await store.list_files(after="file-1", limit=10, order="asc", purpose=None)
        assert [f.id for f in page] == ["file-2", "file-3", "file-4"] and not more
        page, _ = await store.list_files(after=None, limit=10, order="desc", purpose="batch")
        assert [f.id for f in page] == ["file-4", "file-2", "file-0"]
        with pytest.raises(StoreError, match="no file 'file-nope' to list after"):
            await store.list_files(after="file-nope", limit=10, order="asc", purpose=None)
        assert not await store.delete_file("file-0", Tenant("key-b", sees_all=False))
        assert await store.delete_file("file-0", Tenant("key-a", sees_all=False))
        assert await store.get_file("file-0") is None
    run(backend, body)


def test_expired_files_are_gone_at_once_and_deleted_by_the_sweep(backend):
    async def body(pair):
        store, _ = pair
        now = int(time.time())
        await store.create_file(file("file-soon", expires_at=now + 1), None)
        await store.create_file(file("file-later", expires_at=now + 3600), None)
        await store.create_file(file("file-never"), None)
        assert await store.get_file("file-soon") is not None
        assert await store.delete_expired_files() == []
        await asyncio.sleep(2.1)
        assert await store.get_file("file-soon") is None  # before any sweep
        page, _ = await store.list_files(after=None, limit=10, order="asc", purpose=None)
        assert {f.id for f in page} == {"file-later", "file-never"}
        assert not await store.delete_file("file-soon")
        assert await store.delete_expired_files() == ["file-soon"]
        assert await store.delete_expired_files() == []
    run(backend, body)


def test_contents_stream_in_and_out_whole_or_not_at_all(backend):
    async def body(pair):
        _, blobs = pair
        parts = [bytes([n]) * 100_000 for n in range(7)]
        assert await blobs.write("file-a", chunks_of(*parts)) == 700_000
        assert await read_all(blobs, "file-a") == b"".join(parts)
        assert [len(chunk) > 0 async for chunk in blobs.read("file-a")]  # more than one chunk, each non-empty
        assert await blobs.write("file-empty", chunks_of()) == 0
        assert await blobs.exists("file-empty") and await read_all(blobs, "file-empty") == b""
        with pytest.raises(PayloadTooLarge):
            await blobs.write("file-big", chunks_of(b"x" * 60, b"y" * 60), max_bytes=100)
        assert not await blobs.exists("file-big")
        # a rewrite (a finalizer that died half-way, replaced) replaces the contents whole
        assert await blobs.write("file-a", chunks_of(b"new")) == 3
        assert await read_all(blobs, "file-a") == b"new"
        await blobs.delete("file-a")
        assert not await blobs.exists("file-a")
    run(backend, body)


def test_a_replica_reads_what_another_wrote(backend):
    async def body(first, second):
        await first[1].write("file-shared", chunks_of(b"line one\n", b"line two\n"))
        await first[0].create_file(file("file-shared"), None)
        assert await second[0].get_file("file-shared") is not None
        assert await read_all(second[1], "file-shared") == b"line one\nline two\n"
    run(backend, body, replicas=2)


def test_chunks_are_leased_and_each_line_written_once(backend):
    async def body(pair):
        store, _ = pair
        await started(store, "batch_a", 6, chunk_lines=3)
        one = await store.claim_chunk("one", 5, WORK)
        two = await store.claim_chunk("two", 5, WORK)
        assert one is not None and two is not None and {one.chunk, two.chunk} == {0, 1}
        assert await store.claim_chunk("three", 5, WORK) is None  # both leased
        first = one if one.chunk == 0 else two
        assert [line.number for line in first.lines] == [0, 2]  # line 1 was refused at validation
        owner = "one" if first is one else "two"
        assert not await store.record_line("batch_a", 0, "two" if owner == "one" else "one", 0, "x", False)
        assert await store.record_line("batch_a", 0, owner, 0, '{"ok": 0}', False)
        assert not await store.record_line("batch_a", 0, owner, 0, '{"again": 0}', False)  # written once
        assert (await store.counts("batch_a")).completed == 1
        await store.release_chunk("batch_a", 0, owner)
        again = await store.claim_chunk("four", 5, WORK)  # line 2 is still unanswered
        assert again is not None and again.chunk == 0 and [line.number for line in again.lines] == [2]
    run(backend, body)


def test_a_dead_runners_chunk_is_taken_over_and_its_late_write_refused(backend):
    async def body(first, second):
        store_a, store_b = first[0], second[0]
        await started(store_a, "batch_b", 4, chunk_lines=4)
        claim = await store_a.claim_chunk("a", 0.5, WORK)
        assert claim is not None and await store_b.claim_chunk("b", 5, WORK) is None
        await asyncio.sleep(1.0)  # a stops renewing: its lease expires
        assert not await store_a.renew_chunk("batch_b", 0, "a", 5)
        taken = await store_b.claim_chunk("b", 5, WORK)
        assert taken is not None and [line.number for line in taken.lines] == [0, 2, 3]
        assert not await store_a.record_line("batch_b", 0, "a", 0, '{"late": true}', False)
        for number in (0, 2, 3):
            assert await store_b.record_line("batch_b", 0, "b", number, f'{{"n": {number}}}', False)
        await store_b.release_chunk("batch_b", 0, "b")
        counts = await store_b.counts("batch_b")
        assert (counts.total, counts.completed, counts.failed) == (4, 3, 1)
        # every chunk done: the batch is claimed for finalizing
        claimed = await store_b.claim_batch("b", 5)
        assert claimed is not None and claimed[0].id == "batch_b"
        answered = [(row.number, row.result) async for row in store_b.results("batch_b", failed=False)]
        assert answered == [(0, '{"n": 0}'), (2, '{"n": 2}'), (3, '{"n": 3}')]
        refused = [(row.number, row.custom_id) async for row in store_b.results("batch_b", failed=True)]
        assert refused == [(1, "c1")]
    run(backend, body, replicas=2)


def test_claims_in_one_loop_turn_never_share_a_chunk(backend):
    async def body(*replicas):
        await started(replicas[0][0], "batch_c", 40, chunk_lines=4)
        claims = await asyncio.gather(*(store.claim_chunk(f"r{n}-{k}", 5, WORK)
                                        for n, (store, _) in enumerate(replicas) for k in range(4)))
        chunks = [claim.chunk for claim in claims if claim is not None]
        assert len(chunks) == len(set(chunks)) == 10 - 2  # 10 chunks; two claims found none left
        batch_claims = await asyncio.gather(*(store.claim_batch(f"f{n}", 5)
                                              for n, (store, _) in enumerate(replicas)))
        assert batch_claims == [None, None]  # in progress, chunks running
    run(backend, body, replicas=2)


def test_results_page_through_many_lines(backend):
    async def body(pair):
        store, _ = pair
        await started(store, "batch_d", 1203, chunk_lines=500)
        while (claim := await store.claim_chunk("w", 30, WORK)) is not None:
            for line in claim.lines:
                assert await store.record_line("batch_d", claim.chunk, "w", line.number, f'"{line.number}"', False)
            await store.release_chunk("batch_d", claim.chunk, "w")
        numbers = [row.number async for row in store.results("batch_d", failed=False)]
        assert numbers == [n for n in range(1203) if n != 1]
    run(backend, body)


def test_an_expired_batch_stops_its_chunks_and_is_finalized_once_none_runs(backend):
    """Issue 42: an expired batch was claimed for its finalization while a chunk still ran, and the line that chunk
    answered next was recorded after the files were written (reported batch_expired, counted completed)."""
    async def body(pair):
        store, _ = pair
        await started(store, "batch_e", 4, chunk_lines=2, expires_in=1.5)
        claim = await store.claim_chunk("w", 5, WORK)
        assert claim is not None
        await asyncio.sleep(2.1)
        assert not await store.renew_chunk("batch_e", claim.chunk, "w", 5)
        assert await store.claim_chunk("w2", 5, WORK) is None
        assert await store.claim_batch("f", 5) is None  # its chunk still holds the lease: not yet
        number = claim.lines[0].number
        assert await store.record_line("batch_e", claim.chunk, "w", number, '{"late": 1}', False)  # answered in time
        await store.release_chunk("batch_e", claim.chunk, "w")
        claimed = await store.claim_batch("f", 5)
        assert claimed is not None and claimed[0].status == "in_progress"
        assert not await store.record_line("batch_e", claim.chunk, "w", claim.lines[-1].number, "{}", False)
        assert (await store.counts("batch_e")).completed == 1
    run(backend, body)


def test_an_expired_batch_whose_runner_died_is_finalized_when_the_lease_lapses(backend):
    async def body(pair):
        store, _ = pair
        await started(store, "batch_l", 2, chunk_lines=2, expires_in=1.5)  # expires_at: whole seconds
        claim = await store.claim_chunk("w", 3, WORK)
        assert claim is not None
        await asyncio.sleep(2.1)
        assert await store.claim_batch("f", 5) is None
        await asyncio.sleep(1.2)  # the runner's lease lapsed: its late answer is refused, the batch is finalized
        assert await store.claim_batch("f", 5) is not None
        assert not await store.record_line("batch_l", claim.chunk, "w", 0, "{}", False)
    run(backend, body)


def test_a_final_batch_is_never_rewritten(backend):
    """A finalization is written once: a second finalizer (its lease lost, or run again) changes nothing."""
    async def body(pair):
        store, _ = pair
        await started(store, "batch_g", 2, chunk_lines=2)
        assert (claim := await store.claim_chunk("w", 5, WORK)) is not None
        for line in claim.lines:
            assert await store.record_line("batch_g", 0, "w", line.number, "{}", False)
        await store.release_chunk("batch_g", 0, "w")
        claimed = await store.claim_batch("f", 5)
        assert claimed is not None
        assert await store.update_batch(moved(claimed[0], "completed"), "f")
        assert await store.claim_batch("g", 5) is None
        assert not await store.update_batch(moved(claimed[0], "expired"), None)
        assert await store.request_cancel("batch_g", moved(claimed[0], "cancelling")) is not None
        assert (await store.get_batch("batch_g")).status == "completed"
    run(backend, body)


def test_cancel_expire_and_finalize_in_one_loop_turn(backend):
    """A cancel, the expiry and the finalizer's claim of one batch at once, on two replicas: one claim wins, the
    cancel either lands first (then the batch is finalized as cancelled) or finds the batch claimed, and the final
    object is written once."""
    async def body(first, second):
        await started(first[0], "batch_h", 2, chunk_lines=1, expires_in=0.3)
        await asyncio.sleep(0.6)
        batch_now = await first[0].get_batch("batch_h")
        cancel, claim_a, claim_b = await asyncio.gather(
            first[0].request_cancel("batch_h", moved(batch_now, "cancelling")),
            first[0].claim_batch("a", 5), second[0].claim_batch("b", 5))
        claims = [(owner, claim) for owner, claim in (("a", claim_a), ("b", claim_b)) if claim is not None]
        assert len(claims) == 1 and cancel is not None
        owner, (claimed, _) = claims[0]
        final = moved(claimed, "cancelled" if claimed.status == "cancelling" else "expired")
        assert await first[0].update_batch(final, owner)
        assert not await second[0].update_batch(moved(claimed, "completed"), owner)
        assert (await second[0].get_batch("batch_h")).status == final.status
    run(backend, body, replicas=2)


def test_a_batch_of_a_model_nobody_serves_is_anyones(backend):
    """Issue 42: on a server of several models, a batch of a model no process serves was never run (nor expired,
    cancelled or finalized). Its lines are anyone's (answered as online: model_not_found); the batch of a model
    another live process serves is left to it."""
    async def body(pair):
        store, _ = pair
        mine = WorkFilter((CHAT,), ("model-a",))
        await store.announce("a", mine, 30)
        await store.announce("b", WorkFilter((CHAT,), ("model-b",)), 30)
        for batch_id, model in (("batch_b", "model-b"), ("batch_x", "model-x")):
            await store.create_batch(batch(batch_id), None)
            claimed = await store.claim_batch("v", 5)
            assert claimed is not None
            assert await store.add_lines(batch_id, "v", [BatchLine(0, "c0", "{}")], 10)
            assert await store.update_batch(moved(claimed[0], "in_progress", model=model), "v")
        claim = await store.claim_chunk("a", 5, mine)
        assert claim is not None and claim.batch.id == "batch_x"
        assert await store.claim_chunk("a", 5, mine) is None  # batch_b is b's
        await store.announce("b", WorkFilter((CHAT,), None), 30)  # b now answers any model: batch_x is b's too
        await store.release_chunk("batch_x", 0, "a")
        assert await store.claim_chunk("a", 5, mine) is None
        cancelled = await store.request_cancel("batch_x", moved((await store.get_batch("batch_x")), "cancelling"))
        assert cancelled is not None
        claimed = await store.claim_batch("a", 5)  # any process finalizes it, whatever its model
        assert claimed is not None and claimed[0].id == "batch_x"
    run(backend, body)


def test_a_cancel_during_validation_wins(backend):
    async def body(pair):
        store, _ = pair
        await store.create_batch(batch("batch_f"), None)
        claimed = await store.claim_batch("v", 5)
        assert claimed is not None
        cancelling = await store.request_cancel("batch_f", moved(claimed[0], "cancelling"))
        assert cancelling is not None and cancelling.status == "cancelling"
        assert not await store.update_batch(moved(claimed[0], "in_progress"), "v")
        assert (await store.get_batch("batch_f")).status == "cancelling"
        page, more = await store.list_batches(after=None, limit=5)
        assert [b.id for b in page] == ["batch_f"] and not more
    run(backend, body)


def test_batches_list_newest_first_in_pages_within_one_second_too(backend):
    async def body(pair):
        store, _ = pair
        for n in range(5):  # two seconds: the order they were made in decides within one
            await store.create_batch(batch(f"batch_{n}", created_at=1700000000 + n // 3), None)
        first, more = await store.list_batches(after=None, limit=2)
        rest, rest_more = await store.list_batches(after=first[-1].id, limit=10)
        with pytest.raises(StoreError, match="no batch 'batch_nope' to list after"):
            await store.list_batches(after="batch_nope", limit=10)
        return [b.id for b in first], more, [b.id for b in rest], rest_more
    assert run(backend, body) == (["batch_4", "batch_3"], True, ["batch_2", "batch_1", "batch_0"], False)


def test_a_large_file_never_sits_in_memory(backend):
    """48 MiB in and out a MiB at a time: Python's allocations peak at a few chunks, not at the file's size."""
    size, chunk = 48 * 1024 * 1024, 1024 * 1024

    async def generated() -> AsyncIterator[bytes]:
        for n in range(size // chunk):
            yield bytes([n % 256]) * chunk

    async def body(pair):
        _, blobs = pair
        tracemalloc.start()
        try:
            assert await blobs.write("file-large", generated()) == size
            total = 0
            async for part in blobs.read("file-large"):
                assert part == bytes([total // chunk % 256]) * len(part)
                total += len(part)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert total == size and peak < 8 * chunk, peak
    run(backend, body)


def test_stored_objects_are_frozen_typed_and_read_rows_written_before_them():
    """A row as the store kept a batch before it was typed (a dict with `output_expires_after` as given) reads as
    the model; the object shown has OpenAI's fields only; a stored object is never changed in place."""
    row = ('{"id": "batch_old", "object": "batch", "endpoint": "/v1/chat/completions", "errors": null, '
           '"input_file_id": "file-in", "completion_window": "24h", "status": "completed", "created_at": 1, '
           '"expires_at": 2, "request_counts": {"total": 3, "completed": 2, "failed": 1}, "metadata": {"k": "v"}, '
           '"model": "m", "output_expires_after": {"anchor": "created_at", "seconds": 3600}}')
    old = Batch.model_validate_json(row)
    assert old.output_expires_after == 3600 and old.request_counts.failed == 1
    shown = json.loads(present(old).body)
    assert "output_expires_after" not in shown and shown["metadata"] == {"k": "v"} and "errors" not in shown
    assert Batch.model_validate_json(old.stored()) == old
    with pytest.raises(ValueError):
        old.status = "cancelled"  # type: ignore[misc]
    assert json.loads(present(file("file-x")).body)["object"] == "file"


def test_output_lines_are_typed_and_written_as_openai_writes_them():
    """A line of the output file holds `response` and a null `error`; one never run, the other way round (OpenAI's
    batch output format, as its SDK's BatchRequestOutput types it)."""
    from rostra.api.batches.objects import LineError, answered_line, refused_line

    answered = json.loads(answered_line("c1", 200, "req-1", {"object": "chat.completion"}).jsonl())
    assert list(answered) == ["id", "custom_id", "response", "error"] and answered["error"] is None
    assert answered["response"] == {"status_code": 200, "request_id": "req-1", "body": {"object": "chat.completion"}}
    refused = json.loads(refused_line(None, LineError("invalid_json", "line 3 is not JSON")).jsonl())
    assert refused["response"] is None and refused["custom_id"] is None
    assert refused["error"] == {"code": "invalid_json", "message": "line 3 is not JSON"}
    assert answered["id"].startswith("batch_req_") and answered["id"] != refused["id"]
