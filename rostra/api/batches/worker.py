"""The batch worker of a serving process: validates new batches, runs chunks of lines behind online traffic, and
writes the output and error files of the batches whose lines are all answered (or that were cancelled or expired).

Every serving process on the store runs one; they share the work through leases in the store (a chunk of lines, or
a batch's validation or finalization, is one process's at a time). A line waits for its turn while an online request
waits for an admission slot, and at most `concurrency` lines of this process run at once.
"""

from __future__ import annotations

from typing import Any

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import TypeVar

from rostra.api.batches.budget import BatchBudgets
from rostra.api.batches.dispatch import Asgi, run_line
from rostra.api.batches.lines import LineChecker, check_block
from rostra.api.batches.objects import LineError, answered_line, file_object, refused_line
from rostra.background import PollingWorker
from rostra.store.batch_objects import Batch, BatchError, BatchErrors, FinalStatus
from rostra.store.batch_store import BatchStore, ChunkClaim, LineResult, PendingLine, WorkFilter
from rostra.store.blobs import Blobs, lines_of, rechunked

log = logging.getLogger("rostra.batches")
T = TypeVar("T")
VALIDATION_BLOCK = 2000  # input lines checked and stored per transaction


@dataclass(frozen=True)
class BatchSettings:
    concurrency: int = 2  # lines of this process running at once
    lease_seconds: float = 10.0  # a chunk whose runner stops renewing this long is taken over
    chunk_lines: int = 50
    poll_interval: float = 0.5  # how often an idle worker looks for work
    window_seconds: int = 24 * 3600  # the completion window ("24h")
    sweep_interval: float = 60.0  # how often expired files are deleted (they are invisible from their expiry on)
    # How long the models a process announces count as served after it last said so: long enough that a restart
    # does not hand its batches to a process that would answer their lines model_not_found.
    announce_seconds: float = 60.0


def output_file_id(batch_id: str, kind: str) -> str:
    """The same id whoever writes it (a finalizer that dies half-way is replaced, not duplicated)."""
    return f"file-{batch_id.removeprefix('batch_')}{kind}"


