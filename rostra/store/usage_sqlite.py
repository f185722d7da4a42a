"""The per-key usage store on SQLite (usage_store.py says what it keeps): its own file beside the other stores
(`usage.sqlite3`), one connection on one worker thread. Admission reads and writes in one IMMEDIATE transaction,
so two processes sharing the file cannot both take a key's last request of the minute."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from rostra.store.sqlite_connection import ConnectionThread, transaction
from rostra.store.usage_store import (
    DAY,
    MINUTE,
    STALE_AFTER,
    Decide,
    KeyWindow,
    UsageQuery,
    UsageRecord,
    UsageStore,
    UsageSum,
)

MIGRATIONS: list[str] = [
    """
    CREATE TABLE key_requests (id INTEGER PRIMARY KEY, tenant TEXT NOT NULL, started_at REAL NOT NULL,
                               finished_at REAL);
    CREATE INDEX key_requests_by_tenant ON key_requests(tenant, started_at);
    CREATE TABLE key_usage (
        tenant TEXT, key_name TEXT, model TEXT NOT NULL, at REAL NOT NULL, input_tokens INTEGER NOT NULL,
        cached_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL, reasoning_tokens INTEGER NOT NULL,
        batch INTEGER NOT NULL
    );
    CREATE INDEX key_usage_by_tenant ON key_usage(tenant, at);
    CREATE INDEX key_usage_by_time ON key_usage(at);
    """,
]
STORE_FILENAME = "usage.sqlite3"


class SqliteUsageStore(UsageStore):
    def __init__(self, path: str | Path):
        self._thread = ConnectionThread(Path(path), MIGRATIONS, "usage store", "rostra-usage-store")

    async def open(self) -> None:
        await self._thread.open()

    async def close(self) -> None:
        await self._thread.close()

    async def admit(self, tenant: str, now: float, decide: Decide) -> tuple[KeyWindow, int | None]:
        return await self._thread.run(_admit, tenant, now, decide)

    async def finish(self, request_id: int, now: float) -> None:
        await self._thread.run(lambda conn: conn.execute(
            "UPDATE key_requests SET finished_at = ? WHERE id = ?", (now, request_id)))

    async def record(self, record: UsageRecord) -> None:
        await self._thread.run(lambda conn: conn.execute(
            "INSERT INTO key_usage VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (record.tenant, record.key_name, record.model, record.at, record.input_tokens, record.cached_tokens,
             record.output_tokens, record.reasoning_tokens, int(record.batch))))

    async def sums(self, query: UsageQuery) -> list[UsageSum]:
        return await self._thread.run(_sums, query)


def _admit(conn: sqlite3.Connection, tenant: str, now: float, decide: Decide) -> tuple[KeyWindow, int | None]:
    with transaction(conn):
        # Rows older than a day count for nothing any more.
        conn.execute("DELETE FROM key_requests WHERE tenant = ? AND started_at < ?", (tenant, now - DAY))
        requests, oldest_request = conn.execute(
            "SELECT COUNT(*), MIN(started_at) FROM key_requests WHERE tenant = ? AND started_at > ?",
            (tenant, now - MINUTE)).fetchone()
        (running,) = conn.execute(
            "SELECT COUNT(*) FROM key_requests WHERE tenant = ? AND finished_at IS NULL AND started_at > ?",
            (tenant, now - STALE_AFTER)).fetchone()
        minute_tokens, oldest_tokens = conn.execute(
            "SELECT SUM(input_tokens + output_tokens), MIN(at) FROM key_usage WHERE tenant = ? AND at > ?",
            (tenant, now - MINUTE)).fetchone()
        (day_tokens,) = conn.execute(
            "SELECT SUM(input_tokens + output_tokens) FROM key_usage WHERE tenant = ? AND at >= ?",
            (tenant, now - now % DAY)).fetchone()
        window = KeyWindow(now, requests, oldest_request, running, minute_tokens or 0, oldest_tokens,
                           day_tokens or 0)
        if not decide(window):
            return window, None
        cursor = conn.execute("INSERT INTO key_requests (tenant, started_at) VALUES (?, ?)", (tenant, now))
        return window, cursor.lastrowid


def _sums(conn: sqlite3.Connection, query: UsageQuery) -> list[UsageSum]:
    where, params = "at >= ? AND at < ?", list[object]([query.start, query.end])
    if query.tenant is not None:
        where += " AND tenant = ?"
        params.append(query.tenant)
    if query.models:
        where += f" AND model IN ({', '.join('?' * len(query.models))})"
        params.extend(query.models)
    rows = conn.execute(
        "SELECT CAST((at - ?) / ? AS INTEGER) AS bucket, tenant, key_name, model, batch, SUM(input_tokens), "
        f"SUM(cached_tokens), SUM(output_tokens), COUNT(*) FROM key_usage WHERE {where} "
        "GROUP BY bucket, tenant, key_name, model, batch ORDER BY bucket",
        (query.start, query.width, *params)).fetchall()
    return [UsageSum(bucket, tenant, key_name, model, bool(batch), int(inputs), int(cached), int(outputs), count)
            for bucket, tenant, key_name, model, batch, inputs, cached, outputs, count in rows]
