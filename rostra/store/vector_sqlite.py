"""The vector stores on SQLite (vector_store.py says what they keep): their own file beside the Files store
(`vectors.sqlite3`), one connection on one worker thread, shared by the serving processes of one data directory
(WAL, leases)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from rostra.store.sqlite_connection import ConnectionThread, created_page, transaction
from rostra.store.tenancy import EVERYONE, Tenant
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
    CREATE TABLE vector_stores (id TEXT PRIMARY KEY, tenant TEXT, created_at INTEGER, body TEXT,
                                version INTEGER NOT NULL DEFAULT 0);
    CREATE INDEX vector_stores_by_time ON vector_stores(created_at, id);
    CREATE TABLE vs_files (
        store_id TEXT NOT NULL REFERENCES vector_stores(id) ON DELETE CASCADE, id TEXT NOT NULL, created_at INTEGER,
        status TEXT NOT NULL, batch_id TEXT, usage_bytes INTEGER NOT NULL DEFAULT 0, body TEXT NOT NULL, owner TEXT,
        lease_until REAL, PRIMARY KEY (store_id, id)
    );
    CREATE INDEX vs_files_by_status ON vs_files(status);
    CREATE TABLE vs_chunks (
        store_id TEXT NOT NULL, file_id TEXT NOT NULL, position INTEGER NOT NULL, text TEXT NOT NULL,
        embedding BLOB NOT NULL, PRIMARY KEY (store_id, file_id, position),
        FOREIGN KEY (store_id, file_id) REFERENCES vs_files(store_id, id) ON DELETE CASCADE
    );
    CREATE TABLE vs_batches (id TEXT PRIMARY KEY, store_id TEXT NOT NULL REFERENCES vector_stores(id)
                             ON DELETE CASCADE, body TEXT NOT NULL);
    """,
]
STORE_FILENAME = "vectors.sqlite3"
_VISIBLE = "(? OR tenant IS NULL OR tenant = ?)"
_BUMP = "UPDATE vector_stores SET version = version + 1 WHERE id = ?"


