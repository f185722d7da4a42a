"""The per-key usage store on PostgreSQL (usage_store.py says what it keeps): replicas share the counts, so a key's
limits hold across them. Admission takes a transaction-scoped advisory lock on the key's tenant, so two replicas
admitting the same key at once read and write one after the other. Its own schema version (`rostra_usage_schema`)."""

from __future__ import annotations

from rostra.store.postgres_pool import PooledStore
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
    CREATE TABLE rostra_key_requests (
        id BIGSERIAL PRIMARY KEY, tenant TEXT NOT NULL, started_at DOUBLE PRECISION NOT NULL,
        finished_at DOUBLE PRECISION
    );
    CREATE INDEX rostra_key_requests_by_tenant ON rostra_key_requests (tenant, started_at);
    CREATE TABLE rostra_key_usage (
        tenant TEXT, key_name TEXT, model TEXT NOT NULL, at DOUBLE PRECISION NOT NULL, input_tokens BIGINT NOT NULL,
        cached_tokens BIGINT NOT NULL, output_tokens BIGINT NOT NULL, reasoning_tokens BIGINT NOT NULL,
        batch BOOLEAN NOT NULL
    );
    CREATE INDEX rostra_key_usage_by_tenant ON rostra_key_usage (tenant, at);
    CREATE INDEX rostra_key_usage_by_time ON rostra_key_usage (at);
    """,
]
SCHEMA_TABLE = "rostra_usage_schema"


class PostgresUsageStore(PooledStore, UsageStore):
    migrations, schema_table, what = MIGRATIONS, SCHEMA_TABLE, "usage store"

    async def admit(self, tenant: str, now: float, decide: Decide) -> tuple[KeyWindow, int | None]:
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", tenant)
            await conn.execute("DELETE FROM rostra_key_requests WHERE tenant = $1 AND started_at < $2",
                               tenant, now - DAY)
            requests = await conn.fetchrow(
                "SELECT COUNT(*) AS n, MIN(started_at) AS oldest FROM rostra_key_requests "
                "WHERE tenant = $1 AND started_at > $2", tenant, now - MINUTE)
            running = await conn.fetchval(
                "SELECT COUNT(*) FROM rostra_key_requests WHERE tenant = $1 AND finished_at IS NULL "
                "AND started_at > $2", tenant, now - STALE_AFTER)
            minute = await conn.fetchrow(
                "SELECT SUM(input_tokens + output_tokens) AS tokens, MIN(at) AS oldest FROM rostra_key_usage "
                "WHERE tenant = $1 AND at > $2", tenant, now - MINUTE)
            day = await conn.fetchval(
                "SELECT SUM(input_tokens + output_tokens) FROM rostra_key_usage WHERE tenant = $1 AND at >= $2",
                tenant, now - now % DAY)
            window = KeyWindow(now, requests["n"], requests["oldest"], running, int(minute["tokens"] or 0),
                               minute["oldest"], int(day or 0))
            if not decide(window):
                return window, None
            request_id = await conn.fetchval(
                "INSERT INTO rostra_key_requests (tenant, started_at) VALUES ($1, $2) RETURNING id", tenant, now)
            return window, request_id

    async def finish(self, request_id: int, now: float) -> None:
        await self.pool.execute("UPDATE rostra_key_requests SET finished_at = $1 WHERE id = $2", now, request_id)

    async def record(self, record: UsageRecord) -> None:
        await self.pool.execute(
            "INSERT INTO rostra_key_usage VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            record.tenant, record.key_name, record.model, record.at, record.input_tokens, record.cached_tokens,
            record.output_tokens, record.reasoning_tokens, record.batch)

    async def sums(self, query: UsageQuery) -> list[UsageSum]:
        where, params = "at >= $3 AND at < $4", list[object]([query.start, query.width, query.start, query.end])
        if query.tenant is not None:
            params.append(query.tenant)
            where += f" AND tenant = ${len(params)}"
        if query.models:
            params.append(list(query.models))
            where += f" AND model = ANY(${len(params)}::text[])"
        rows = await self.pool.fetch(
            "SELECT floor((at - $1) / $2)::bigint AS bucket, tenant, key_name, model, batch, "
            "SUM(input_tokens) AS inputs, SUM(cached_tokens) AS cached, SUM(output_tokens) AS outputs, "
            f"COUNT(*) AS n FROM rostra_key_usage WHERE {where} GROUP BY 1, 2, 3, 4, 5 ORDER BY 1", *params)
        return [UsageSum(row["bucket"], row["tenant"], row["key_name"], row["model"], row["batch"],
                         int(row["inputs"]), int(row["cached"]), int(row["outputs"]), row["n"]) for row in rows]
