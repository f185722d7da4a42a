"""Durable state of the vector stores (`/v1/vector_stores`): the stores, their files (each with its status and
attributes), file batches, and each file's chunks with their embeddings.

A file is indexed in the background by whichever serving process claims it (a lease, renewed while it works, as a
batch chunk's: rostra/store/batch_store.py): a process that dies mid-file leaves it `in_progress` with a lease that
runs out, and the next process takes it over, so a restart loses nothing. A file's chunks and its final status are
written together, and only by the holder of its lease while the file is still `in_progress` (a file deleted or
cancelled meanwhile gets nothing).

Every change to a store's files or chunks bumps the store's `version`: a search process keeps its in-memory index of
a store (rostra/api/vector_stores/index.py) until the version moves, whichever replica changed it.

Stores belong to a tenant (rostra/store/tenancy.py); their files and batches are reached through their store.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from rostra.store.tenancy import EVERYONE, Tenant
from rostra.store.vector_objects import (
    FileBatch,
    FileCounts,
    IndexRow,
    StoredChunk,
    VectorStore,
    VectorStoreFile,
)

__all__ = ["FileBatch", "FileCounts", "IndexRow", "StoredChunk", "VectorStore", "VectorStoreFile", "VectorStores"]


class VectorStores(ABC):
    @abstractmethod
    async def open(self) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...

    # -- stores ------------------------------------------------------------------------------------
    @abstractmethod
    async def create_store(self, store: VectorStore, tenant: str | None) -> None: ...

    @abstractmethod
    async def get_store(self, store_id: str, tenant: Tenant = EVERYONE) -> VectorStore | None: ...

    @abstractmethod
    async def list_stores(self, *, after: str | None, limit: int, order: str, tenant: Tenant = EVERYONE
                          ) -> tuple[list[VectorStore], bool]:
        """One page by (created_at, order made); StoreError for an unknown `after`."""

    @abstractmethod
    async def put_store(self, store: VectorStore) -> None:
        """Replace the store's object (name, metadata, expiry, last activity)."""

    @abstractmethod
    async def delete_store(self, store_id: str, tenant: Tenant = EVERYONE) -> bool:
        """The store, its files, batches and chunks gone."""

    @abstractmethod
    async def version(self, store_id: str) -> int:
        """Moves with every change to the store's files or chunks (-1: no such store)."""

    @abstractmethod
    async def counts(self, store_id: str, batch_id: str | None = None) -> tuple[FileCounts, int]:
        """Its files (of `batch_id` only, if given) counted by status, and the bytes its completed files use."""

    @abstractmethod
    async def expire_stores(self, now: float) -> list[str]:
        """The stores whose `expires_at` has passed at `now` and that are not `expired` yet become `expired`: their
        chunks are deleted (their files stay listed, using no bytes; one still in progress is cancelled). Their
        ids."""

    # -- files -------------------------------------------------------------------------------------
    @abstractmethod
    async def add_file(self, file: VectorStoreFile) -> None:
        """Attach (or attach again: its old chunks dropped) a file, `in_progress`, for the indexer to claim."""

    @abstractmethod
    async def get_file(self, store_id: str, file_id: str) -> VectorStoreFile | None: ...

    @abstractmethod
    async def list_files(self, store_id: str, *, after: str | None, limit: int, order: str, status: str | None,
                         batch_id: str | None = None) -> tuple[list[VectorStoreFile], bool]: ...

    @abstractmethod
    async def set_attributes(self, file: VectorStoreFile) -> bool:
        """The file's object with new attributes (its status untouched); False if it is gone."""

    @abstractmethod
    async def delete_file(self, store_id: str, file_id: str) -> bool: ...

    @abstractmethod
    async def drop_file(self, file_id: str) -> list[str]:
        """The File `file_id` (deleted from the Files API) leaves every store that held it, its chunks with it. The
        stores it left."""

    @abstractmethod
    async def cancel_batch_files(self, store_id: str, batch_id: str) -> None:
        """The batch's files still `in_progress` become `cancelled` (an indexer holding one then writes nothing)."""

    @abstractmethod
    async def file_text(self, store_id: str, file_id: str) -> list[str]:
        """The file's chunks' texts, in order."""

    # -- indexing ----------------------------------------------------------------------------------
    @abstractmethod
    async def claim_file(self, owner: str, lease_seconds: float) -> VectorStoreFile | None:
        """An `in_progress` file nobody indexes (or whose indexer's lease ran out), now `owner`'s."""

    @abstractmethod
    async def renew_file(self, store_id: str, file_id: str, owner: str, lease_seconds: float) -> bool: ...

    @abstractmethod
    async def finish_file(self, file: VectorStoreFile, chunks: list[StoredChunk], owner: str) -> bool:
        """Write the file's chunks and its final object together, only while `owner` holds its lease and it is
        still `in_progress`; the lease is dropped. False if nothing was written."""

    @abstractmethod
    async def index_rows(self, store_id: str) -> list[IndexRow]:
        """Every chunk of the store's completed files, with their files' names and attributes."""

    # -- file batches ------------------------------------------------------------------------------
    @abstractmethod
    async def put_batch(self, batch: FileBatch) -> None: ...

    @abstractmethod
    async def get_batch(self, store_id: str, batch_id: str) -> FileBatch | None: ...
