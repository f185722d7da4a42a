"""API keys and what each may use (`--api-key-file`).

The file is either one key per line (every key unlimited, as before) or a YAML list of keys, each a mapping:

    - key: sk-team-a
      name: team-a          # what logs, metrics and the usage API call it (never the key itself)
      rpm: 60               # requests per minute
      tpm: 100000           # tokens (input + output) per minute
      max_concurrent: 4     # requests running at once
      daily_tokens: 2000000 # tokens per UTC day
      batch_daily_tokens: 5000000  # tokens per UTC day of the key's batch lines (their own budget)
      priority: true        # may send `priority` under --restrict-priority

Every limit is optional. Limits count the requests that run a model (rostra/http/key_limits.py says which); batch
lines count only against `batch_daily_tokens` (rostra/api/batches/budget.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

ONLINE_LIMITS = ("rpm", "tpm", "max_concurrent", "daily_tokens")
LIMIT_NAMES = (*ONLINE_LIMITS, "batch_daily_tokens")


@dataclass(frozen=True)
class KeyLimits:
    rpm: int | None = None
    tpm: int | None = None
    max_concurrent: int | None = None
    daily_tokens: int | None = None
    batch_daily_tokens: int | None = None

    @property
    def any(self) -> bool:
        """Whether online requests are limited (batch lines have their own budget)."""
        return any(getattr(self, name) is not None for name in ONLINE_LIMITS)


@dataclass(frozen=True)
class ApiKey:
    key: str = field(repr=False)  # never printed
    name: str | None = None
    limits: KeyLimits = KeyLimits()
    priority: bool = False  # may set `priority` under --restrict-priority


def read_key_file(text: str, source: str = "--api-key-file") -> list[ApiKey]:
    """The keys a key file holds; a ValueError naming the entry that is wrong."""
    stripped = text.lstrip()
    if not stripped.startswith(("-", "[")):  # one key per line: the plain format
        return [ApiKey(line.strip()) for line in text.splitlines() if line.strip()]
    try:
        entries = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"{source}: not a YAML list of keys: {exc}") from None
    if not isinstance(entries, list):
        raise ValueError(f"{source}: expected a YAML list of keys")
    keys = [_entry(entry, f"{source}: entry {number}") for number, entry in enumerate(entries, 1)]
    names = [key.name for key in keys if key.name is not None]
    if len(set(names)) != len(names):
        raise ValueError(f"{source}: two keys share a name")
    return keys


def _entry(entry: Any, where: str) -> ApiKey:
    if isinstance(entry, str):
        return ApiKey(entry.strip())
    if not isinstance(entry, dict) or not isinstance(entry.get("key"), str) or not entry["key"].strip():
        raise ValueError(f"{where}: expected a mapping with a non-empty `key`")
    unknown = set(entry) - {"key", "name", "priority", *LIMIT_NAMES}
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {', '.join(sorted(unknown))} "
                         f"(known: key, name, priority, {', '.join(LIMIT_NAMES)})")
    limits: dict[str, int | None] = {}
    for name in LIMIT_NAMES:
        value = entry.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"{where}: `{name}` must be a positive integer")
        limits[name] = value
    label = entry.get("name")
    if label is not None and (not isinstance(label, str) or not label.strip()):
        raise ValueError(f"{where}: `name` must be a non-empty string")
    if not isinstance(entry.get("priority", False), bool):
        raise ValueError(f"{where}: `priority` must be true or false")
    return ApiKey(entry["key"].strip(), label.strip() if label else None, KeyLimits(**limits),
                  entry.get("priority", False))
