"""File contents (the Files API's uploads, a batch's output and error files), kept apart from their metadata.

`DirectoryBlobs` keeps each file as one file on disk under the data directory (`DATA_DIR/files/<id>`): contents
are streamed in and out in chunks, never held whole in memory, and every process on the machine that shares the
SQLite store shares the directory. (PostgreSQL replicas on other machines would need the contents in the database,
a table of chunks behind this same interface; rostra keeps files on the local disk of the data directory: see
README "Files and batches".)
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

from rostra.errors import PayloadTooLarge

CHUNK_BYTES = 1024 * 1024
_SAFE_ID = re.compile(r"^[A-Za-z0-9_-]{1,100}$")


class DirectoryBlobs:
    def __init__(self, root: Path):
        self.root = Path(root)

    def path(self, blob_id: str) -> Path:
        if not _SAFE_ID.match(blob_id):  # ids are ours, but a path is never built from anything else
            raise ValueError(f"not a file id: {blob_id!r}")
        return self.root / blob_id

    async def write(self, blob_id: str, chunks: AsyncIterator[bytes], max_bytes: int | None = None) -> int:
        """Write the chunks to a temporary file, then move it into place (a reader never sees half a file).
        Returns the size; PayloadTooLarge (and nothing kept) past `max_bytes`."""
        target = self.path(blob_id)
        partial = target.with_name(target.name + ".partial")
        await asyncio.to_thread(self.root.mkdir, parents=True, exist_ok=True)
        handle = await asyncio.to_thread(open, partial, "wb")
        size = 0
        try:
            async for chunk in chunks:
                size += len(chunk)
                if max_bytes is not None and size > max_bytes:
                    raise PayloadTooLarge(f"the file is larger than the limit of {max_bytes} bytes (--max-file-bytes)")
                await asyncio.to_thread(handle.write, chunk)
            await asyncio.to_thread(_close_synced, handle)
            await asyncio.to_thread(os.replace, partial, target)
        except BaseException:
            handle.close()
            partial.unlink(missing_ok=True)
            raise
        return size

    def write_lines_sync(self, blob_id: str, lines: Iterable[bytes]) -> int:
        """Blocking (call it in a thread): the lines, each followed by a newline, as one file. Returns the size."""
        target = self.path(blob_id)
        partial = target.with_name(target.name + ".partial")
        self.root.mkdir(parents=True, exist_ok=True)
        size = 0
        with open(partial, "wb") as handle:
            for line in lines:
                handle.write(line + b"\n")
                size += len(line) + 1
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(partial, target)
        return size

    async def read(self, blob_id: str) -> AsyncIterator[bytes]:
        """The contents in chunks, read off the event loop."""
        handle = await asyncio.to_thread(open, self.path(blob_id), "rb")
        try:
            while chunk := await asyncio.to_thread(handle.read, CHUNK_BYTES):
                yield chunk
        finally:
            handle.close()

    def exists(self, blob_id: str) -> bool:
        return self.path(blob_id).is_file()

    async def delete(self, blob_id: str) -> None:
        await asyncio.to_thread(self.path(blob_id).unlink, missing_ok=True)


def _close_synced(handle) -> None:
    handle.flush()
    os.fsync(handle.fileno())
    handle.close()
