"""What the two PostgreSQL stores (Responses: postgres.py; Files and Batches: batch_postgres.py) share: a pool
opened on a migrated schema, the database's clock, the condition for the rows a tenant may see, and listing
objects a page at a time.

Each store has its own list of migrations and its own version table, so the two schemas migrate apart in one
database.
"""

from __future__ import annotations

import json
from typing import Any

import asyncpg

from rostra.store.base import StoreError

NOW = "extract(epoch from clock_timestamp())"  # seconds, on the database server's clock
# Any constant: serialises migrations when several replicas start together.
MIGRATION_LOCK = 0x726F73747261


async def open_pool(dsn: str, pool_size: int, migrations: list[str], table: str, what: str) -> asyncpg.Pool:
    """A pool on `dsn` whose schema has every migration applied (`table` counts them); a StoreError naming `what`
    (e.g. "batch store") when the database cannot be reached or is newer than this rostra."""
    try:
        pool = await asyncpg.create_pool(dsn, min_size=1, max_size=pool_size)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise StoreError(f"cannot connect to the {what} at {redacted(dsn)}: {exc}") from exc
    try:
        async with pool.acquire() as conn:
            await migrate(conn, migrations, table, what)
    except BaseException:
        await pool.close()
        raise
    return pool


async def migrate(conn: asyncpg.Connection, migrations: list[str], table: str, what: str) -> None:
    """Apply the migrations not applied yet (`table` counts them: a fixed name, never a request's)."""
    # Under a transaction-scoped advisory lock: replicas starting together apply each migration once.
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
        await conn.execute(f"CREATE TABLE IF NOT EXISTS {table} (version INTEGER NOT NULL)")
        version = await conn.fetchval(f"SELECT version FROM {table}")
        if version is None:
            version = 0
            await conn.execute(f"INSERT INTO {table} (version) VALUES (0)")
        if version > len(migrations):
            raise StoreError(f"the {what} has schema version {version}, newer than "
                             f"this rostra knows ({len(migrations)})")
        for number in range(version + 1, len(migrations) + 1):
            await conn.execute(migrations[number - 1])  # a multi-statement script: simple protocol
            await conn.execute(f"UPDATE {table} SET version = $1", number)


class PooledStore:
    """A PostgreSQL store's pool, opened on its own migrated schema: what the batch, vector and usage stores share
    (the Responses store opens its own, with a listener beside it). Subclasses name their `migrations`, the table
    that counts them and what they are called in messages."""

    migrations: list[str]
    schema_table: str
    what: str

    def __init__(self, dsn: str, *, pool_size: int = 5):
        self.dsn, self.pool_size = dsn, pool_size
        self._pool: asyncpg.Pool | None = None

    @property
    def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise StoreError(f"the {self.what} is not open")
        return self._pool

    async def open(self) -> None:
        self._pool = await open_pool(self.dsn, self.pool_size, self.migrations, self.schema_table, self.what)

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()


def redacted(dsn: str) -> str:
    """The DSN without its password, for messages."""
    if "@" not in dsn or "://" not in dsn:
        return dsn
    scheme, rest = dsn.split("://", 1)
    credentials, host = rest.rsplit("@", 1)
    return f"{scheme}://{credentials.split(':', 1)[0]}:***@{host}"


def tenant_visible(first: int) -> str:
    """Rows a tenant may see, its Tenant.sql_params() the parameters numbered `first` and `first + 1`."""
    return f"(${first}::bool OR tenant IS NULL OR tenant = ${first + 1}::text)"


async def created_page(pool: asyncpg.Pool, table: str, where: str, params: list[Any], after: str | None, limit: int,
                       order: str, tiebreak: str, noun: str) -> tuple[list[dict], bool]:
    """One page of the JSON `body` of `table`'s rows that `where` selects (its parameters `params`, numbered from
    $1), as OpenAI's list endpoints page objects: by created_at, then `tiebreak` (the order rows were made in,
    within one second too), after the object whose id is `after` (a StoreError naming the `noun` when it is not
    one of them); (bodies, has_more). Table, condition, column and direction are fixed strings, never a request's."""
    compare, direction = (">", "ASC") if order == "asc" else ("<", "DESC")
    async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):  # one snapshot
        if after is not None:
            row = await conn.fetchrow(f"SELECT created_at, {tiebreak} FROM {table} WHERE {where} "
                                      f"AND id = ${len(params) + 1}", *params, after)
            if row is None:
                raise StoreError(f"no {noun} {after!r} to list after")
            params = [*params, row["created_at"], row[tiebreak]]
            where = f"{where} AND (created_at, {tiebreak}) {compare} (${len(params) - 1}, ${len(params)})"
        rows = await conn.fetch(f"SELECT body FROM {table} WHERE {where} ORDER BY created_at {direction}, "
                                f"{tiebreak} {direction} LIMIT ${len(params) + 1}", *params, limit + 1)
    return [json.loads(row["body"]) for row in rows[:limit]], len(rows) > limit
