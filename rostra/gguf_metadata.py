"""Read the key/value metadata of a GGUF file (tokenizer, chat template, context length).

Only the header is parsed, never the tensors, so this takes milliseconds where a full
GGUF reader maps and indexes every tensor. Format: magic "GGUF", version, tensor count,
KV count, then KV pairs of (string key, u32 value type, value).
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any, BinaryIO

# GGUF value type ids -> struct format of one scalar (strings and arrays are handled apart).
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


class GGUFError(ValueError):
    pass


def _read(f: BinaryIO, fmt: str) -> Any:
    size = struct.calcsize("<" + fmt)
    data = f.read(size)
    if len(data) != size:
        raise GGUFError("truncated GGUF header")
    return struct.unpack("<" + fmt, data)[0]


def _read_string(f: BinaryIO) -> str:
    length = _read(f, "Q")
    return f.read(length).decode("utf-8", errors="replace")


def _read_value(f: BinaryIO, value_type: int) -> Any:
    if value_type in _SCALARS:
        return _read(f, _SCALARS[value_type])
    if value_type == _STRING:
        return _read_string(f)
    if value_type == _ARRAY:
        item_type, count = _read(f, "I"), _read(f, "Q")
        if item_type in _SCALARS:  # one read for the whole array
            fmt = _SCALARS[item_type]
            data = f.read(struct.calcsize(fmt) * count)
            return list(struct.unpack(f"<{count}{fmt}", data))
        return [_read_value(f, item_type) for _ in range(count)]
    raise GGUFError(f"unknown GGUF value type {value_type}")


def read_gguf_metadata(path: str | Path) -> dict[str, Any]:
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise GGUFError(f"{path} is not a GGUF file")
        version = _read(f, "I")
        if version < 2:
            raise GGUFError(f"GGUF version {version} is not supported")
        _read(f, "Q")  # tensor count
        kv_count = _read(f, "Q")
        metadata: dict[str, Any] = {}
        for _ in range(kv_count):
            key = _read_string(f)
            metadata[key] = _read_value(f, _read(f, "I"))
        return metadata


def context_length(metadata: dict[str, Any]) -> int | None:
    arch = metadata.get("general.architecture", "")
    value = metadata.get(f"{arch}.context_length")
    return int(value) if value else None
