"""The usage API's query and its pages of buckets, from the store's sums."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from rostra.errors import InvalidRequest
from rostra.store.usage_store import UsageQuery, UsageSum, api_key_id

WIDTHS = {"1m": 60, "1h": 3600, "1d": 86400}
# Buckets per page: (default, most), per width, as OpenAI's API pages them.
PAGE_SIZES = {"1m": (60, 1440), "1h": (24, 168), "1d": (7, 31)}
GROUPS = ("project_id", "user_id", "api_key_id", "model", "batch", "service_tier")


@dataclass(frozen=True)
class UsageRequest:
    start_time: int
    end_time: int
    bucket_width: str
    group_by: tuple[str, ...]
    api_key_ids: tuple[str, ...]
    models: tuple[str, ...]
    batch: bool | None
    limit: int

    @classmethod
    def parse(cls, params: dict[str, list[str]], now: float | None = None) -> UsageRequest:
        """From the query string; arrays as `name=a&name=b` or `name[]=a`. `page` is a bucket's start time."""
        def one(name: str) -> str | None:
            values = params.get(name) or []
            return values[-1] if values else None

        def many(name: str) -> tuple[str, ...]:
            return tuple(params.get(name, []) + params.get(f"{name}[]", []))

        width = one("bucket_width") or "1d"
        if width not in WIDTHS:
            raise InvalidRequest("bucket_width must be one of 1m, 1h, 1d", param="bucket_width")
        start = _integer(one("page") or one("start_time"), "start_time")
        if start is None:
            raise InvalidRequest("start_time is required (Unix seconds)", param="start_time")
        end = _integer(one("end_time"), "end_time") or int(now if now is not None else time.time()) + 1
        default, most = PAGE_SIZES[width]
        limit = _integer(one("limit"), "limit") or default
        if not 1 <= limit <= most:
            raise InvalidRequest(f"limit must be between 1 and {most} for bucket_width {width}", param="limit")
        group_by = many("group_by")
        if unknown := [group for group in group_by if group not in GROUPS]:
            raise InvalidRequest(f"group_by: unknown field {unknown[0]!r} (known: {', '.join(GROUPS)})",
                                 param="group_by")
        batch = one("batch")
        if batch not in (None, "true", "false"):
            raise InvalidRequest("batch must be true or false", param="batch")
        return cls(start, end, width, group_by, many("api_key_ids"), many("models"),
                   None if batch is None else batch == "true", limit)

    def query(self, tenant: str | None) -> UsageQuery:
        width = WIDTHS[self.bucket_width]
        page_end = min(self.end_time, self.start_time + width * self.limit)
        return UsageQuery(self.start_time, page_end, width, tenant, self.models)


def _integer(text: str | None, name: str) -> int | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise InvalidRequest(f"{name} must be an integer", param=name) from None


def usage_page(request: UsageRequest, sums: list[UsageSum]) -> dict[str, Any]:
    """OpenAI's UsageResponse: every bucket of the page (empty ones too), each with one result per group."""
    width = WIDTHS[request.bucket_width]
    page_end = min(request.end_time, request.start_time + width * request.limit)
    buckets = []
    for index, start in enumerate(range(request.start_time, page_end, width)):
        rows = [row for row in sums if row.bucket == index and _kept(request, row)]
        buckets.append({"object": "bucket", "start_time": start, "end_time": min(start + width, request.end_time),
                        "results": _results(request, rows)})
    more = page_end < request.end_time
    return {"object": "page", "data": buckets, "has_more": more, "next_page": str(page_end) if more else None}


def _kept(request: UsageRequest, row: UsageSum) -> bool:
    if request.batch is not None and row.batch != request.batch:
        return False
    return not request.api_key_ids or api_key_id(row.tenant, row.key_name) in request.api_key_ids


def _results(request: UsageRequest, rows: list[UsageSum]) -> list[dict[str, Any]]:
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        labels = {"api_key_id": api_key_id(row.tenant, row.key_name), "model": row.model, "batch": row.batch}
        key = tuple(labels[name] if name in request.group_by else None for name in labels)
        result = groups.setdefault(key, {
            "object": "organization.usage.completions.result", "input_tokens": 0, "input_cached_tokens": 0,
            "output_tokens": 0, "input_audio_tokens": 0, "output_audio_tokens": 0, "num_model_requests": 0,
            "project_id": None, "user_id": None, "service_tier": None,
            **{name: labels[name] if name in request.group_by else None for name in labels}})
        result["input_tokens"] += row.input_tokens
        result["input_cached_tokens"] += row.cached_tokens
        result["output_tokens"] += row.output_tokens
        result["num_model_requests"] += row.requests
    return list(groups.values())
