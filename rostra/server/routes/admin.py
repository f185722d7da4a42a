"""Store maintenance under /admin (only the admin keys open it)."""

from __future__ import annotations

import time

from fastapi import APIRouter, Request

from rostra.errors import InvalidRequest
from rostra.server.context import server_context

router = APIRouter()
MAX_DAYS = 100_000  # some 270 years: any real age fits, and the cutoff stays a valid timestamp


@router.delete("/admin/responses")
async def purge_responses(request: Request, older_than_days: float):
    """Drop finished responses older than N days."""
    if not 0 <= older_than_days <= MAX_DAYS:  # also refuses nan and inf, which no date can be
        raise InvalidRequest(f"older_than_days must be a number from 0 to {MAX_DAYS}", param="older_than_days")
    deleted = await server_context(request).store.delete_finished_before(int(time.time() - older_than_days * 86400))
    return {"object": "purge", "deleted": deleted}
