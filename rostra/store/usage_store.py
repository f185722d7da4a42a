"""What each API key used, kept in the store so that limits and the usage API hold across replicas.

Two kinds of rows. A *request* row per admitted request of a key that has limits (when it started, whether it has
finished): requests per minute and requests running at once are counted from them. A *usage* row per model turn
that finished (the key's tenant and name, the model, its input, cached, output and reasoning tokens): tokens per
minute, tokens per day and `GET /v1/organization/usage/completions` are sums over them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

DAY = 86400
MINUTE = 60
# A request row still open this long after it started counts as gone (its replica died without closing it).
STALE_AFTER = 3600.0


@dataclass(frozen=True)
class UsageRecord:
    tenant: str | None  # the key's fingerprint (rostra/store/tenancy.py), None on a server without keys
    key_name: str | None
    model: str
    at: float
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    reasoning_tokens: int = 0
    batch: bool = False

    @property
    def api_key_id(self) -> str | None:
        return api_key_id(self.tenant, self.key_name)


def api_key_id(tenant: str | None, key_name: str | None) -> str | None:
    """How the usage API names a key: its name, else a stable id from its fingerprint (never the key)."""
    if key_name is not None:
        return key_name
    return None if tenant is None else "key_" + tenant.removeprefix("sha256:")[:16]


@dataclass(frozen=True)
class KeyWindow:
    """What one key has used, as admission reads it at `now`."""

    now: float
    requests_last_minute: int
    oldest_request_at: float | None  # the first of those requests
    running: int
    tokens_last_minute: int
    oldest_tokens_at: float | None
    tokens_today: int


# Admission's decision, run inside the store's transaction: True admits (a request row is then written).
Decide = Callable[[KeyWindow], bool]


@dataclass(frozen=True)
class UsageQuery:
    start: int
    end: int
    width: int  # seconds per bucket
    tenant: str | None = None  # only this key's rows; None: every key's
    models: tuple[str, ...] = ()


@dataclass(frozen=True)
class UsageSum:
    """One group's sums within one bucket (bucket: its index from the query's start)."""

    bucket: int
    tenant: str | None
    key_name: str | None
    model: str
    batch: bool
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    requests: int


class UsageStore(ABC):
    @abstractmethod
    async def open(self) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...

    @abstractmethod
    async def admit(self, tenant: str, now: float, decide: Decide) -> tuple[KeyWindow, int | None]:
        """Read the key's window and, in the same transaction, record a request if `decide` admits it:
        (the window, the request row's id, or None when refused)."""

    @abstractmethod
    async def finish(self, request_id: int, now: float) -> None:
        """The request ended: it no longer counts as running."""

    @abstractmethod
    async def record(self, record: UsageRecord) -> None: ...

    @abstractmethod
    async def sums(self, query: UsageQuery) -> list[UsageSum]:
        """The usage rows in [start, end), summed per bucket, key, model and batch."""
