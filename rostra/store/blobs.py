"""File contents (the Files API's uploads, a batch's output and error files), kept apart from their metadata.

Contents are streamed in and out in chunks, never held whole in memory. `DirectoryBlobs` keeps each file as one
file on disk under the data directory (`DATA_DIR/files/<id>`), which every process on the machine that shares the
SQLite store shares; `PostgresBlobs` (batch_postgres.py) keeps them in the database, so replicas on other machines
share them too.
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from pathlib import Path

from rostra.errors import PayloadTooLarge

CHUNK_BYTES = 1024 * 1024
_SAFE_ID = re.compile(r"^[A-Za-z0-9_-]{1,100}$")


class Blobs(ABC):
    @abstractmethod
    async def write(self, blob_id: str, chunks: AsyncIterator[bytes], max_bytes: int | None = None) -> int:
        """Keep the chunks as the blob's contents, replacing any it had; a reader sees the old contents or the new,
        never half of them. Returns the size; PayloadTooLarge (and nothing kept) past `max_bytes`."""

    @abstractmethod
    def read(self, blob_id: str) -> AsyncIterator[bytes]:
        """The contents in chunks."""

    @abstractmethod
    async def exists(self, blob_id: str) -> bool: ...

    @abstractmethod
    async def delete(self, blob_id: str) -> None: ...


def too_large(max_bytes: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"the file is larger than the limit of {max_bytes} bytes (--max-file-bytes)")


async def lines_of(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The lines of a stream of chunks (without their newlines)."""
    rest = b""
    async for chunk in chunks:
        *lines, rest = (rest + chunk).split(b"\n")
        for line in lines:
            yield line
    if rest:
        yield rest


async def rechunked(lines: AsyncIterator[bytes], size: int = CHUNK_BYTES) -> AsyncIterator[bytes]:
    """Lines, each followed by a newline, gathered into chunks of about `size` bytes."""
    pending: list[bytes] = []
    length = 0
    async for line in lines:
        pending.append(line + b"\n")
        length += len(line) + 1
        if length >= size:
            yield b"".join(pending)
            pending, length = [], 0
    if pending:
        yield b"".join(pending)


class DirectoryBlobs(Blobs):
    def __init__(self, root: Path):
        self.root = Path(root)

    def path(self, blob_id: str) -> Path:
        if not _SAFE_ID.match(blob_id):  # ids are ours, but a path is never built from anything else
            raise ValueError(f"not a file id: {blob_id!r}")
        return self.root / blob_id

    async def write(self, blob_id: str, chunks: AsyncIterator[bytes], max_bytes: int | None = None) -> int:
        """Write the chunks to a temporary file, then move it into place (a reader never sees half a file).
        Returns the size; PayloadTooLarge (and nothing kept) past `max_bytes`. Each writer has a temporary file of
        its own: two finalizers of one batch (one that lost its lease) never write into each other's."""
        target = self.path(blob_id)
        partial = target.with_name(f"{target.name}.partial-{secrets.token_hex(4)}")
        await asyncio.to_thread(self.root.mkdir, parents=True, exist_ok=True)
        handle = await asyncio.to_thread(open, partial, "wb")
        size = 0
        try:
            async for chunk in chunks:
                size += len(chunk)
                if max_bytes is not None and size > max_bytes:
                    raise too_large(max_bytes)
                await asyncio.to_thread(handle.write, chunk)
            await asyncio.to_thread(_close_synced, handle)
            await asyncio.to_thread(os.replace, partial, target)
        except BaseException:
            handle.close()
            partial.unlink(missing_ok=True)
            raise
        return size

    async def read(self, blob_id: str) -> AsyncIterator[bytes]:
        """The contents in chunks, read off the event loop."""
        handle = await asyncio.to_thread(open, self.path(blob_id), "rb")
        try:
            while chunk := await asyncio.to_thread(handle.read, CHUNK_BYTES):
                yield chunk
        finally:
            handle.close()

    async def exists(self, blob_id: str) -> bool:
        return await asyncio.to_thread(self.path(blob_id).is_file)

    async def delete(self, blob_id: str) -> None:
        await asyncio.to_thread(self.path(blob_id).unlink, missing_ok=True)


def _close_synced(handle) -> None:
    handle.flush()
    os.fsync(handle.fileno())
    handle.close()
