"""The vector stores on PostgreSQL (vector_store.py says what they keep), shared by replicas on any machine: leases
on the database's clock, a file claimed with `FOR UPDATE SKIP LOCKED`. Its own schema version
(`rostra_vector_schema`), so its tables migrate apart from the others in the same database."""

from __future__ import annotations

from typing import Any

from rostra.store.postgres_pool import NOW, PooledStore, created_page, tenant_visible
from rostra.store.tenancy import EVERYONE, Tenant
from rostra.store.vector_sqlite import counted
from rostra.store.vector_store import (
    FileBatch,
    FileCounts,
    IndexRow,
    StoredChunk,
    VectorStore,
    VectorStoreFile,
    VectorStores,
)

MIGRATIONS: list[str] = [
    """
    CREATE TABLE rostra_vector_stores (
        id TEXT PRIMARY KEY, tenant TEXT, created_at BIGINT, body TEXT NOT NULL, version BIGINT NOT NULL DEFAULT 0,
        seq BIGSERIAL
    );
    CREATE INDEX rostra_vector_stores_by_time ON rostra_vector_stores (created_at, seq);
    CREATE TABLE rostra_vs_files (
        store_id TEXT NOT NULL REFERENCES rostra_vector_stores(id) ON DELETE CASCADE, id TEXT NOT NULL,
        created_at BIGINT, status TEXT NOT NULL, batch_id TEXT, usage_bytes BIGINT NOT NULL DEFAULT 0,
        body TEXT NOT NULL, owner TEXT, lease_until DOUBLE PRECISION, seq BIGSERIAL, PRIMARY KEY (store_id, id)
    );
    CREATE INDEX rostra_vs_files_by_status ON rostra_vs_files (status);
    CREATE TABLE rostra_vs_chunks (
        store_id TEXT NOT NULL, file_id TEXT NOT NULL, position INTEGER NOT NULL, text TEXT NOT NULL,
        embedding BYTEA NOT NULL, PRIMARY KEY (store_id, file_id, position),
        FOREIGN KEY (store_id, file_id) REFERENCES rostra_vs_files(store_id, id) ON DELETE CASCADE
    );
    CREATE TABLE rostra_vs_batches (
        id TEXT PRIMARY KEY, store_id TEXT NOT NULL REFERENCES rostra_vector_stores(id) ON DELETE CASCADE,
        body TEXT NOT NULL
    );
    """,
]
SCHEMA_TABLE = "rostra_vector_schema"
_BUMP = "UPDATE rostra_vector_stores SET version = version + 1 WHERE id = $1"


