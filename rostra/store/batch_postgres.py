"""The Files and Batch APIs' store on PostgreSQL (batch_store.py says what it keeps), with the files' contents in
the database too (`PostgresBlobs`): replicas on different machines share files and batches.

Leases are taken with `FOR UPDATE SKIP LOCKED` (two replicas never take the same chunk) and their times come from
the database's clock, as the Responses store's do. Its own schema version (`rostra_batch_schema`), so the Files and
Batch tables migrate apart from the Responses tables in the same database.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from rostra.store.batch_store import (
    ANY_MODEL,
    FINAL_STATUSES,
    Batch,
    BatchLine,
    BatchStore,
    ChunkClaim,
    FileObject,
    LineCounts,
    LineResult,
    PendingLine,
    WorkFilter,
)
from rostra.store.blobs import Blobs, too_large
from rostra.store.postgres_pool import NOW, PooledStore, created_page, tenant_visible
from rostra.store.tenancy import EVERYONE, Tenant

MIGRATIONS: list[str] = [
    """
    CREATE TABLE rostra_files (
        id TEXT PRIMARY KEY, tenant TEXT, created_at BIGINT, purpose TEXT, expires_at BIGINT, body TEXT NOT NULL,
        seq BIGSERIAL
    );
    CREATE INDEX rostra_files_by_time ON rostra_files (created_at, seq);
    CREATE INDEX rostra_files_by_expiry ON rostra_files (expires_at) WHERE expires_at IS NOT NULL;
    CREATE TABLE rostra_file_chunks (
        file_id TEXT NOT NULL, position INTEGER NOT NULL, data BYTEA NOT NULL, PRIMARY KEY (file_id, position)
    );
    CREATE TABLE rostra_batches (
        id TEXT PRIMARY KEY, tenant TEXT, created_at BIGINT, status TEXT, endpoint TEXT, model TEXT,
        expires_at BIGINT, body TEXT NOT NULL, owner TEXT, lease_until DOUBLE PRECISION, seq BIGSERIAL
    );
    CREATE INDEX rostra_batches_by_status ON rostra_batches (status);
    CREATE TABLE rostra_batch_chunks (
        batch_id TEXT NOT NULL REFERENCES rostra_batches(id) ON DELETE CASCADE, chunk INTEGER NOT NULL, owner TEXT,
        lease_until DOUBLE PRECISION, done BOOLEAN NOT NULL DEFAULT FALSE, PRIMARY KEY (batch_id, chunk)
    );
    CREATE TABLE rostra_batch_lines (
        batch_id TEXT NOT NULL REFERENCES rostra_batches(id) ON DELETE CASCADE, number INTEGER NOT NULL,
        chunk INTEGER NOT NULL, custom_id TEXT, request TEXT, result TEXT, failed BOOLEAN NOT NULL DEFAULT FALSE,
        PRIMARY KEY (batch_id, number)
    );
    CREATE INDEX rostra_batch_lines_by_chunk ON rostra_batch_lines (batch_id, chunk);
    """,
    # 2: the models each live process serves (announce), so that a batch of a model none serves is anyone's.
    """
    CREATE TABLE rostra_batch_workers (
        owner TEXT NOT NULL, model TEXT NOT NULL, seen_until DOUBLE PRECISION, PRIMARY KEY (owner, model)
    );
    """,
]
SCHEMA_TABLE = "rostra_batch_schema"


_LIVE = f"(expires_at IS NULL OR expires_at > {NOW})"  # a file not expired
_FREE = f"(owner IS NULL OR lease_until < {NOW})"  # nobody holds the lease
# A final batch is never rewritten (a finalizer that lost its lease, or ran twice, writes nothing), and a cancel wins
# over a move to in_progress (the validator's) or finalizing (the last chunk's). Parameter $1: the new status.
_GUARD = (f"status NOT IN ({', '.join(repr(status) for status in FINAL_STATUSES)}) "
          "AND NOT (status = 'cancelling' AND $1 IN ('in_progress', 'finalizing'))")
_NO_CHUNK_RUNNING = ("NOT EXISTS (SELECT 1 FROM rostra_batch_chunks c WHERE c.batch_id = b.id AND c.owner IS NOT NULL "
                     f"AND c.lease_until >= {NOW})")


class PostgresBatchStore(PooledStore, BatchStore):
    migrations, schema_table, what = MIGRATIONS, SCHEMA_TABLE, "batch store"

    # -- files ----------------------------------------------------------------------------------

    async def create_file(self, file: FileObject, tenant: str | None) -> None:
        await self.pool.execute(
            "INSERT INTO rostra_files (id, tenant, created_at, purpose, expires_at, body) VALUES ($1, $2, $3, $4, $5, "
            "$6) ON CONFLICT (id) DO UPDATE SET tenant = $2, created_at = $3, purpose = $4, expires_at = $5, body = $6",
            file.id, tenant, file.created_at, file.purpose, file.expires_at, file.stored())

    async def get_file(self, file_id: str, tenant: Tenant = EVERYONE) -> FileObject | None:
        body = await self.pool.fetchval(
            f"SELECT body FROM rostra_files WHERE id = $1 AND {tenant_visible(2)} AND {_LIVE}", file_id,
            *tenant.sql_params())
        return None if body is None else FileObject.model_validate_json(body)

    async def list_files(self, *, after: str | None, limit: int, order: str, purpose: str | None,
                         tenant: Tenant = EVERYONE) -> tuple[list[FileObject], bool]:
        rows, more = await self._page("rostra_files", after, limit, order, purpose, tenant)
        return [FileObject.model_validate(row) for row in rows], more

    async def delete_file(self, file_id: str, tenant: Tenant = EVERYONE) -> bool:
        done = await self.pool.execute(f"DELETE FROM rostra_files WHERE id = $1 AND {tenant_visible(2)} AND {_LIVE}",
                                       file_id, *tenant.sql_params())
        return done != "DELETE 0"

    async def delete_expired_files(self) -> list[str]:
        rows = await self.pool.fetch(f"DELETE FROM rostra_files WHERE expires_at <= {NOW} RETURNING id")
        return [row["id"] for row in rows]

    async def _page(self, table: str, after: str | None, limit: int, order: str, purpose: str | None,
                    tenant: Tenant) -> tuple[list[dict[str, Any]], bool]:
        """One page of rows' bodies, parsed (the caller validates them as its model)."""
        conditions, params = [tenant_visible(1)], list[Any](tenant.sql_params())
        if table == "rostra_files":
            conditions.append(_LIVE)
        if purpose is not None:
            params.append(purpose)
            conditions.append(f"purpose = ${len(params)}")
        noun = "file" if table == "rostra_files" else "batch"
        return await created_page(self.pool, table, " AND ".join(conditions), params, after, limit, order,
                                  tiebreak="seq", noun=noun)

    # -- batches ----------------------------------------------------------------------------------

    async def create_batch(self, batch: Batch, tenant: str | None) -> None:
        await self.pool.execute(
            "INSERT INTO rostra_batches (id, tenant, created_at, status, endpoint, expires_at, body) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7)",
            batch.id, tenant, batch.created_at, batch.status, batch.endpoint, batch.expires_at, batch.stored())

    async def get_batch(self, batch_id: str, tenant: Tenant = EVERYONE) -> Batch | None:
        body = await self.pool.fetchval(f"SELECT body FROM rostra_batches WHERE id = $1 AND {tenant_visible(2)}",
                                        batch_id, *tenant.sql_params())
        return None if body is None else Batch.model_validate_json(body)

    async def list_batches(self, *, after: str | None, limit: int, tenant: Tenant = EVERYONE
                           ) -> tuple[list[Batch], bool]:
        rows, more = await self._page("rostra_batches", after, limit, "desc", None, tenant)
        return [Batch.model_validate(row) for row in rows], more

    async def update_batch(self, batch: Batch, owner: str | None = None) -> bool:
        if owner is None:
            done = await self.pool.execute("UPDATE rostra_batches SET status = $1, body = $2, model = $3 WHERE id = $4 "
                                           f"AND {_GUARD}", batch.status, batch.stored(), batch.model, batch.id)
        else:
            done = await self.pool.execute(
                "UPDATE rostra_batches SET status = $1, body = $2, model = $3, owner = NULL, lease_until = NULL "
                f"WHERE id = $4 AND owner = $5 AND lease_until >= {NOW} AND {_GUARD}",
                batch.status, batch.stored(), batch.model, batch.id, owner)
        return done != "UPDATE 0"

    async def request_cancel(self, batch_id: str, cancelling: Batch) -> Batch | None:
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute("UPDATE rostra_batches SET status = 'cancelling', body = $1 WHERE id = $2 AND status IN "
                               "('validating', 'in_progress')", cancelling.stored(), batch_id)
            body = await conn.fetchval("SELECT body FROM rostra_batches WHERE id = $1", batch_id)
        return None if body is None else Batch.model_validate_json(body)

    async def claim_batch(self, owner: str, lease_seconds: float) -> tuple[Batch, str | None] | None:
        async with self.pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                f"SELECT id, body, tenant FROM rostra_batches b WHERE {_FREE} AND (status IN ('validating', "
                f"'finalizing') OR (status = 'cancelling' AND {_NO_CHUNK_RUNNING}) OR (status = 'in_progress' AND "
                f"((expires_at <= {NOW} AND {_NO_CHUNK_RUNNING}) OR NOT EXISTS (SELECT 1 FROM rostra_batch_chunks c "
                "WHERE c.batch_id = b.id AND NOT c.done)))) ORDER BY created_at, seq LIMIT 1 FOR UPDATE SKIP LOCKED")
            if row is None:
                return None
            await conn.execute(f"UPDATE rostra_batches SET owner = $1, lease_until = {NOW} + $2::float8 "
                               "WHERE id = $3", owner, lease_seconds, row["id"])
        return Batch.model_validate_json(row["body"]), row["tenant"]

    async def announce(self, owner: str, work: WorkFilter, seconds: float) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute(f"DELETE FROM rostra_batch_workers WHERE owner = $1 OR seen_until < {NOW}", owner)
            await conn.executemany(f"INSERT INTO rostra_batch_workers (owner, model, seen_until) VALUES "
                                   f"($1, $2, {NOW} + $3::float8)",
                                   [(owner, model, seconds) for model in (work.models or (ANY_MODEL,))])

    async def renew_batch(self, batch_id: str, owner: str, lease_seconds: float) -> bool:
        done = await self.pool.execute(f"UPDATE rostra_batches SET lease_until = {NOW} + $1::float8 "
                                       "WHERE id = $2 AND owner = $3", lease_seconds, batch_id, owner)
        return done != "UPDATE 0"

    async def add_lines(self, batch_id: str, owner: str, lines: list[BatchLine], chunk_lines: int) -> bool:
        async with self.pool.acquire() as conn, conn.transaction():
            # The row lock holds the lease for the whole transaction.
            if await conn.fetchval(f"SELECT 1 FROM rostra_batches WHERE id = $1 AND owner = $2 AND "
                                   f"lease_until >= {NOW} FOR UPDATE", batch_id, owner) is None:
                return False
            await conn.executemany(
                "INSERT INTO rostra_batch_lines (batch_id, number, chunk, custom_id, request, result, failed) "
                "VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
                [(batch_id, line.number, line.number // chunk_lines, line.custom_id, line.request, line.result,
                  line.failed) for line in lines])
            await conn.executemany("INSERT INTO rostra_batch_chunks (batch_id, chunk) VALUES ($1, $2) "
                                   "ON CONFLICT DO NOTHING",
                                   [(batch_id, chunk) for chunk in sorted({line.number // chunk_lines
                                                                           for line in lines})])
        return True

    async def claim_chunk(self, owner: str, lease_seconds: float, work: WorkFilter) -> ChunkClaim | None:
        served, params = _served(work, 1, "b")
        async with self.pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                "SELECT c.batch_id, c.chunk, b.body, b.tenant FROM rostra_batch_chunks c JOIN rostra_batches b ON "
                f"b.id = c.batch_id WHERE NOT c.done AND (c.owner IS NULL OR c.lease_until < {NOW}) AND "
                f"b.status = 'in_progress' AND b.expires_at > {NOW} AND {served} "
                "ORDER BY b.created_at, b.seq, c.chunk LIMIT 1 FOR UPDATE OF c SKIP LOCKED", *params)
            if row is None:
                return None
            await conn.execute(f"UPDATE rostra_batch_chunks SET owner = $1, lease_until = {NOW} + $2::float8 "
                               "WHERE batch_id = $3 AND chunk = $4", owner, lease_seconds, row["batch_id"], row["chunk"])
            pending = await conn.fetch("SELECT number, custom_id, request FROM rostra_batch_lines WHERE batch_id = $1 "
                                       "AND chunk = $2 AND result IS NULL ORDER BY number", row["batch_id"], row["chunk"])
        return ChunkClaim(Batch.model_validate_json(row["body"]), row["tenant"], row["chunk"],
                          [PendingLine(line["number"], line["custom_id"], line["request"]) for line in pending])

    async def renew_chunk(self, batch_id: str, chunk: int, owner: str, lease_seconds: float) -> bool:
        done = await self.pool.execute(
            f"UPDATE rostra_batch_chunks SET lease_until = {NOW} + $1::float8 WHERE batch_id = $2 AND chunk = $3 AND "
            f"owner = $4 AND lease_until >= {NOW} AND EXISTS (SELECT 1 FROM rostra_batches WHERE id = $2 AND "
            f"status = 'in_progress' AND expires_at > {NOW})", lease_seconds, batch_id, chunk, owner)
        return done != "UPDATE 0"

    async def record_line(self, batch_id: str, chunk: int, owner: str, number: int, result: str,
                          failed: bool) -> bool:
        async with self.pool.acquire() as conn, conn.transaction():
            # The chunk's row lock: a takeover waits for this write, or this write sees the lease gone.
            if await conn.fetchval(f"SELECT 1 FROM rostra_batch_chunks WHERE batch_id = $1 AND chunk = $2 AND "
                                   f"owner = $3 AND lease_until >= {NOW} FOR UPDATE", batch_id, chunk, owner) is None:
                return False
            done = await conn.execute("UPDATE rostra_batch_lines SET result = $1, failed = $2 WHERE batch_id = $3 "
                                      "AND number = $4 AND result IS NULL", result, failed, batch_id, number)
        return done != "UPDATE 0"

    async def release_chunk(self, batch_id: str, chunk: int, owner: str) -> None:
        await self.pool.execute(
            "UPDATE rostra_batch_chunks SET owner = NULL, lease_until = NULL, done = NOT EXISTS (SELECT 1 FROM "
            "rostra_batch_lines WHERE batch_id = $1 AND chunk = $2 AND result IS NULL) WHERE batch_id = $1 AND "
            "chunk = $2 AND owner = $3", batch_id, chunk, owner)

    async def counts(self, batch_id: str) -> LineCounts:
        row = await self.pool.fetchrow(
            "SELECT COUNT(*) AS total, COUNT(result) AS answered, COUNT(*) FILTER (WHERE failed) AS failed "
            "FROM rostra_batch_lines WHERE batch_id = $1", batch_id)
        return LineCounts(row["total"], row["answered"] - row["failed"], row["failed"])

    async def results_page(self, batch_id: str, failed: bool, after: int, limit: int) -> list[LineResult]:
        condition = "failed OR result IS NULL" if failed else "NOT failed AND result IS NOT NULL"
        rows = await self.pool.fetch(
            f"SELECT number, custom_id, result FROM rostra_batch_lines WHERE batch_id = $1 AND number > $2 AND "
            f"({condition}) ORDER BY number LIMIT $3", batch_id, after, limit)
        return [LineResult(row["number"], row["custom_id"], row["result"]) for row in rows]


