"""The indexer of a serving process: takes a vector store file nobody indexes (a lease in the store, renewed while
it works: rostra/store/vector_store.py), reads its text, cuts it into chunks, embeds them and writes them with the
file's final status; and, every minute, turns the stores past their expiry `expired` (their chunks deleted, as
OpenAI's expired stores are). Every serving process on the store runs one; a file whose indexer died is taken over
when its lease runs out, so a restart mid-indexing loses nothing."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable

from rostra.api.vector_stores.embedder import Embedder
from rostra.api.vector_stores.extract import UnsupportedFile, file_text
from rostra.background import PollingWorker
from rostra.errors import APIError
from rostra.store.vector_objects import ErrorCode, LastError, StoredChunk, VectorStoreFile
from rostra.store.vector_store import VectorStores

log = logging.getLogger("rostra.vector_stores")

# A file's name and contents (None: the File is gone), as the Files API keeps them.
ReadFile = Callable[[str], Awaitable[tuple[str, bytes] | None]]


class Indexer(PollingWorker):
    def __init__(self, store: VectorStores, read: ReadFile, embedder: Embedder, lease_seconds: float = 10.0,
                 poll_interval: float = 0.5, sweep_interval: float = 60.0, clock: Callable[[], float] = time.time):
        super().__init__("vector-indexer", log, poll_interval)
        self.store, self.read, self.embedder = store, read, embedder
        self.lease_seconds, self.sweep_interval = lease_seconds, sweep_interval
        self.clock = clock  # what expiry is measured by (a test's own)
        self.owner = f"indexer-{secrets.token_hex(6)}"
        self._next_sweep = 0.0  # when to look for expired stores next (by `clock`)

    async def step(self) -> bool:
        """Expire the stores due (every `sweep_interval`), then index one file if one waits; False when none does."""
        if self.clock() >= self._next_sweep:
            self._next_sweep = self.clock() + self.sweep_interval
            for store_id in await self.store.expire_stores(self.clock()):
                log.info("vector store %s expired: its chunks deleted", store_id)
        return await self.index_one()

    async def index_one(self) -> bool:
        """Index one file if one waits; False when none does."""
        file = await self.store.claim_file(self.owner, self.lease_seconds)
        if file is None:
            return False
        work = asyncio.ensure_future(self._indexed(file))
        try:
            while not work.done():
                await asyncio.wait({work}, timeout=self.lease_seconds / 3)
                if not work.done() and not await self.store.renew_file(file.vector_store_id, file.id, self.owner,
                                                                       self.lease_seconds):
                    log.info("vector store %s file %s: deleted, cancelled or taken over; indexing stopped",
                             file.vector_store_id, file.id)
                    return True
            final, chunks = work.result()
        finally:
            if not work.done():
                work.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await work
        if await self.store.finish_file(final, chunks, self.owner):
            log.info("vector store %s file %s: %s, %d chunks", file.vector_store_id, file.id, final.status,
                     len(chunks))
        return True

    async def _indexed(self, file: VectorStoreFile) -> tuple[VectorStoreFile, list[StoredChunk]]:
        """The file's final object (completed, or failed with its last_error) and its chunks."""
        try:
            found = await self.read(file.id)
            if found is None:
                return _failed(file, "invalid_file", f"the file {file.id} no longer exists"), []
            name, data = found
            text = await asyncio.to_thread(file_text, name, data)
            texts = await self.embedder.chunks(text, file.chunking_strategy)
            vectors = await self.embedder.embed(texts)
        except UnsupportedFile as exc:
            return _failed(file, "unsupported_file", str(exc)), []
        except APIError as exc:  # no embedding model, a model that failed to load, ...
            return _failed(file, "server_error", exc.message), []
        except Exception as exc:  # the engine failed: the file says so rather than being retried for ever
            log.exception("vector store %s file %s: indexing failed", file.vector_store_id, file.id)
            return _failed(file, "server_error", f"indexing failed: {type(exc).__name__}"), []
        chunks = [StoredChunk(position, chunk, vector.tobytes())
                  for position, (chunk, vector) in enumerate(zip(texts, vectors))]
        usage = sum(len(chunk.text.encode()) + len(chunk.embedding) for chunk in chunks)
        return file.model_copy(update={"status": "completed", "usage_bytes": usage, "last_error": None}), chunks


def _failed(file: VectorStoreFile, code: ErrorCode, message: str) -> VectorStoreFile:
    log.warning("vector store %s file %s failed: %s", file.vector_store_id, file.id, message)
    return file.model_copy(update={"status": "failed", "last_error": LastError(code=code, message=message)})
