"""What the SQL stores share: how JSON values are written, and the tables of ordered items."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import orjson


def dumps(value: Any) -> str:
    """JSON as the stores keep it: compact, non-ASCII kept as is. orjson, as for the SSE frames: a
    stored stream writes every event, ~10x faster than the standard library (which takes the rare
    value orjson refuses, an integer over 64 bits); NaN and infinities, not JSON, become null."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class ItemTable:
    """A table of ordered items that belong to an owner (a response's input, a conversation)."""

    owners: str  # the owners' table
    items: str
    owner_column: str
    owner_name: str  # for error messages
