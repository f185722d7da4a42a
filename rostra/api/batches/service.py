"""The Files and Batch APIs over the batch store, the file contents and the worker."""

from __future__ import annotations

from typing import Literal

import time
from collections.abc import AsyncIterator

from pydantic import BaseModel, ConfigDict

from rostra.api.batches.objects import (
    ENDPOINTS,
    FILE_PURPOSES,
    MAX_EXPIRY,
    MIN_EXPIRY,
    BatchList,
    FileDeleted,
    FileList,
    batch_object,
    file_object,
    new_id,
)
from rostra.api.batches.worker import BatchWorker
from rostra.errors import InvalidRequest, NotFound
from rostra.store.base import StoreError
from rostra.store.batch_objects import Batch, FileObject
from rostra.store.batch_store import BatchStore
from rostra.store.blobs import Blobs
from rostra.store.tenancy import Tenant


class ExpiresAfter(BaseModel):
    """When a file expires: `seconds` after its creation (OpenAI's `expires_after`, `output_expires_after`)."""

    model_config = ConfigDict(extra="forbid")

    anchor: Literal["created_at"]
    seconds: int


class CreateBatchBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input_file_id: str
    endpoint: str
    completion_window: str
    metadata: dict[str, str] | None = None
    output_expires_after: ExpiresAfter | None = None


class BatchesService:
    def __init__(self, store: BatchStore, blobs: Blobs, worker: BatchWorker, max_file_bytes: int,
                 min_file_expiry: int = MIN_EXPIRY):
        self.store, self.blobs, self.worker = store, blobs, worker
        self.max_file_bytes = max_file_bytes
        self.min_file_expiry = min_file_expiry

    def check_expiry(self, expires_after: ExpiresAfter | None, param: str) -> int | None:
        """The seconds asked for, within OpenAI's bounds (the least: --min-file-expiry)."""
        if expires_after is None:
            return None
        if not self.min_file_expiry <= expires_after.seconds <= MAX_EXPIRY:
            raise InvalidRequest(f"{param}.seconds must be between {self.min_file_expiry} and {MAX_EXPIRY}, not "
                                 f"{expires_after.seconds}", param=f"{param}.seconds")
        return expires_after.seconds

    # -- files ----------------------------------------------------------------------------------

    async def upload(self, filename: str, purpose: str, chunks: AsyncIterator[bytes], tenant: Tenant,
                     expires_after: ExpiresAfter | None = None) -> FileObject:
        if purpose not in FILE_PURPOSES:
            raise InvalidRequest(f"purpose must be one of {', '.join(FILE_PURPOSES)}, not {purpose!r}",
                                 param="purpose")
        seconds = self.check_expiry(expires_after, "expires_after")
        file_id = new_id("file-")
        size = await self.blobs.write(file_id, chunks, self.max_file_bytes)
        now = int(time.time())
        file = file_object(file_id, filename, purpose, size, None if seconds is None else now + seconds, now)
        await self.store.create_file(file, tenant.key)
        return file

    async def get_file(self, file_id: str, tenant: Tenant) -> FileObject:
        file = await self.store.get_file(file_id, tenant)
        if file is None or not await self.blobs.exists(file_id):
            raise NotFound(f"No such File object: {file_id}", param="file_id")
        return file

    async def list_files(self, after: str | None, limit: int, order: str, purpose: str | None,
                         tenant: Tenant) -> FileList:
        try:
            files, has_more = await self.store.list_files(after=after, limit=limit, order=order, purpose=purpose,
                                                          tenant=tenant)
        except StoreError as exc:
            raise InvalidRequest(str(exc), param="after") from exc
        return FileList.of(files, has_more)

    async def content(self, file_id: str, tenant: Tenant) -> AsyncIterator[bytes]:
        await self.get_file(file_id, tenant)
        return self.blobs.read(file_id)

    async def read_whole(self, file_id: str, tenant: Tenant, max_bytes: int) -> tuple[str, bytes]:
        """A file's name and contents, for a Responses input part that names it (api/responses/file_inputs.py)."""
        file = await self.get_file(file_id, tenant)
        if file.bytes > max_bytes:
            raise InvalidRequest(f"the file {file_id} is larger than this server reads as input ({max_bytes} bytes)",
                                 param="file_id", code="file_too_large")
        data = bytearray()
        async for chunk in self.blobs.read(file_id):
            data += chunk
        return file.filename, bytes(data)

    async def delete_file(self, file_id: str, tenant: Tenant) -> FileDeleted:
        if not await self.store.delete_file(file_id, tenant):
            raise NotFound(f"No such File object: {file_id}", param="file_id")
        await self.blobs.delete(file_id)
        await self.worker.forget_file(file_id)  # and from every vector store that held it
        return FileDeleted(id=file_id)

    # -- batches ----------------------------------------------------------------------------------

    async def create_batch(self, body: CreateBatchBody, tenant: Tenant) -> Batch:
        if body.endpoint not in ENDPOINTS:
            raise InvalidRequest(f"endpoint must be one of {', '.join(ENDPOINTS)}, not {body.endpoint!r}",
                                 param="endpoint")
        if body.completion_window != "24h":
            raise InvalidRequest("completion_window must be '24h'", param="completion_window")
        self.check_expiry(body.output_expires_after, "output_expires_after")
        file = await self.store.get_file(body.input_file_id, tenant)
        if file is None:
            raise NotFound(f"No such File object: {body.input_file_id}", param="input_file_id")
        if file.purpose != "batch":
            raise InvalidRequest(f"the input file's purpose is {file.purpose!r}, not 'batch'", param="input_file_id")
        expiry = None if body.output_expires_after is None else body.output_expires_after.seconds
        batch = batch_object(body.input_file_id, body.endpoint, body.metadata, self.worker.settings.window_seconds,
                             expiry)
        await self.store.create_batch(batch, tenant.key)
        self.worker.wake()
        return batch

    async def get_batch(self, batch_id: str, tenant: Tenant) -> Batch:
        batch = await self.store.get_batch(batch_id, tenant)
        if batch is None:
            raise NotFound(f"No batch found with id '{batch_id}'", param="batch_id")
        if batch.status in ("in_progress", "cancelling"):  # the live counts, not those at the last phase
            counts = await self.store.counts(batch_id)
            batch = batch.counted(counts.total, counts.completed, counts.failed)
        return batch

    async def list_batches(self, after: str | None, limit: int, tenant: Tenant) -> BatchList:
        try:
            batches, has_more = await self.store.list_batches(after=after, limit=limit, tenant=tenant)
        except StoreError as exc:
            raise InvalidRequest(str(exc), param="after") from exc
        return BatchList.of(batches, has_more)

    async def cancel_batch(self, batch_id: str, tenant: Tenant) -> Batch:
        batch = await self.get_batch(batch_id, tenant)
        if batch.status in ("cancelling", "cancelled"):
            return batch  # asked twice: the same answer
        stored = await self.store.request_cancel(batch_id, batch.moved("cancelling", int(time.time())))
        if stored is None or stored.status != "cancelling":  # it moved on meanwhile: say to what
            status = batch.status if stored is None else stored.status
            raise InvalidRequest(f"the batch is {status}: it can no longer be cancelled", param="batch_id")
        self.worker.wake()
        return stored