def _served(work: WorkFilter, first: int, table: str = "b") -> tuple[str, list[Any]]:
    """The condition "a batch whose lines this process runs" (of its endpoints, and of its models or of one no live
    process announces), its parameters numbered from `first`."""
    condition = f"{table}.endpoint = ANY(${first}::text[])"
    if work.models is None:
        return condition, [list(work.endpoints)]
    unserved = (f"NOT EXISTS (SELECT 1 FROM rostra_batch_workers w WHERE w.seen_until >= {NOW} AND "
                f"(w.model = {table}.model OR w.model = ${first + 2}))")
    return (f"{condition} AND ({table}.model = ANY(${first + 1}::text[]) OR {unserved})",
            [list(work.endpoints), list(work.models), ANY_MODEL])


class PostgresBlobs(Blobs):
    """File contents as rows of chunks (of the size they were written in) in the batch store's database."""

    def __init__(self, store: PostgresBatchStore):
        self.store = store

    async def write(self, blob_id: str, chunks: AsyncIterator[bytes], max_bytes: int | None = None) -> int:
        size = 0
        async with self.store.pool.acquire() as conn, conn.transaction():  # seen whole, or not at all
            await conn.execute("DELETE FROM rostra_file_chunks WHERE file_id = $1", blob_id)
            position = 0
            async for chunk in chunks:
                size += len(chunk)
                if max_bytes is not None and size > max_bytes:
                    raise too_large(max_bytes)
                if chunk:
                    await conn.execute("INSERT INTO rostra_file_chunks (file_id, position, data) VALUES ($1, $2, $3)",
                                       blob_id, position, chunk)
                    position += 1
            if position == 0:  # an empty file still exists
                await conn.execute("INSERT INTO rostra_file_chunks (file_id, position, data) VALUES ($1, 0, '')",
                                   blob_id)
        return size

    async def read(self, blob_id: str) -> AsyncIterator[bytes]:
        position = 0
        while (data := await self.store.pool.fetchval("SELECT data FROM rostra_file_chunks WHERE file_id = $1 AND "
                                                      "position = $2", blob_id, position)) is not None:
            if data:
                yield bytes(data)
            position += 1

    async def exists(self, blob_id: str) -> bool:
        return await self.store.pool.fetchval("SELECT 1 FROM rostra_file_chunks WHERE file_id = $1 LIMIT 1",
                                              blob_id) is not None

    async def delete(self, blob_id: str) -> None:
        await self.store.pool.execute("DELETE FROM rostra_file_chunks WHERE file_id = $1", blob_id)
