"""The Files and Batch APIs' objects as they cross the stores' edge: frozen, typed models, JSON only at the SQL
boundary (`stored()`, `model_validate_json`) and on the wire (api/batches/routes.py's `present`, OpenAI's
`OpenAIFile` and `Batch`)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, field_validator

BatchStatus = Literal["validating", "failed", "in_progress", "finalizing", "completed", "expired", "cancelling",
                      "cancelled"]
FinalStatus = Literal["completed", "failed", "expired", "cancelled"]
FINAL_STATUSES: tuple[FinalStatus, ...] = ("completed", "failed", "expired", "cancelled")

# Rows are read leniently (a field a later version adds is ignored by an earlier one); objects are never changed in
# place: a new state is a copy (`model_copy(update=...)`, through the methods below).
_FROZEN = ConfigDict(frozen=True, extra="ignore")


class FileObject(BaseModel):
    model_config = _FROZEN

    id: str
    object: Literal["file"] = "file"
    bytes: int
    created_at: int
    filename: str
    purpose: str
    status: str = "processed"
    expires_at: int | None = None
    status_details: str | None = None

    def stored(self) -> str:
        return self.model_dump_json()


class RequestCounts(BaseModel):
    model_config = _FROZEN

    total: int = 0
    completed: int = 0
    failed: int = 0


class BatchError(BaseModel):
    """Why a whole batch failed (OpenAI's `errors.data[]`)."""

    model_config = _FROZEN

    code: str
    message: str
    param: str | None = None
    line: int | None = None


class BatchErrors(BaseModel):
    model_config = _FROZEN

    object: Literal["list"] = "list"
    data: tuple[BatchError, ...] = ()


class Batch(BaseModel):
    """OpenAI's batch object, and what its finalizer needs that OpenAI's object does not show."""

    model_config = _FROZEN

    id: str
    object: Literal["batch"] = "batch"
    endpoint: str
    errors: BatchErrors | None = None
    input_file_id: str
    completion_window: str = "24h"
    status: BatchStatus
    output_file_id: str | None = None
    error_file_id: str | None = None
    created_at: int
    in_progress_at: int | None = None
    expires_at: int
    finalizing_at: int | None = None
    completed_at: int | None = None
    failed_at: int | None = None
    expired_at: int | None = None
    cancelling_at: int | None = None
    cancelled_at: int | None = None
    request_counts: RequestCounts = RequestCounts()
    metadata: dict[str, str] | None = None
    model: str | None = None
    # Not shown (OpenAI's batch object has no such field): the seconds its output files live (output_expires_after).
    output_expires_after: int | None = None
    HIDDEN: ClassVar[frozenset[str]] = frozenset({"output_expires_after"})  # what the wire object leaves out

    @field_validator("output_expires_after", mode="before")
    @classmethod
    def _seconds(cls, value: Any) -> Any:
        """Rows written before this model kept `{"anchor": "created_at", "seconds": N}`."""
        return value.get("seconds") if isinstance(value, dict) else value

    def stored(self) -> str:
        return self.model_dump_json()

    def moved(self, status: BatchStatus, at: int, **changes: Any) -> Batch:
        """The batch in `status` from `at` (its `<status>_at`), with `changes` (fields of this model)."""
        return self.model_copy(update={**changes, "status": status, f"{status}_at": at})

    def counted(self, total: int, completed: int, failed: int) -> Batch:
        return self.model_copy(update={"request_counts": RequestCounts(total=total, completed=completed,
                                                                       failed=failed)})