class BatchWorker(PollingWorker):
    def __init__(self, store: BatchStore, blobs: Blobs, app: Asgi, settings: BatchSettings,
                 busy: Callable[[], bool], work: Callable[[], WorkFilter],
                 resolve_model: Callable[[str], str] = lambda name: name):
        super().__init__("batch-worker", log, settings.poll_interval)
        self.store, self.blobs, self.app, self.settings = store, blobs, app, settings
        self.busy = busy  # an online request waits for a slot: batch lines wait too
        self.work = work
        self.resolve_model = resolve_model  # the model that answers a name (--model-alias), as online
        self.owner = f"worker-{secrets.token_hex(6)}"
        self._next_sweep = 0.0  # when to delete the expired files next (time.monotonic())
        self._next_announce = 0.0  # when to tell the store again which models this process serves
        # What else holds a File and lets go of it when it is deleted or expires (the vector stores' chunks of it).
        self.file_deleted: list[Callable[[str], Awaitable[None]]] = []
        self.budgets: BatchBudgets | None = None  # the keys' batch token budgets (budget.py), where keys have them

    async def step(self) -> bool:
        """One piece of work, if there is one: a batch's phase, else a chunk of lines. False when idle."""
        if time.monotonic() >= self._next_sweep:
            self._next_sweep = time.monotonic() + self.settings.sweep_interval
            await self.delete_expired_files()
        claimed = await self.store.claim_batch(self.owner, self.settings.lease_seconds)
        if claimed is not None:
            await self._advance(*claimed)
            return True
        await self._keep_announced()
        chunk = await self.store.claim_chunk(self.owner, self.settings.lease_seconds, self.work())
        if chunk is None:
            return False
        await self._run_chunk(chunk)
        return True

    async def _keep_announced(self) -> None:
        """Tell the store again which models this process serves (at most every third of a lease): from the idle
        loop and while a chunk runs, however long, so that no other process takes this one's batches for a model
        nobody serves."""
        if time.monotonic() >= self._next_announce:
            self._next_announce = time.monotonic() + self.settings.lease_seconds / 3
            await self.store.announce(self.owner, self.work(), self.settings.announce_seconds)

    async def delete_expired_files(self) -> None:
        """The contents of the files past their `expires_at` (the store forgets them first: they are a 404 from
        then on, whichever process deletes the contents)."""
        for file_id in await self.store.delete_expired_files():
            await self.blobs.delete(file_id)
            await self.forget_file(file_id)
            log.info("file %s expired: deleted", file_id)

    async def forget_file(self, file_id: str) -> None:
        """A File deleted (or expired): whatever holds it lets it go."""
        for hook in self.file_deleted:
            await hook(file_id)

    async def _advance(self, batch: Batch, tenant: str | None) -> None:
        if batch.status == "validating":
            await self._validate(batch)
        elif batch.status == "cancelling":
            await self._finalize(batch, tenant, "cancelled")
        elif batch.status == "finalizing":  # its finalizer died half-way
            await self._finalize(batch, tenant, "completed")
        elif batch.expires_at <= time.time():
            await self._finalize(batch, tenant, "expired")
        else:
            finalizing = batch.moved("finalizing", int(time.time()))
            if await self.store.update_batch(finalizing):
                await self._finalize(finalizing, tenant, "completed")
            elif (cancelling := await self.store.get_batch(batch.id)) is not None:
                # A cancel came since the claim: it was accepted, so the batch ends cancelled (its lines answered).
                await self._finalize(cancelling, tenant, "cancelled")

    async def _validate(self, batch: Batch) -> None:
        now = int(time.time())
        checker = LineChecker(batch.endpoint)
        stored = 0
        async with contextlib.aclosing(_input_lines(self.blobs, batch.input_file_id)) as raw_lines:
            while block := await _next_raw_block(raw_lines, VALIDATION_BLOCK):
                lines = await asyncio.to_thread(check_block, checker, block, stored)
                if not await self.store.add_lines(batch.id, self.owner, lines, self.settings.chunk_lines):
                    return  # the lease was lost: another process validates it
                stored += len(lines)
                await self.store.renew_batch(batch.id, self.owner, self.settings.lease_seconds)
        if not stored:
            error = BatchError(code="empty_file", message="the input file has no lines (or is gone)")
            await self.store.update_batch(batch.moved("failed", now, errors=BatchErrors(data=(error,))), self.owner)
            return
        model = None if checker.model is None else self.resolve_model(checker.model)
        counts = await self.store.counts(batch.id)
        started = batch.moved("in_progress", now, model=model).counted(counts.total, counts.completed, counts.failed)
        if await self.store.update_batch(started, self.owner):
            log.info("batch %s: %d lines, %d refused at validation", batch.id, counts.total, counts.failed)
        else:  # cancelled meanwhile: let it be finalized now, not when this lease runs out
            await self.store.renew_batch(batch.id, self.owner, -1.0)

    async def _finalize(self, batch: Batch, tenant: str | None, status: FinalStatus) -> None:
        """Write the output and error files (the lines not answered, if cancelled or expired, as errors) and then
        the final object, under the batch's lease, renewed while the files are written (a large output outlives one
        lease). A finalizer that loses the lease stops; whoever claims the batch next writes the same files (the
        same ids) again, and the final object is written once (the store never rewrites a final batch)."""
        final = await self._while_leased(batch.id, self._write_results(batch, tenant, status))
        if final is not None and await self.store.update_batch(final, self.owner):
            log.info("batch %s %s: %s", batch.id, status, final.request_counts)

    async def _write_results(self, batch: Batch, tenant: str | None, status: FinalStatus) -> Batch:
        """The output and error files written; the final object, counted as they are (no line is answered from
        the batch's claim on: store.claim_batch)."""
        unanswered = LineError(f"batch_{status}", f"the batch was {status} before this line ran")
        written: dict[str, str | None] = {}
        for kind, failed in (("output", False), ("error", True)):
            file_id = output_file_id(batch.id, kind[0])
            size = await self.blobs.write(file_id, rechunked(_result_lines(self.store.results(batch.id, failed),
                                                                           unanswered)))
            if size:
                now = int(time.time())
                expires_at = None if batch.output_expires_after is None else now + batch.output_expires_after
                await self.store.create_file(file_object(file_id, f"{batch.id}_{kind}.jsonl", "batch_output", size,
                                                         expires_at, created_at=now), tenant)
                written[f"{kind}_file_id"] = file_id
            else:
                await self.blobs.delete(file_id)
        counts = await self.store.counts(batch.id)
        unanswered_count = counts.total - counts.completed - counts.failed  # reported failed, as OpenAI counts them
        return batch.moved(status, int(time.time()), **written).counted(counts.total, counts.completed,
                                                                       counts.failed + unanswered_count)

    async def _while_leased(self, batch_id: str, work: Coroutine[Any, Any, T]) -> T | None:
        """`work`'s result, run while this process renews its lease on the batch; None (and `work` cancelled) if
        the lease is lost meanwhile."""
        task = asyncio.ensure_future(work)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=self.settings.lease_seconds / 3)
                if done:
                    return task.result()
                if not await self.store.renew_batch(batch_id, self.owner, self.settings.lease_seconds):
                    log.warning("batch %s: lease lost to another process; its work stopped", batch_id)
                    return None
                await self._keep_announced()  # a long finalization holds up the idle loop's announcements
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _run_chunk(self, claim: ChunkClaim) -> None:
        """The chunk's lines, at most `concurrency` at once; all of them stopped (running or waiting) when the
        chunk's lease is lost or its batch stops (cancel, expiry): the chunk is then released at once, and its
        batch finalized with exactly the lines answered so far."""
        batch_id = claim.batch.id
        slots = asyncio.Semaphore(self.settings.concurrency)

        async def one(line: PendingLine) -> None:
            async with slots:
                while self.busy():  # online requests first
                    await asyncio.sleep(0.01)
                await self._run_one(claim, line)

        lines = [asyncio.create_task(one(line)) for line in claim.lines]
        renewer = asyncio.create_task(self._renew(batch_id, claim.chunk, lines))
        try:
            if lines:
                await asyncio.wait(lines)
        finally:
            for task in (renewer, *lines):
                task.cancel()
            await asyncio.gather(renewer, *lines, return_exceptions=True)
            await self.store.release_chunk(batch_id, claim.chunk, self.owner)
            log.info("batch %s chunk %d: %d lines run by %s", batch_id, claim.chunk, len(claim.lines), self.owner)
        errors = [error for task in lines if not task.cancelled() and (error := task.exception()) is not None]
        if errors:
            raise errors[0]  # a store error: logged, and the step retried

    async def _run_one(self, claim: ChunkClaim, line: PendingLine) -> None:
        request_id = "req_" + secrets.token_hex(12)
        refused = await self.budgets.refusal(claim.tenant, time.time()) if self.budgets is not None else None
        try:
            if refused is not None:
                raise _OverBudget(refused)
            answer = await run_line(self.app, claim.batch.endpoint, line.request.encode(), claim.tenant, request_id,
                                    window_ends=claim.batch.expires_at)
            status, body = answer.status_code, answer.body
        except _OverBudget as exc:
            log.warning("batch %s line %d: %s", claim.batch.id, line.number, exc)
            status, body = 429, {"error": {"message": str(exc), "type": "tokens", "param": None,
                                           "code": "rate_limit_exceeded"}}
        except Exception as exc:  # the route's error handlers answer what a client causes; this is the rest
            log.exception("batch %s line %d failed", claim.batch.id, line.number)
            status, body = 500, {"error": {"message": f"internal error: {type(exc).__name__}", "type": "server_error",
                                           "param": None, "code": None}}
        result = answered_line(line.custom_id, status, request_id, body).jsonl()
        if not await self.store.record_line(claim.batch.id, claim.chunk, self.owner, line.number, result,
                                            failed=not 200 <= status < 300):
            log.warning("batch %s line %d: answered after its chunk was taken over; not written",
                        claim.batch.id, line.number)

    async def _renew(self, batch_id: str, chunk: int, lines: list[asyncio.Task[None]]) -> None:
        while True:
            # Often enough that a cancel or the batch's expiry stops its lines soon, not only to keep the lease.
            await asyncio.sleep(min(self.settings.lease_seconds / 3, 0.5))
            if not await self.store.renew_chunk(batch_id, chunk, self.owner, self.settings.lease_seconds):
                for task in lines:
                    task.cancel()
                return
            await self._keep_announced()


class _OverBudget(Exception):
    """The line's key has spent its batch token budget for today (budget.py)."""


async def _result_lines(rows: AsyncIterator[LineResult], unanswered: LineError) -> AsyncIterator[bytes]:
    async for row in rows:
        yield (row.result if row.result is not None else refused_line(row.custom_id, unanswered).jsonl()).encode()


async def _input_lines(blobs: Blobs, file_id: str) -> AsyncGenerator[bytes, None]:
    """The non-empty lines of a batch's input file (none if it is gone)."""
    if not await blobs.exists(file_id):
        return
    async for line in lines_of(blobs.read(file_id)):
        if line.strip():
            yield line


async def _next_raw_block(lines: AsyncIterator[bytes], size: int) -> list[bytes]:
    block: list[bytes] = []
    async for line in lines:
        block.append(line)
        if len(block) == size:
            break
    return block
