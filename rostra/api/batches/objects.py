"""OpenAI's file and batch objects, and the lines of a batch's output and error files."""

from __future__ import annotations

from typing import Any

import secrets
import time
from dataclasses import dataclass

from rostra.store.batch_store import FINAL_STATUSES, LineCounts

__all__ = ["FINAL_STATUSES"]  # the store's, where a final batch is never rewritten

# The endpoints a batch may name, and the route each line then takes.
ENDPOINTS = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses", "/v1/messages")
FILE_PURPOSES = ("batch", "user_data")
# expires_after's bounds in seconds, as OpenAI's (an hour to 30 days; the least is a setting, --min-file-expiry)
MIN_EXPIRY, MAX_EXPIRY = 3600, 30 * 24 * 3600
# The batch's output_expires_after, kept in the stored batch for its finalizer but not in the object shown: OpenAI's
# batch object has no such field.
OUTPUT_EXPIRY = "output_expires_after"


def shown_batch(batch: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in batch.items() if key != OUTPUT_EXPIRY}


def new_id(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(12)}"


def file_object(file_id: str, filename: str, purpose: str, size: int, expires_at: int | None = None,
                created_at: int | None = None) -> dict[str, Any]:
    created_at = int(time.time()) if created_at is None else created_at
    return {"id": file_id, "object": "file", "bytes": size, "created_at": created_at, "filename": filename,
            "purpose": purpose, "status": "processed", "expires_at": expires_at, "status_details": None}


def batch_object(input_file_id: str, endpoint: str, metadata: dict[str, Any] | None, window_seconds: int) -> dict[str, Any]:
    now = int(time.time())
    return {"id": new_id("batch_"), "object": "batch", "endpoint": endpoint, "errors": None,
            "input_file_id": input_file_id, "completion_window": "24h", "status": "validating",
            "output_file_id": None, "error_file_id": None, "created_at": now, "in_progress_at": None,
            "expires_at": now + window_seconds, "finalizing_at": None, "completed_at": None, "failed_at": None,
            "expired_at": None, "cancelling_at": None, "cancelled_at": None,
            "request_counts": {"total": 0, "completed": 0, "failed": 0}, "metadata": metadata, "model": None}


def with_counts(batch: dict[str, Any], counts: LineCounts) -> dict[str, Any]:
    return {**batch, "request_counts": {"total": counts.total, "completed": counts.completed,
                                        "failed": counts.failed}}


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
