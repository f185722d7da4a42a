"""OpenAI's file and batch objects, and the lines of a batch's output and error files."""

from __future__ import annotations

from typing import Any

import secrets
import time
from dataclasses import dataclass

from rostra.store.batch_objects import FINAL_STATUSES, Batch, FileObject

__all__ = ["FINAL_STATUSES"]  # the store's, where a final batch is never rewritten

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


def answered_line(custom_id: str, status_code: int, request_id: str, body: object) -> dict[str, Any]:
    """A line of the output file (2xx) or the error file (any other status), as OpenAI writes them."""
    return {"id": new_id("batch_req_"), "custom_id": custom_id,
            "response": {"status_code": status_code, "request_id": request_id, "body": body}, "error": None}


def refused_line(custom_id: str | None, error: LineError) -> dict[str, Any]:
    """A line of the error file for an input line that was not run (invalid JSON, wrong url, ...)."""
    return {"id": new_id("batch_req_"), "custom_id": custom_id, "response": None,
            "error": {"code": error.code, "message": error.message}}