class SqliteVectorStores(VectorStores):
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._thread = ConnectionThread(self.path, MIGRATIONS, "vector store", "rostra-vector-store")

    async def open(self) -> None:
        await self._thread.open()

    async def close(self) -> None:
        await self._thread.close()

    async def _one(self, sql: str, *params: Any) -> Any:
        """The first column of the first row, or None."""
        def run(conn: sqlite3.Connection) -> Any:
            row = conn.execute(sql, params).fetchone()
            return None if row is None else row[0]
        return await self._thread.run(run)

    async def _changed(self, sql: str, store_id: str, *params: Any) -> bool:
        """Run a write on one of `store_id`'s rows; its version moves if it changed any."""
        def run(conn: sqlite3.Connection) -> bool:
            with transaction(conn):
                changed = conn.execute(sql, params).rowcount > 0
                if changed:
                    conn.execute(_BUMP, (store_id,))
            return changed
        return await self._thread.run(run)

    # -- stores ------------------------------------------------------------------------------------
    async def create_store(self, store: VectorStore, tenant: str | None) -> None:
        await self._thread.run(lambda conn: conn.execute(
            "INSERT INTO vector_stores (id, tenant, created_at, body) VALUES (?, ?, ?, ?)",
            (store.id, tenant, store.created_at, store.stored())))

    async def get_store(self, store_id: str, tenant: Tenant = EVERYONE) -> VectorStore | None:
        body = await self._one(f"SELECT body FROM vector_stores WHERE id = ? AND {_VISIBLE}", store_id,
                               *tenant.sql_params())
        return None if body is None else VectorStore.model_validate_json(body)

    async def list_stores(self, *, after: str | None, limit: int, order: str, tenant: Tenant = EVERYONE
                          ) -> tuple[list[VectorStore], bool]:
        rows, more = await self._thread.run(lambda conn: created_page(
            conn, "vector_stores", _VISIBLE, tenant.sql_params(), after, limit, order, "rowid", "vector store"))
        return [VectorStore.model_validate(row) for row in rows], more

    async def put_store(self, store: VectorStore) -> None:
        await self._thread.run(lambda conn: conn.execute("UPDATE vector_stores SET body = ? WHERE id = ?",
                                                         (store.stored(), store.id)))

    async def delete_store(self, store_id: str, tenant: Tenant = EVERYONE) -> bool:
        return await self._thread.run(lambda conn: conn.execute(
            f"DELETE FROM vector_stores WHERE id = ? AND {_VISIBLE}", (store_id, *tenant.sql_params())).rowcount > 0)

    async def version(self, store_id: str) -> int:
        found = await self._one("SELECT version FROM vector_stores WHERE id = ?", store_id)
        return -1 if found is None else int(found)

    async def counts(self, store_id: str, batch_id: str | None = None) -> tuple[FileCounts, int]:
        def run(conn: sqlite3.Connection) -> tuple[FileCounts, int]:
            where, params = ("store_id = ? AND batch_id = ?", (store_id, batch_id)) if batch_id else \
                ("store_id = ?", (store_id,))
            rows = conn.execute(f"SELECT status, COUNT(*), SUM(usage_bytes) FROM vs_files WHERE {where} "
                                "GROUP BY status", params).fetchall()
            return counted(rows)
        return await self._thread.run(run)

    async def expire_stores(self, now: float) -> list[str]:
        return await self._thread.run(_expire_stores, now)

    # -- files -------------------------------------------------------------------------------------
    async def add_file(self, file: VectorStoreFile) -> None:
        await self._changed(
            "INSERT OR REPLACE INTO vs_files (store_id, id, created_at, status, batch_id, body) VALUES "
            "(?, ?, ?, ?, ?, ?)", file.vector_store_id, file.vector_store_id, file.id, file.created_at, file.status,
            file.batch_id, file.stored())

    async def get_file(self, store_id: str, file_id: str) -> VectorStoreFile | None:
        body = await self._one("SELECT body FROM vs_files WHERE store_id = ? AND id = ?", store_id, file_id)
        return None if body is None else VectorStoreFile.model_validate_json(body)

    async def list_files(self, store_id: str, *, after: str | None, limit: int, order: str, status: str | None,
                         batch_id: str | None = None) -> tuple[list[VectorStoreFile], bool]:
        where, params = "store_id = ?", tuple[str, ...]((store_id,))
        if status is not None:
            where, params = f"{where} AND status = ?", (*params, status)
        if batch_id is not None:
            where, params = f"{where} AND batch_id = ?", (*params, batch_id)
        rows, more = await self._thread.run(lambda conn: created_page(
            conn, "vs_files", where, params, after, limit, order, "rowid", "vector store file"))
        return [VectorStoreFile.model_validate(row) for row in rows], more

    async def set_attributes(self, file: VectorStoreFile) -> bool:
        def run(conn: sqlite3.Connection) -> bool:
            with transaction(conn):
                row = conn.execute("SELECT body FROM vs_files WHERE store_id = ? AND id = ?",
                                   (file.vector_store_id, file.id)).fetchone()
                if row is None:
                    return False
                now = VectorStoreFile.model_validate_json(row[0]).model_copy(update={"attributes": file.attributes})
                conn.execute("UPDATE vs_files SET body = ? WHERE store_id = ? AND id = ?",
                             (now.stored(), file.vector_store_id, file.id))
                conn.execute(_BUMP, (file.vector_store_id,))
            return True
        return await self._thread.run(run)

    async def delete_file(self, store_id: str, file_id: str) -> bool:
        return await self._changed("DELETE FROM vs_files WHERE store_id = ? AND id = ?", store_id, store_id, file_id)

    async def drop_file(self, file_id: str) -> list[str]:
        def run(conn: sqlite3.Connection) -> list[str]:
            with transaction(conn):
                stores = [row[0] for row in conn.execute("DELETE FROM vs_files WHERE id = ? RETURNING store_id",
                                                         (file_id,))]
                conn.executemany(_BUMP, [(store_id,) for store_id in stores])
            return stores
        return await self._thread.run(run)

    async def cancel_batch_files(self, store_id: str, batch_id: str) -> None:
        def run(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                _cancel_files(conn, store_id, "batch_id = ? AND status = 'in_progress'", batch_id)
                conn.execute(_BUMP, (store_id,))
        await self._thread.run(run)

    async def file_text(self, store_id: str, file_id: str) -> list[str]:
        return await self._thread.run(lambda conn: [row[0] for row in conn.execute(
            "SELECT text FROM vs_chunks WHERE store_id = ? AND file_id = ? ORDER BY position", (store_id, file_id))])

    # -- indexing ----------------------------------------------------------------------------------
    async def claim_file(self, owner: str, lease_seconds: float) -> VectorStoreFile | None:
        def run(conn: sqlite3.Connection) -> str | None:
            now = time.time()
            with transaction(conn):
                row = conn.execute("SELECT store_id, id, body FROM vs_files WHERE status = 'in_progress' AND "
                                   "(owner IS NULL OR lease_until < ?) ORDER BY created_at LIMIT 1",
                                   (now,)).fetchone()
                if row is None:
                    return None
                conn.execute("UPDATE vs_files SET owner = ?, lease_until = ? WHERE store_id = ? AND id = ?",
                             (owner, now + lease_seconds, row[0], row[1]))
            return str(row[2])
        body = await self._thread.run(run)
        return None if body is None else VectorStoreFile.model_validate_json(body)

    async def renew_file(self, store_id: str, file_id: str, owner: str, lease_seconds: float) -> bool:
        return await self._thread.run(lambda conn: conn.execute(
            "UPDATE vs_files SET lease_until = ? WHERE store_id = ? AND id = ? AND owner = ? AND "
            "status = 'in_progress'", (time.time() + lease_seconds, store_id, file_id, owner)).rowcount > 0)

    async def finish_file(self, file: VectorStoreFile, chunks: list[StoredChunk], owner: str) -> bool:
        return await self._thread.run(_finish_file, file, chunks, owner)

    async def index_rows(self, store_id: str) -> list[IndexRow]:
        def run(conn: sqlite3.Connection) -> list[IndexRow]:
            files = {file_id: VectorStoreFile.model_validate_json(body) for file_id, body in conn.execute(
                "SELECT id, body FROM vs_files WHERE store_id = ? AND status = 'completed'", (store_id,))}
            rows = conn.execute("SELECT file_id, position, text, embedding FROM vs_chunks WHERE store_id = ? "
                                "ORDER BY file_id, position", (store_id,)).fetchall()
            return [IndexRow(file_id, files[file_id].filename, position, text, bytes(embedding),
                             files[file_id].attributes)
                    for file_id, position, text, embedding in rows if file_id in files]
        return await self._thread.run(run)

    # -- file batches ------------------------------------------------------------------------------
    async def put_batch(self, batch: FileBatch) -> None:
        await self._thread.run(lambda conn: conn.execute(
            "INSERT OR REPLACE INTO vs_batches (id, store_id, body) VALUES (?, ?, ?)",
            (batch.id, batch.vector_store_id, batch.stored())))

    async def get_batch(self, store_id: str, batch_id: str) -> FileBatch | None:
        body = await self._one("SELECT body FROM vs_batches WHERE id = ? AND store_id = ?", batch_id, store_id)
        return None if body is None else FileBatch.model_validate_json(body)


def counted(rows: list[tuple[str, int, int | None]]) -> tuple[FileCounts, int]:
    """Files counted by status, and the bytes the completed ones use."""
    by_status = {status: count for status, count, _ in rows}
    usage = sum(int(used or 0) for status, _, used in rows if status == "completed")
    return FileCounts(**by_status, total=sum(by_status.values())), usage


def _expire_stores(conn: sqlite3.Connection, now: float) -> list[str]:
    """(The expiry is in the store's body, which a sweep reads whole: stores are few, their chunks many.)"""
    with transaction(conn):
        rows = conn.execute("SELECT id, body FROM vector_stores WHERE json_extract(body, '$.expires_at') <= ? AND "
                            "json_extract(body, '$.status') != 'expired'", (now,)).fetchall()
        for store_id, body in rows:
            expired = VectorStore.model_validate_json(body).model_copy(update={"status": "expired"})
            conn.execute("UPDATE vector_stores SET body = ?, version = version + 1 WHERE id = ?",
                         (expired.stored(), store_id))
            conn.execute("DELETE FROM vs_chunks WHERE store_id = ?", (store_id,))
            conn.execute("UPDATE vs_files SET usage_bytes = 0 WHERE store_id = ?", (store_id,))
            _cancel_files(conn, store_id, "status = 'in_progress'")
    return [row[0] for row in rows]


def _cancel_files(conn: sqlite3.Connection, store_id: str, where: str, *params: Any) -> None:
    """The store's files that match `where` become `cancelled` (an indexer holding one then writes nothing)."""
    rows = conn.execute(f"SELECT id, body FROM vs_files WHERE store_id = ? AND {where}", (store_id, *params)).fetchall()
    for file_id, body in rows:
        cancelled = VectorStoreFile.model_validate_json(body).model_copy(update={"status": "cancelled"})
        conn.execute("UPDATE vs_files SET status = 'cancelled', body = ?, owner = NULL WHERE store_id = ? AND id = ?",
                     (cancelled.stored(), store_id, file_id))


def _finish_file(conn: sqlite3.Connection, file: VectorStoreFile, chunks: list[StoredChunk], owner: str) -> bool:
    store_id = file.vector_store_id
    with transaction(conn):
        done = conn.execute(
            "UPDATE vs_files SET status = ?, usage_bytes = ?, body = ?, owner = NULL, lease_until = NULL "
            "WHERE store_id = ? AND id = ? AND owner = ? AND status = 'in_progress'",
            (file.status, file.usage_bytes, file.stored(), store_id, file.id, owner)).rowcount > 0
        if not done:
            return False
        conn.execute("DELETE FROM vs_chunks WHERE store_id = ? AND file_id = ?", (store_id, file.id))
        conn.executemany("INSERT INTO vs_chunks (store_id, file_id, position, text, embedding) VALUES (?, ?, ?, ?, ?)",
                         [(store_id, file.id, chunk.position, chunk.text, chunk.embedding) for chunk in chunks])
        conn.execute(_BUMP, (store_id,))
    return True
