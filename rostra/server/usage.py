"""Where per-key usage is kept: PostgreSQL when `--store` names it (replicas share limits), else SQLite beside the
other stores."""

from __future__ import annotations

from rostra.config import Settings
from rostra.server.batches import batches_dir
from rostra.store import POSTGRES_SCHEMES
from rostra.store.base import ResponseStore
from rostra.store.usage_sqlite import STORE_FILENAME, SqliteUsageStore
from rostra.store.usage_store import UsageStore


def open_usage_store(settings: Settings, responses: ResponseStore) -> UsageStore:
    """Not opened yet."""
    if settings.store and settings.store.startswith(POSTGRES_SCHEMES):
        from rostra.store.usage_postgres import PostgresUsageStore  # asyncpg only where it is used

        return PostgresUsageStore(settings.store)
    return SqliteUsageStore(batches_dir(settings, responses) / STORE_FILENAME)
