"""The JSON objects the Responses wing makes: their ids, and copies of them as they are now."""

from __future__ import annotations

import secrets
from typing import Any


def new_id(prefix: str) -> str:
    """A prefix that says what the object is, then 32 random hex digits."""
    return f"{prefix}_{secrets.token_hex(16)}"


def snapshot(value: Any) -> Any:
    """A copy of the state as it is now (later events must not change an event already sent)."""
    if isinstance(value, dict):
        return {key: snapshot(item) for key, item in value.items()}
    if isinstance(value, list):
        return [snapshot(item) for item in value]
    return value
