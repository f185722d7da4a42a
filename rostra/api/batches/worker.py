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
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass

from rostra.api.batches.dispatch import Asgi, run_line
from rostra.api.batches.lines import LineChecker, check_block
from rostra.api.batches.objects import OUTPUT_EXPIRY, LineError, answered_line, file_object, refused_line, with_counts
from rostra.store.batch_store import BatchStore, ChunkClaim, LineResult, PendingLine, WorkFilter
from rostra.store.blobs import Blobs, lines_of, rechunked
from rostra.store.tables import dumps

log = logging.getLogger("rostra.batches")
VALIDATION_BLOCK = 2000  # input lines checked and stored per transaction


@dataclass(frozen=True)
class BatchSettings:
    concurrency: int = 2  # lines of this process running at once
    lease_seconds: float = 10.0  # a chunk whose runner stops renewing this long is taken over
    chunk_lines: int = 50
    poll_interval: float = 0.5  # how often an idle worker looks for work
    window_seconds: int = 24 * 3600  # the completion window ("24h")
    sweep_interval: float = 60.0  # how often expired files are deleted (they are invisible from their expiry on)


def output_file_id(batch_id: str, kind: str) -> str:
    """The same id whoever writes it (a finalizer that dies half-way is replaced, not duplicated)."""
    return f"file-{batch_id.removeprefix('batch_')}{kind}"


