"""`GET /v1/organization/usage/completions` (rostra/api/usage/__init__.py says who sees what)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from rostra.api.usage.report import UsageRequest, usage_page
from rostra.errors import ServiceUnavailable
from rostra.http.caller import ANONYMOUS
from rostra.store.usage_store import UsageStore

router = APIRouter()


@router.get("/v1/organization/usage/completions")
async def completions_usage(request: Request) -> dict[str, Any]:
    store = getattr(request.app.state, "usage", None)
    if not isinstance(store, UsageStore):
        raise ServiceUnavailable("this server keeps no usage")
    params: dict[str, list[str]] = {}
    for name, value in request.query_params.multi_items():
        params.setdefault(name, []).append(value)
    query = UsageRequest.parse(params)
    caller = request.scope.get("state", {}).get("caller", ANONYMOUS)
    # An admin key, or a server without keys, reads every key's usage; any other key its own.
    everyone = caller.admin or caller.tenant is None
    return usage_page(query, await store.sums(query.query(None if everyone else caller.tenant)))
