"""Store maintenance under /admin (only the admin keys open it)."""

from __future__ import annotations

import time

from fastapi import APIRouter, Request

from rostra.errors import InvalidRequest
from rostra.server.context import server_context

router = APIRouter()


@router.delete("/admin/responses")
async def purge_responses(request: Request, older_than_days: float):
    """Drop finished responses older than N days."""
    if older_than_days < 0:
        raise InvalidRequest("older_than_days must not be negative", param="older_than_days")
    deleted = await server_context(request).store.delete_finished_before(int(time.time() - older_than_days * 86400))
    return {"object": "purge", "deleted": deleted}