class BatchWorker:
    def __init__(self, store: BatchStore, blobs: Blobs, app: Asgi, settings: BatchSettings,
                 busy: Callable[[], bool], work: Callable[[], WorkFilter]):
        self.store, self.blobs, self.app, self.settings = store, blobs, app, settings
        self.busy = busy  # an online request waits for a slot: batch lines wait too
        self.work = work
        self.owner = f"worker-{secrets.token_hex(6)}"
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._next_sweep = 0.0  # when to delete the expired files next (time.monotonic())

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="rostra-batch-worker")

    def wake(self) -> None:
        """New work (a batch created, a cancel): look now rather than at the next poll."""
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
                log.exception("batch worker: a step failed; retrying")
                worked = False
            if not worked:
                self._wake.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.settings.poll_interval)

    async def step(self) -> bool:
        """One piece of work, if there is one: a batch's phase, else a chunk of lines. False when idle."""
        if time.monotonic() >= self._next_sweep:
            self._next_sweep = time.monotonic() + self.settings.sweep_interval
            await self.delete_expired_files()
        claimed = await self.store.claim_batch(self.owner, self.settings.lease_seconds, self.work())
        if claimed is not None:
            await self._advance(*claimed)
            return True
        chunk = await self.store.claim_chunk(self.owner, self.settings.lease_seconds, self.work())
        if chunk is None:
            return False
        await self._run_chunk(chunk)
        return True

    async def delete_expired_files(self) -> None:
        """The contents of the files past their `expires_at` (the store forgets them first: they are a 404 from
        then on, whichever process deletes the contents)."""
        for file_id in await self.store.delete_expired_files():
            await self.blobs.delete(file_id)
            log.info("file %s expired: deleted", file_id)

    async def _advance(self, batch: dict[str, Any], tenant: str | None) -> None:
        if batch["status"] == "validating":
            await self._validate(batch)
        elif batch["status"] == "cancelling":
            await self._finalize(batch, tenant, "cancelled")
        elif batch["status"] == "finalizing":  # its finalizer died half-way
            await self._finalize(batch, tenant, "completed")
        elif batch["expires_at"] <= time.time():
            await self._finalize(batch, tenant, "expired")
        else:
            batch = {**batch, "status": "finalizing", "finalizing_at": int(time.time())}
            await self.store.update_batch(batch)
            await self._finalize(batch, tenant, "completed")

    async def _validate(self, batch: dict[str, Any]) -> None:
        now = int(time.time())
        checker = LineChecker(batch["endpoint"])
        stored = 0
        async with contextlib.aclosing(_input_lines(self.blobs, batch["input_file_id"])) as raw_lines:
            while block := await _next_raw_block(raw_lines, VALIDATION_BLOCK):
                lines = await asyncio.to_thread(check_block, checker, block, stored)
                if not await self.store.add_lines(batch["id"], self.owner, lines, self.settings.chunk_lines):
                    return  # the lease was lost: another process validates it
                stored += len(lines)
                await self.store.renew_batch(batch["id"], self.owner, self.settings.lease_seconds)
        if not stored:
            error = {"code": "empty_file", "message": "the input file has no lines (or is gone)", "param": None,
                     "line": None}
            failed = {**batch, "status": "failed", "failed_at": now, "errors": {"object": "list", "data": [error]}}
            await self.store.update_batch(failed, self.owner)
            return
        model = checker.model
        counts = await self.store.counts(batch["id"])
        started = with_counts({**batch, "status": "in_progress", "in_progress_at": now, "model": model}, counts)
        if await self.store.update_batch(started, self.owner):
            log.info("batch %s: %d lines, %d refused at validation", batch["id"], counts.total, counts.failed)
        else:  # cancelled meanwhile: let it be finalized now, not when this lease runs out
            await self.store.renew_batch(batch["id"], self.owner, -1.0)

    async def _finalize(self, batch: dict[str, Any], tenant: str | None, status: str) -> None:
        """Write the output and error files (the lines not answered, if cancelled or expired, as errors)."""
        unanswered = LineError(f"batch_{status}", f"the batch was {status} before this line ran")
        written = {}
        expires_after = (batch.get(OUTPUT_EXPIRY) or {}).get("seconds")
        for kind, failed in (("output", False), ("error", True)):
            file_id = output_file_id(batch["id"], kind[0])
            size = await self.blobs.write(file_id, rechunked(_result_lines(self.store.results(batch["id"], failed),
                                                                           unanswered)))
            if size:
                now = int(time.time())
                await self.store.create_file(file_object(
                    file_id, f"{batch['id']}_{kind}.jsonl", "batch_output", size,
                    None if expires_after is None else now + expires_after, created_at=now), tenant)
                written[f"{kind}_file_id"] = file_id
            else:
                await self.blobs.delete(file_id)
        counts = await self.store.counts(batch["id"])
        unanswered_count = counts.total - counts.completed - counts.failed
        final = with_counts({**batch, **written, "status": status, f"{status}_at": int(time.time())}, counts)
        final["request_counts"]["failed"] += unanswered_count
        if await self.store.update_batch(final, self.owner):
            log.info("batch %s %s: %s", batch["id"], status, final["request_counts"])

    async def _run_chunk(self, claim: ChunkClaim) -> None:
        batch_id = claim.batch["id"]
        running = asyncio.Event()  # cleared when the lease is lost or the batch stops (cancel, expiry)
        running.set()
        renewer = asyncio.create_task(self._renew(batch_id, claim.chunk, running))
        slots = asyncio.Semaphore(self.settings.concurrency)

        async def one(line: PendingLine) -> None:
            async with slots:
                while running.is_set() and self.busy():  # online requests first
                    await asyncio.sleep(0.01)
                if running.is_set():
                    await self._run_one(claim, line)

        try:
            await asyncio.gather(*(one(line) for line in claim.lines))
        finally:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewer
            await self.store.release_chunk(batch_id, claim.chunk, self.owner)
            log.info("batch %s chunk %d: %d lines run by %s", batch_id, claim.chunk, len(claim.lines), self.owner)

    async def _run_one(self, claim: ChunkClaim, line: PendingLine) -> None:
        request_id = "req_" + secrets.token_hex(12)
        try:
            answer = await run_line(self.app, claim.batch["endpoint"], line.request.encode(), claim.tenant, request_id,
                                    window_ends=claim.batch["expires_at"])
            status, body = answer.status_code, answer.body
        except Exception as exc:  # the route's error handlers answer what a client causes; this is the rest
            log.exception("batch %s line %d failed", claim.batch["id"], line.number)
            status, body = 500, {"error": {"message": f"internal error: {type(exc).__name__}", "type": "server_error",
                                           "param": None, "code": None}}
        result = dumps(answered_line(line.custom_id, status, request_id, body))
        if not await self.store.record_line(claim.batch["id"], claim.chunk, self.owner, line.number, result,
                                            failed=not 200 <= status < 300):
            log.warning("batch %s line %d: answered after its chunk was taken over; not written",
                        claim.batch["id"], line.number)

    async def _renew(self, batch_id: str, chunk: int, running: asyncio.Event) -> None:
        while True:
            # Often enough that a cancel or the batch's expiry stops new lines soon, not only to keep the lease.
            await asyncio.sleep(min(self.settings.lease_seconds / 3, 0.5))
            if not await self.store.renew_chunk(batch_id, chunk, self.owner, self.settings.lease_seconds):
                running.clear()
                return


async def _result_lines(rows: AsyncIterator[LineResult], unanswered: LineError) -> AsyncIterator[bytes]:
    async for row in rows:
        yield (row.result if row.result is not None else dumps(refused_line(row.custom_id, unanswered))).encode()


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
