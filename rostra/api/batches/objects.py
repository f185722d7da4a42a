"""OpenAI's file and batch objects, and the lines of a batch's output and error files."""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from rostra.store.batch_objects import FINAL_STATUSES, Batch, FileObject
from rostra.store.tables import dumps

__all__ = ["FINAL_STATUSES"]  # the store's, where a final batch is never rewritten

_FROZEN = ConfigDict(frozen=True)

# The endpoints a batch may name, and the route each line then takes.
ENDPOINTS = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses", "/v1/messages")
FILE_PURPOSES = ("batch", "user_data", "vision")  # vision: images a Responses input_image names by file_id
# expires_after's bounds in seconds, as OpenAI's (an hour to 30 days; the least is a setting, --min-file-expiry)
MIN_EXPIRY, MAX_EXPIRY = 3600, 30 * 24 * 3600


def new_id(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(12)}"


def file_object(file_id: str, filename: str, purpose: str, size: int, expires_at: int | None = None,
                created_at: int | None = None) -> FileObject:
    created_at = int(time.time()) if created_at is None else created_at
    return FileObject(id=file_id, bytes=size, created_at=created_at, filename=filename, purpose=purpose,
                      expires_at=expires_at)


def batch_object(input_file_id: str, endpoint: str, metadata: dict[str, str] | None, window_seconds: int,
                 output_expires_after: int | None = None) -> Batch:
    now = int(time.time())
    return Batch(id=new_id("batch_"), endpoint=endpoint, input_file_id=input_file_id, status="validating",
                 created_at=now, expires_at=now + window_seconds, metadata=metadata,
                 output_expires_after=output_expires_after)


@dataclass(frozen=True)
class LineError:
    """Why a line of the input file was not run (it goes to the error file with this code)."""

    code: str
    message: str


class LineResponse(BaseModel):
    model_config = _FROZEN

    status_code: int
    request_id: str
    body: Any  # the endpoint's own JSON answer (or its error envelope), as it was sent


class LineFailure(BaseModel):
    model_config = _FROZEN

    code: str
    message: str


class OutputLine(BaseModel):
    """A line of a batch's output file (a 2xx answer) or error file (any other answer, or a line never run), as
    OpenAI writes them: `response` or `error`, the other null."""

    model_config = _FROZEN

    id: str
    custom_id: str | None
    response: LineResponse | None = None
    error: LineFailure | None = None

    def jsonl(self) -> str:
        """The line as the file holds it (JSON at the SQL and file boundary only)."""
        return dumps(self.model_dump())


def answered_line(custom_id: str, status_code: int, request_id: str, body: object) -> OutputLine:
    """A line of the output file (2xx) or the error file (any other status)."""
    return OutputLine(id=new_id("batch_req_"), custom_id=custom_id,
                      response=LineResponse(status_code=status_code, request_id=request_id, body=body))


def refused_line(custom_id: str | None, error: LineError) -> OutputLine:
    """A line of the error file for an input line that was not run (invalid JSON, wrong url, ...)."""
    return OutputLine(id=new_id("batch_req_"), custom_id=custom_id,
                      error=LineFailure(code=error.code, message=error.message))


class FileList(BaseModel):
    """A page of `/v1/files`."""

    model_config = _FROZEN

    object: Literal["list"] = "list"
    data: tuple[FileObject, ...]
    first_id: str | None
    last_id: str | None
    has_more: bool

    @classmethod
    def of(cls, files: Sequence[FileObject], has_more: bool) -> FileList:
        return cls(data=tuple(files), first_id=files[0].id if files else None,
                   last_id=files[-1].id if files else None, has_more=has_more)


class BatchList(BaseModel):
    """A page of `/v1/batches`."""

    model_config = _FROZEN

    object: Literal["list"] = "list"
    data: tuple[Batch, ...]
    first_id: str | None
    last_id: str | None
    has_more: bool

    @classmethod
    def of(cls, batches: Sequence[Batch], has_more: bool) -> BatchList:
        return cls(data=tuple(batches), first_id=batches[0].id if batches else None,
                   last_id=batches[-1].id if batches else None, has_more=has_more)


class FileDeleted(BaseModel):
    model_config = _FROZEN

    id: str
    object: Literal["file"] = "file"
    deleted: bool = True