class PostgresVectorStores(PooledStore, VectorStores):
    migrations, schema_table, what = MIGRATIONS, SCHEMA_TABLE, "vector store"

    async def _changed(self, sql: str, store_id: str, *params: Any) -> bool:
        async with self.pool.acquire() as conn, conn.transaction():
            done = await conn.execute(sql, *params)
            changed = not done.endswith(" 0")
            if changed:
                await conn.execute(_BUMP, store_id)
        return changed

    # -- stores ------------------------------------------------------------------------------------
    async def create_store(self, store: VectorStore, tenant: str | None) -> None:
        await self.pool.execute("INSERT INTO rostra_vector_stores (id, tenant, created_at, body) VALUES ($1, $2, $3, "
                                "$4)", store.id, tenant, store.created_at, store.stored())

    async def get_store(self, store_id: str, tenant: Tenant = EVERYONE) -> VectorStore | None:
        body = await self.pool.fetchval(f"SELECT body FROM rostra_vector_stores WHERE id = $1 AND {tenant_visible(2)}",
                                        store_id, *tenant.sql_params())
        return None if body is None else VectorStore.model_validate_json(body)

    async def list_stores(self, *, after: str | None, limit: int, order: str, tenant: Tenant = EVERYONE
                          ) -> tuple[list[VectorStore], bool]:
        rows, more = await created_page(self.pool, "rostra_vector_stores", tenant_visible(1),
                                        list(tenant.sql_params()), after, limit, order, "seq", "vector store")
        return [VectorStore.model_validate(row) for row in rows], more

    async def put_store(self, store: VectorStore) -> None:
        await self.pool.execute("UPDATE rostra_vector_stores SET body = $1 WHERE id = $2", store.stored(), store.id)

    async def delete_store(self, store_id: str, tenant: Tenant = EVERYONE) -> bool:
        done = await self.pool.execute(f"DELETE FROM rostra_vector_stores WHERE id = $1 AND {tenant_visible(2)}",
                                       store_id, *tenant.sql_params())
        return done != "DELETE 0"

    async def version(self, store_id: str) -> int:
        found = await self.pool.fetchval("SELECT version FROM rostra_vector_stores WHERE id = $1", store_id)
        return -1 if found is None else int(found)

    async def counts(self, store_id: str, batch_id: str | None = None) -> tuple[FileCounts, int]:
        rows = await self.pool.fetch(
            "SELECT status, COUNT(*) AS n, SUM(usage_bytes) AS used FROM rostra_vs_files WHERE store_id = $1 AND "
            "($2::text IS NULL OR batch_id = $2) GROUP BY status", store_id, batch_id)
        return counted([(row["status"], row["n"], row["used"]) for row in rows])

    async def expire_stores(self, now: float) -> list[str]:
        # (The expiry is in the store's body, which a sweep reads whole: stores are few, their chunks many.)
        async with self.pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(
                "SELECT id, body FROM rostra_vector_stores WHERE (body::jsonb->>'expires_at')::float8 <= $1 AND "
                "body::jsonb->>'status' != 'expired' FOR UPDATE SKIP LOCKED", now)
            for row in rows:
                store_id = row["id"]
                expired = VectorStore.model_validate_json(row["body"]).model_copy(update={"status": "expired"})
                await conn.execute("UPDATE rostra_vector_stores SET body = $1, version = version + 1 WHERE id = $2",
                                   expired.stored(), store_id)
                await conn.execute("DELETE FROM rostra_vs_chunks WHERE store_id = $1", store_id)
                await conn.execute("UPDATE rostra_vs_files SET usage_bytes = 0 WHERE store_id = $1", store_id)
                await self._cancel_files(conn, store_id, "status = 'in_progress'")
        return [row["id"] for row in rows]

    # -- files -------------------------------------------------------------------------------------
    async def add_file(self, file: VectorStoreFile) -> None:
        async with self.pool.acquire() as conn, conn.transaction():  # attached again: its old chunks go
            await conn.execute("DELETE FROM rostra_vs_files WHERE store_id = $1 AND id = $2", file.vector_store_id,
                               file.id)
            await conn.execute("INSERT INTO rostra_vs_files (store_id, id, created_at, status, batch_id, body) VALUES "
                               "($1, $2, $3, $4, $5, $6)", file.vector_store_id, file.id, file.created_at,
                               file.status, file.batch_id, file.stored())
            await conn.execute(_BUMP, file.vector_store_id)

    async def get_file(self, store_id: str, file_id: str) -> VectorStoreFile | None:
        body = await self.pool.fetchval("SELECT body FROM rostra_vs_files WHERE store_id = $1 AND id = $2",
                                        store_id, file_id)
        return None if body is None else VectorStoreFile.model_validate_json(body)

    async def list_files(self, store_id: str, *, after: str | None, limit: int, order: str, status: str | None,
                         batch_id: str | None = None) -> tuple[list[VectorStoreFile], bool]:
        where = "store_id = $1 AND ($2::text IS NULL OR status = $2) AND ($3::text IS NULL OR batch_id = $3)"
        rows, more = await created_page(self.pool, "rostra_vs_files", where, [store_id, status, batch_id], after,
                                        limit, order, "seq", "vector store file")
        return [VectorStoreFile.model_validate(row) for row in rows], more

    async def set_attributes(self, file: VectorStoreFile) -> bool:
        async with self.pool.acquire() as conn, conn.transaction():
            body = await conn.fetchval("SELECT body FROM rostra_vs_files WHERE store_id = $1 AND id = $2 FOR UPDATE",
                                       file.vector_store_id, file.id)
            if body is None:
                return False
            now = VectorStoreFile.model_validate_json(body).model_copy(update={"attributes": file.attributes})
            await conn.execute("UPDATE rostra_vs_files SET body = $1 WHERE store_id = $2 AND id = $3", now.stored(),
                               file.vector_store_id, file.id)
            await conn.execute(_BUMP, file.vector_store_id)
        return True

    async def delete_file(self, store_id: str, file_id: str) -> bool:
        return await self._changed("DELETE FROM rostra_vs_files WHERE store_id = $1 AND id = $2", store_id,
                                   store_id, file_id)

    async def drop_file(self, file_id: str) -> list[str]:
        async with self.pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch("DELETE FROM rostra_vs_files WHERE id = $1 RETURNING store_id", file_id)
            stores = [row["store_id"] for row in rows]
            await conn.executemany(_BUMP, [(store_id,) for store_id in stores])
        return stores

    async def cancel_batch_files(self, store_id: str, batch_id: str) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            await self._cancel_files(conn, store_id, "batch_id = $2 AND status = 'in_progress'", batch_id)
            await conn.execute(_BUMP, store_id)

    @staticmethod
    async def _cancel_files(conn: Any, store_id: str, where: str, *params: Any) -> None:
        """The store's files that match `where` (its parameters from $2) become `cancelled`."""
        rows = await conn.fetch(f"SELECT id, body FROM rostra_vs_files WHERE store_id = $1 AND {where} FOR UPDATE",
                                store_id, *params)
        for row in rows:
            cancelled = VectorStoreFile.model_validate_json(row["body"]).model_copy(update={"status": "cancelled"})
            await conn.execute("UPDATE rostra_vs_files SET status = 'cancelled', body = $1, owner = NULL WHERE "
                               "store_id = $2 AND id = $3", cancelled.stored(), store_id, row["id"])

    async def file_text(self, store_id: str, file_id: str) -> list[str]:
        rows = await self.pool.fetch("SELECT text FROM rostra_vs_chunks WHERE store_id = $1 AND file_id = $2 ORDER BY "
                                     "position", store_id, file_id)
        return [row["text"] for row in rows]

    # -- indexing ----------------------------------------------------------------------------------
    async def claim_file(self, owner: str, lease_seconds: float) -> VectorStoreFile | None:
        async with self.pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                "SELECT store_id, id, body FROM rostra_vs_files WHERE status = 'in_progress' AND (owner IS NULL OR "
                f"lease_until < {NOW}) ORDER BY created_at, seq LIMIT 1 FOR UPDATE SKIP LOCKED")
            if row is None:
                return None
            await conn.execute(f"UPDATE rostra_vs_files SET owner = $1, lease_until = {NOW} + $2::float8 WHERE "
                               "store_id = $3 AND id = $4", owner, lease_seconds, row["store_id"], row["id"])
        return VectorStoreFile.model_validate_json(row["body"])

    async def renew_file(self, store_id: str, file_id: str, owner: str, lease_seconds: float) -> bool:
        done = await self.pool.execute(
            f"UPDATE rostra_vs_files SET lease_until = {NOW} + $1::float8 WHERE store_id = $2 AND id = $3 AND "
            "owner = $4 AND status = 'in_progress'", lease_seconds, store_id, file_id, owner)
        return done != "UPDATE 0"

    async def finish_file(self, file: VectorStoreFile, chunks: list[StoredChunk], owner: str) -> bool:
        store_id = file.vector_store_id
        async with self.pool.acquire() as conn, conn.transaction():
            done = await conn.execute(
                "UPDATE rostra_vs_files SET status = $1, usage_bytes = $2, body = $3, owner = NULL, lease_until = NULL "
                "WHERE store_id = $4 AND id = $5 AND owner = $6 AND status = 'in_progress'",
                file.status, file.usage_bytes, file.stored(), store_id, file.id, owner)
            if done == "UPDATE 0":
                return False
            await conn.execute("DELETE FROM rostra_vs_chunks WHERE store_id = $1 AND file_id = $2", store_id, file.id)
            await conn.executemany("INSERT INTO rostra_vs_chunks (store_id, file_id, position, text, embedding) "
                                   "VALUES ($1, $2, $3, $4, $5)",
                                   [(store_id, file.id, chunk.position, chunk.text, chunk.embedding)
                                    for chunk in chunks])
            await conn.execute(_BUMP, store_id)
        return True

    async def index_rows(self, store_id: str) -> list[IndexRow]:
        async with self.pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
            files = {row["id"]: VectorStoreFile.model_validate_json(row["body"]) for row in await conn.fetch(
                "SELECT id, body FROM rostra_vs_files WHERE store_id = $1 AND status = 'completed'", store_id)}
            rows = await conn.fetch("SELECT file_id, position, text, embedding FROM rostra_vs_chunks WHERE "
                                    "store_id = $1 ORDER BY file_id, position", store_id)
        return [IndexRow(row["file_id"], files[row["file_id"]].filename, row["position"], row["text"],
                         bytes(row["embedding"]), files[row["file_id"]].attributes)
                for row in rows if row["file_id"] in files]

    # -- file batches ------------------------------------------------------------------------------
    async def put_batch(self, batch: FileBatch) -> None:
        await self.pool.execute("INSERT INTO rostra_vs_batches (id, store_id, body) VALUES ($1, $2, $3) ON CONFLICT "
                                "(id) DO UPDATE SET body = $3", batch.id, batch.vector_store_id, batch.stored())

    async def get_batch(self, store_id: str, batch_id: str) -> FileBatch | None:
        body = await self.pool.fetchval("SELECT body FROM rostra_vs_batches WHERE id = $1 AND store_id = $2",
                                        batch_id, store_id)
        return None if body is None else FileBatch.model_validate_json(body)
