"""Images stored once: a stored item's data URLs (an `input_image`'s `image_url`, a Messages image turned into one)
are kept by their SHA-256 in a table of their own, and the item's row holds a reference in their place. A
`previous_response_id` chain or a conversation that repeats a 1 MB image keeps 1 MB, not 1 MB a turn.

The reference is a string no client string can be mistaken for: it starts with a NUL character, and a client's
own string that starts with one is kept with a second NUL in front (removed when read back), so what is read back
is exactly what was written. Only data URLs of at least MIN_BYTES are moved out; small ones stay where they are.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

MIN_BYTES = 1024
MARK = "\x00"
REFERENCE = MARK + "image:"
# What a stored body's text holds when it needs a look when read (orjson writes NUL as this escape).
STORED_MARK = "\\u0000"


@dataclass
class Split:
    """Items with their images replaced by references, and the images by their SHA-256."""

    items: list[Any]
    images: dict[str, str] = field(default_factory=dict)


def split_images(items: Iterable[Any]) -> Split:
    split = Split([])
    split.items = [_split(item, split.images) for item in items]
    return split


def _split(value: Any, images: dict[str, str]) -> Any:
    if isinstance(value, str):
        if value.startswith("data:") and len(value) >= MIN_BYTES:
            digest = hashlib.sha256(value.encode()).hexdigest()
            images[digest] = value
            return REFERENCE + digest
        return MARK + value if value.startswith(MARK) else value
    if isinstance(value, dict):
        return {key: _split(item, images) for key, item in value.items()}
    if isinstance(value, list):
        return [_split(item, images) for item in value]
    return value


def needs_joining(body: str) -> bool:
    """Whether a stored body may hold a reference or an escaped string (a quick look at its text)."""
    return STORED_MARK in body


def references(value: Any) -> set[str]:
    """The SHA-256s a stored (split) value refers to."""
    if isinstance(value, str):
        return {value[len(REFERENCE):]} if value.startswith(REFERENCE) else set()
    if isinstance(value, dict):
        return set().union(*(references(item) for item in value.values()))
    if isinstance(value, list):
        return set().union(*(references(item) for item in value))
    return set()


def join_images(value: Any, images: Mapping[str, str]) -> Any:
    """The value as it was before split_images, its images read from `images`."""
    if isinstance(value, str):
        if value.startswith(REFERENCE):
            return images[value[len(REFERENCE):]]
        return value[1:] if value.startswith(MARK) else value
    if isinstance(value, dict):
        return {key: join_images(item, images) for key, item in value.items()}
    if isinstance(value, list):
        return [join_images(item, images) for item in value]
    return value
