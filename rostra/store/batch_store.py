"""Durable state of the Files and Batch APIs: file objects, batch objects, and each batch's lines.

A batch's lines are stored once it is validated, each with its result once it has one (the output or error line,
as written to the batch's output or error file). Lines are grouped in chunks, and a process runs a chunk under a
lease (`owner`, renewed while it runs): several serving processes (on one SQLite store, or replicas on one
PostgreSQL database: batch_postgres.py) share a batch chunk by chunk, and a chunk whose runner died is taken over
once its lease has expired. A line's result is written only while its writer holds the chunk's lease and only if
the line has none yet, so no line is ever answered twice; a restart loses at most the lines that were running. Validation and finalization (writing the output files) run under a lease
on the batch itself.

Files and batches belong to a tenant (rostra/store/tenancy.py) as responses do.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass

from rostra.store.batch_objects import FINAL_STATUSES, Batch, FileObject
from rostra.store.tenancy import EVERYONE, Tenant

__all__ = ["FINAL_STATUSES", "Batch", "FileObject"]


@dataclass(frozen=True)
class BatchLine:
    """One input line as validated: its request (the JSON text of the line's body) to run, or its result already
    (an error line, for a line that could not be run)."""

    number: int  # 0-based position among the input file's non-empty lines
    custom_id: str | None
    request: str | None
    result: str | None = None
    failed: bool = False


@dataclass(frozen=True)
class PendingLine:
    number: int
    custom_id: str
    request: str


@dataclass(frozen=True)
class ChunkClaim:
    """A chunk of a batch that this process now runs: the lines of it that have no result yet."""

    batch: Batch
    tenant: str | None
    chunk: int
    lines: list[PendingLine]


@dataclass(frozen=True)
class WorkFilter:
    """The lines a process runs: those of batches of its endpoints (an embedding server's: /v1/embeddings), and of
    its models (None: any model, as a server of one model answers whatever model a request names), or of a model no
    live process announces (store.announce) serving: its lines are anyone's, answered as online (model_not_found).
    Validating, cancelling, expiring and finalizing a batch need no model: any process does them."""

    endpoints: tuple[str, ...]
    models: tuple[str, ...] | None = None


ANY_MODEL = "*"  # what a process that answers whatever model a request names announces


@dataclass(frozen=True)
class LineResult:
    """A line as its batch's output or error file writes it: its result, or None for a line never answered."""

    number: int
    custom_id: str | None
    result: str | None


RESULTS_PAGE = 500  # lines read per query while an output file is written


@dataclass(frozen=True)
class LineCounts:
    total: int
    completed: int
    failed: int


class BatchStore(ABC):
    @abstractmethod
    async def open(self) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...

    # -- files ----------------------------------------------------------------------------------

    @abstractmethod
    async def create_file(self, file: FileObject, tenant: str | None) -> None: ...

    @abstractmethod
    async def get_file(self, file_id: str, tenant: Tenant = EVERYONE) -> FileObject | None: ...

    @abstractmethod
    async def list_files(self, *, after: str | None, limit: int, order: str, purpose: str | None,
                         tenant: Tenant = EVERYONE) -> tuple[list[FileObject], bool]:
        """One page of the file objects `tenant` may see by (created_at, id); StoreError for an unknown `after`."""

    @abstractmethod
    async def delete_file(self, file_id: str, tenant: Tenant = EVERYONE) -> bool: ...

    @abstractmethod
    async def delete_expired_files(self) -> list[str]:
        """Forget the files whose `expires_at` has passed (get_file and list_files no longer see them from that
        moment); their ids, for their contents to be deleted."""

    # -- batches ----------------------------------------------------------------------------------

    @abstractmethod
    async def create_batch(self, batch: Batch, tenant: str | None) -> None: ...

    @abstractmethod
    async def get_batch(self, batch_id: str, tenant: Tenant = EVERYONE) -> Batch | None: ...

    @abstractmethod
    async def list_batches(self, *, after: str | None, limit: int, tenant: Tenant = EVERYONE
                           ) -> tuple[list[Batch], bool]:
        """Newest first, as OpenAI lists batches."""

    @abstractmethod
    async def update_batch(self, batch: Batch, owner: str | None = None) -> bool:
        """Replace the batch object (its `status` column follows), unless it is final already (a finalization is
        written once) or a cancel came before a move to `in_progress` or `finalizing`. With `owner`: only while it holds the batch's lease, which is then dropped. False if nothing
        was written."""

    @abstractmethod
    async def request_cancel(self, batch_id: str, cancelling: Batch) -> Batch | None:
        """validating/in_progress -> `cancelling` (the object given); the stored object as it is now, or None."""

    @abstractmethod
    async def claim_batch(self, owner: str, lease_seconds: float) -> tuple[Batch, str | None] | None:
        """A batch with work for its own lease, whatever its model: `validating`, or `in_progress` with every chunk
        done, or past its `expires_at` or `cancelling` with no chunk running (a line answered late is then never
        written after its batch's files are: record_line needs the chunk's lease). (batch, tenant)."""

    @abstractmethod
    async def announce(self, owner: str, work: WorkFilter, seconds: float) -> None:
        """`owner` serves `work.models` (None: any model) for the next `seconds` (replacing what it announced)."""

    @abstractmethod
    async def renew_batch(self, batch_id: str, owner: str, lease_seconds: float) -> bool: ...

    @abstractmethod
    async def add_lines(self, batch_id: str, owner: str, lines: list[BatchLine], chunk_lines: int) -> bool:
        """Store validated lines (chunk = number // chunk_lines), while `owner` holds the batch's lease."""

    @abstractmethod
    async def claim_chunk(self, owner: str, lease_seconds: float, work: WorkFilter) -> ChunkClaim | None:
        """A chunk of an `in_progress` batch (before its `expires_at`) that `work` takes, that nobody runs (or whose
        runner's lease expired) and that has lines without a result; taken under `owner`'s lease."""

    @abstractmethod
    async def renew_chunk(self, batch_id: str, chunk: int, owner: str, lease_seconds: float) -> bool:
        """Extend the lease; False when it is no longer `owner`'s or the batch no longer runs (cancel, expiry)."""

    @abstractmethod
    async def record_line(self, batch_id: str, chunk: int, owner: str, number: int, result: str,
                          failed: bool) -> bool:
        """The line's result, written only while `owner` holds the chunk and the line has none."""

    @abstractmethod
    async def release_chunk(self, batch_id: str, chunk: int, owner: str) -> None:
        """`owner` stops running the chunk (done, or stopped); it is done when all its lines have results."""

    @abstractmethod
    async def counts(self, batch_id: str) -> LineCounts: ...

    @abstractmethod
    async def results_page(self, batch_id: str, failed: bool, after: int, limit: int) -> list[LineResult]:
        """Up to `limit` lines numbered above `after`, in order: the answered ones (failed: False), or the failed
        and unanswered ones (failed: True)."""

    async def results(self, batch_id: str, failed: bool) -> AsyncIterator[LineResult]:
        """Every such line in order, a page at a time (a batch's output is never held whole in memory)."""
        after = -1
        while page := await self.results_page(batch_id, failed, after, RESULTS_PAGE):
            for line in page:
                yield line
            after = page[-1].number
