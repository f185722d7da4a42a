"""The vector stores' objects as they cross the stores' edge (rostra/store/vector_store.py): frozen, typed models,
JSON only at the SQL boundary (`stored()`, `model_validate_json`) and on the wire (`wire()`: OpenAI's
VectorStoreObject, VectorStoreFileObject and VectorStoreFileBatchObject)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

_FROZEN = ConfigDict(frozen=True, extra="ignore")


class WireModel(BaseModel):
    """An object the vector stores API answers with: typed inside the server, a dict only at the wire."""

    model_config = _FROZEN

    def wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
FileStatus = Literal["in_progress", "completed", "cancelled", "failed"]
Attributes = dict[str, str | float | int | bool]
DAY = 24 * 3600


class FileCounts(BaseModel):
    model_config = _FROZEN

    in_progress: int = 0
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    total: int = 0


class ExpiresAfter(BaseModel):
    """OpenAI's expiration policy: `days` after the store was last active (created, searched, changed)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    anchor: Literal["last_active_at"]
    days: int


class StaticChunking(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    max_chunk_size_tokens: int = 800
    chunk_overlap_tokens: int = 400


class ChunkingStrategy(BaseModel):
    """OpenAI's static strategy, as a file shows it (`auto` is static 800/400)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["static"] = "static"
    static: StaticChunking = StaticChunking()


ErrorCode = Literal["server_error", "unsupported_file", "invalid_file"]


class LastError(BaseModel):
    model_config = _FROZEN

    code: ErrorCode
    message: str


class VectorStore(WireModel):
    model_config = _FROZEN

    id: str
    object: Literal["vector_store"] = "vector_store"
    created_at: int
    name: str = ""
    description: str | None = None
    usage_bytes: int = 0
    file_counts: FileCounts = FileCounts()
    status: Literal["expired", "in_progress", "completed"] = "completed"
    expires_after: ExpiresAfter | None = None
    expires_at: int | None = None
    last_active_at: int | None = None
    metadata: dict[str, str] = {}

    def stored(self) -> str:
        return self.model_dump_json()

    def active(self, at: int) -> VectorStore:
        """Touched at `at`: its expiry moves with it (an expired store stays expired)."""
        if self.expired(at):
            return self.model_copy(update={"status": "expired"})
        expires_at = None if self.expires_after is None else at + self.expires_after.days * DAY
        return self.model_copy(update={"last_active_at": at, "expires_at": expires_at})

    def expired(self, now: float | None = None) -> bool:
        """Expired by the sweep (rostra/store/vector_store.py: expire_stores), or due to be."""
        return self.status == "expired" or (
            self.expires_at is not None and self.expires_at <= (time.time() if now is None else now))

    def live(self, counts: FileCounts, usage_bytes: int, now: float | None = None) -> VectorStore:
        """As the wire shows it now: its files counted, its status from them and its expiry."""
        if self.expired(now):
            return self.model_copy(update={"file_counts": counts, "usage_bytes": 0, "status": "expired"})
        status = "in_progress" if counts.in_progress else "completed"
        return self.model_copy(update={"file_counts": counts, "usage_bytes": usage_bytes, "status": status})

    def wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True) | {"expires_at": self.expires_at,
                                                     "last_active_at": self.last_active_at}


class VectorStoreFile(WireModel):
    model_config = _FROZEN

    id: str  # the File's id
    object: Literal["vector_store.file"] = "vector_store.file"
    usage_bytes: int = 0
    created_at: int
    vector_store_id: str
    status: FileStatus = "in_progress"
    last_error: LastError | None = None
    chunking_strategy: ChunkingStrategy = ChunkingStrategy()
    attributes: Attributes | None = None
    # Not shown: the file batch that added it (its counts are its files'), and the File's name (search results').
    batch_id: str | None = None
    filename: str = ""

    def stored(self) -> str:
        return self.model_dump_json()

    def wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude={"batch_id", "filename"})


class FileBatch(WireModel):
    model_config = _FROZEN

    id: str
    object: Literal["vector_store.files_batch"] = "vector_store.files_batch"
    created_at: int
    vector_store_id: str
    status: FileStatus = "in_progress"
    file_counts: FileCounts = FileCounts()

    def stored(self) -> str:
        return self.model_dump_json()

    def live(self, counts: FileCounts) -> FileBatch:
        """Counted now; `in_progress` until none of its files is (`cancelled` stays)."""
        status = self.status
        if status == "in_progress" and not counts.in_progress:
            status = "failed" if counts.failed and not counts.completed else "completed"
        return self.model_copy(update={"file_counts": counts, "status": status})


@dataclass(frozen=True)
class StoredChunk:
    """One chunk of a file as indexed: its text and its embedding (float32 bytes, unit length)."""

    position: int
    text: str
    embedding: bytes


@dataclass(frozen=True)
class IndexRow:
    """A chunk as the search index reads it, with its file's name and attributes."""

    file_id: str
    filename: str
    position: int
    text: str
    embedding: bytes
    attributes: Attributes | None
