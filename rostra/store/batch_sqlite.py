"""The Files and Batch APIs' store on SQLite (batch_store.py says what it keeps).

Its own file beside the Responses store (`batches.sqlite3`), so the two schemas migrate apart. One connection on
one worker thread, as the Responses store does; several serving processes may share the file (WAL, a busy timeout,
writes that take the write lock up front, leases).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

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
from rostra.store.sqlite_connection import ConnectionThread, created_page
from rostra.store.sqlite_connection import transaction as _transaction
from rostra.store.tenancy import EVERYONE, Tenant

T = TypeVar("T")

MIGRATIONS: list[str] = [
    """
    CREATE TABLE files (id TEXT PRIMARY KEY, tenant TEXT, created_at INTEGER, purpose TEXT, body TEXT);
    CREATE INDEX files_by_time ON files(created_at, id);
    CREATE TABLE batches (
        id TEXT PRIMARY KEY, tenant TEXT, created_at INTEGER, status TEXT, endpoint TEXT, model TEXT, expires_at INTEGER,
        body TEXT, owner TEXT, lease_until REAL
    );
    CREATE INDEX batches_by_status ON batches(status);
    CREATE TABLE batch_chunks (
        batch_id TEXT REFERENCES batches(id) ON DELETE CASCADE, chunk INTEGER, owner TEXT, lease_until REAL,
        done INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (batch_id, chunk)
    );
    CREATE TABLE batch_lines (
        batch_id TEXT REFERENCES batches(id) ON DELETE CASCADE, number INTEGER, chunk INTEGER, custom_id TEXT,
        request TEXT, result TEXT, failed INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (batch_id, number)
    );
    """,
    # 2: files that expire (expires_after): when, NULL for never.
    """
    ALTER TABLE files ADD COLUMN expires_at INTEGER;
    CREATE INDEX files_by_expiry ON files(expires_at) WHERE expires_at IS NOT NULL;
    """,
    # 3: the models each live process serves (announce), so that a batch of a model none serves is anyone's.
    """
    CREATE TABLE batch_workers (owner TEXT, model TEXT, seen_until REAL, PRIMARY KEY (owner, model));
    """,
]
_VISIBLE = "(? OR tenant IS NULL OR tenant = ?)"
_FREE = "(owner IS NULL OR lease_until < ?)"  # nobody holds the lease (parameter: now)
_LIVE = "(expires_at IS NULL OR expires_at > ?)"  # a file not expired (parameter: now)
STORE_FILENAME = "batches.sqlite3"


class SqliteBatchStore(BatchStore):
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._thread = ConnectionThread(self.path, MIGRATIONS, "batch store", "rostra-batch-store")

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await self._thread.run(fn, *args)

    async def open(self) -> None:
        await self._thread.open()

    async def close(self) -> None:
        await self._thread.close()

    # -- files ----------------------------------------------------------------------------------

    async def create_file(self, file: FileObject, tenant: str | None) -> None:
        await self._run(lambda conn: conn.execute(
            "INSERT OR REPLACE INTO files (id, tenant, created_at, purpose, expires_at, body) VALUES (?, ?, ?, ?, ?, ?)",
            (file.id, tenant, file.created_at, file.purpose, file.expires_at, file.stored())))

    async def get_file(self, file_id: str, tenant: Tenant = EVERYONE) -> FileObject | None:
        body = await self._run(_get, "files", file_id, tenant)
        return None if body is None else FileObject.model_validate_json(body)

    async def list_files(self, *, after: str | None, limit: int, order: str, purpose: str | None,
                         tenant: Tenant = EVERYONE) -> tuple[list[FileObject], bool]:
        rows, more = await self._run(_page, "files", after, limit, order, purpose, tenant)
        return [FileObject.model_validate(row) for row in rows], more

    async def delete_file(self, file_id: str, tenant: Tenant = EVERYONE) -> bool:
        return await self._run(lambda conn: conn.execute(
            f"DELETE FROM files WHERE id = ? AND {_VISIBLE} AND {_LIVE}",
            (file_id, *tenant.sql_params(), time.time())).rowcount > 0)

    async def delete_expired_files(self) -> list[str]:
        return await self._run(lambda conn: [row[0] for row in conn.execute(
            "DELETE FROM files WHERE expires_at <= ? RETURNING id", (time.time(),)).fetchall()])

    # -- batches ----------------------------------------------------------------------------------

    async def create_batch(self, batch: Batch, tenant: str | None) -> None:
        await self._run(lambda conn: conn.execute(
            "INSERT INTO batches (id, tenant, created_at, status, endpoint, expires_at, body) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (batch.id, tenant, batch.created_at, batch.status, batch.endpoint, batch.expires_at, batch.stored())))

    async def get_batch(self, batch_id: str, tenant: Tenant = EVERYONE) -> Batch | None:
        body = await self._run(_get, "batches", batch_id, tenant)
        return None if body is None else Batch.model_validate_json(body)

    async def list_batches(self, *, after: str | None, limit: int, tenant: Tenant = EVERYONE
                           ) -> tuple[list[Batch], bool]:
        rows, more = await self._run(_page, "batches", after, limit, "desc", None, tenant)
        return [Batch.model_validate(row) for row in rows], more

    async def update_batch(self, batch: Batch, owner: str | None = None) -> bool:
        return await self._run(_update_batch, batch, owner)

    async def request_cancel(self, batch_id: str, cancelling: Batch) -> Batch | None:
        body = await self._run(_request_cancel, batch_id, cancelling)
        return None if body is None else Batch.model_validate_json(body)

    async def claim_batch(self, owner: str, lease_seconds: float) -> tuple[Batch, str | None] | None:
        claimed = await self._run(_claim_batch, owner, lease_seconds)
        return None if claimed is None else (Batch.model_validate_json(claimed[0]), claimed[1])

    async def announce(self, owner: str, work: WorkFilter, seconds: float) -> None:
        await self._run(_announce, owner, work, seconds)

    async def renew_batch(self, batch_id: str, owner: str, lease_seconds: float) -> bool:
        return await self._run(lambda conn: conn.execute(
            "UPDATE batches SET lease_until = ? WHERE id = ? AND owner = ?",
            (time.time() + lease_seconds, batch_id, owner)).rowcount > 0)

    async def add_lines(self, batch_id: str, owner: str, lines: list[BatchLine], chunk_lines: int) -> bool:
        return await self._run(_add_lines, batch_id, owner, lines, chunk_lines)

    async def claim_chunk(self, owner: str, lease_seconds: float, work: WorkFilter) -> ChunkClaim | None:
        return await self._run(_claim_chunk, owner, lease_seconds, work)

    async def renew_chunk(self, batch_id: str, chunk: int, owner: str, lease_seconds: float) -> bool:
        return await self._run(lambda conn: conn.execute(
            "UPDATE batch_chunks SET lease_until = ? WHERE batch_id = ? AND chunk = ? AND owner = ? AND "
            "lease_until >= ? AND EXISTS (SELECT 1 FROM batches WHERE id = ? AND status = 'in_progress' AND expires_at > ?)",
            (time.time() + lease_seconds, batch_id, chunk, owner, time.time(), batch_id, time.time())).rowcount > 0)

    async def record_line(self, batch_id: str, chunk: int, owner: str, number: int, result: str,
                          failed: bool) -> bool:
        return await self._run(lambda conn: conn.execute(
            "UPDATE batch_lines SET result = ?, failed = ? WHERE batch_id = ? AND number = ? AND result IS NULL "
            "AND EXISTS (SELECT 1 FROM batch_chunks WHERE batch_id = ? AND chunk = ? AND owner = ? "
            "AND lease_until >= ?)",
            (result, int(failed), batch_id, number, batch_id, chunk, owner, time.time())).rowcount > 0)

    async def release_chunk(self, batch_id: str, chunk: int, owner: str) -> None:
        await self._run(_release_chunk, batch_id, chunk, owner)

    async def counts(self, batch_id: str) -> LineCounts:
        return await self._run(_counts, batch_id)

    async def results_page(self, batch_id: str, failed: bool, after: int, limit: int) -> list[LineResult]:
        condition = "failed = 1 OR result IS NULL" if failed else "failed = 0 AND result IS NOT NULL"
        return await self._run(lambda conn: [LineResult(*row) for row in conn.execute(
            f"SELECT number, custom_id, result FROM batch_lines WHERE batch_id = ? AND number > ? AND ({condition}) "
            "ORDER BY number LIMIT ?", (batch_id, after, limit))])

def _get(conn: sqlite3.Connection, table: str, object_id: str, tenant: Tenant) -> str | None:
    live, now = (f" AND {_LIVE}", (time.time(),)) if table == "files" else ("", ())
    row = conn.execute(f"SELECT body FROM {table} WHERE id = ? AND {_VISIBLE}{live}",
                       (object_id, *tenant.sql_params(), *now)).fetchone()
    return None if row is None else str(row[0])


def _page(conn: sqlite3.Connection, table: str, after: str | None, limit: int, order: str, purpose: str | None,
          tenant: Tenant) -> tuple[list[dict[str, Any]], bool]:
    """One page of rows' bodies, parsed (the caller validates them as its model)."""
    where, params = _VISIBLE, tuple[Any, ...](tenant.sql_params())
    if table == "files":
        where, params = f"{where} AND {_LIVE}", (*params, time.time())
    if purpose is not None:
        where, params = f"{where} AND purpose = ?", (*params, purpose)
    noun = "file" if table == "files" else "batch"
    return created_page(conn, table, where, params, after, limit, order, tiebreak="rowid", noun=noun)


def _update_batch(conn: sqlite3.Connection, batch: Batch, owner: str | None) -> bool:
    # A final batch is never rewritten (a finalizer that lost its lease, or ran twice, writes nothing), and a cancel
    # wins over a move to in_progress (the validator's) or finalizing (the last chunk's).
    guard = (f"status NOT IN ({', '.join(repr(status) for status in FINAL_STATUSES)}) "
             "AND NOT (status = 'cancelling' AND ? IN ('in_progress', 'finalizing'))")
    params: tuple[Any, ...] = (batch.status, batch.stored(), batch.model, batch.id)
    if owner is None:
        sql = f"UPDATE batches SET status = ?, body = ?, model = ? WHERE id = ? AND {guard}"
        params = (*params, batch.status)
    else:
        sql = ("UPDATE batches SET status = ?, body = ?, model = ?, owner = NULL, lease_until = NULL WHERE id = ? "
               f"AND owner = ? AND lease_until >= ? AND {guard}")
        params = (*params, owner, time.time(), batch.status)
    return conn.execute(sql, params).rowcount > 0


def _request_cancel(conn: sqlite3.Connection, batch_id: str, cancelling: Batch) -> str | None:
    with _transaction(conn):
        conn.execute("UPDATE batches SET status = 'cancelling', body = ? WHERE id = ? AND status IN "
                     "('validating', 'in_progress')", (cancelling.stored(), batch_id))
        row = conn.execute("SELECT body FROM batches WHERE id = ?", (batch_id,)).fetchone()
    return None if row is None else str(row[0])


def _served(work: WorkFilter, now: float) -> tuple[str, tuple]:
    """The condition "a batch (`b`) whose lines this process runs": of its endpoints, and of its models or of one
    no live process announces."""
    condition = f"b.endpoint IN ({', '.join('?' for _ in work.endpoints)})"
    if work.models is None:
        return condition, tuple(work.endpoints)
    unserved = "NOT EXISTS (SELECT 1 FROM batch_workers w WHERE w.seen_until >= ? AND w.model IN (b.model, ?))"
    return (f"{condition} AND (b.model IN ({', '.join('?' for _ in work.models)}) OR {unserved})",
            (*work.endpoints, *work.models, now, ANY_MODEL))


def _claim_batch(conn: sqlite3.Connection, owner: str, lease_seconds: float) -> tuple[str, str | None] | None:
    now = time.time()
    no_chunk_running = "NOT EXISTS (SELECT 1 FROM batch_chunks c WHERE c.batch_id = batches.id AND " \
                       "c.owner IS NOT NULL AND c.lease_until >= ?)"
    with _transaction(conn):
        row = conn.execute(
            f"SELECT id, body, tenant FROM batches WHERE {_FREE} AND (status IN ('validating', 'finalizing') OR "
            f"(status = 'cancelling' AND {no_chunk_running}) OR (status = 'in_progress' AND ((expires_at <= ? AND "
            f"{no_chunk_running}) OR NOT EXISTS (SELECT 1 FROM batch_chunks c WHERE c.batch_id = batches.id AND "
            "c.done = 0)))) ORDER BY created_at LIMIT 1", (now, now, now, now)).fetchone()
        if row is None:
            return None
        conn.execute("UPDATE batches SET owner = ?, lease_until = ? WHERE id = ?", (owner, now + lease_seconds, row[0]))
    return str(row[1]), row[2]


def _announce(conn: sqlite3.Connection, owner: str, work: WorkFilter, seconds: float) -> None:
    now = time.time()
    with _transaction(conn):
        conn.execute("DELETE FROM batch_workers WHERE owner = ? OR seen_until < ?", (owner, now))
        conn.executemany("INSERT INTO batch_workers (owner, model, seen_until) VALUES (?, ?, ?)",
                         [(owner, model, now + seconds) for model in (work.models or (ANY_MODEL,))])


def _add_lines(conn: sqlite3.Connection, batch_id: str, owner: str, lines: list[BatchLine], chunk_lines: int) -> bool:
    with _transaction(conn):
        if conn.execute("SELECT 1 FROM batches WHERE id = ? AND owner = ? AND lease_until >= ?",
                        (batch_id, owner, time.time())).fetchone() is None:
            return False
        conn.executemany(
            "INSERT OR IGNORE INTO batch_lines (batch_id, number, chunk, custom_id, request, result, failed) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(batch_id, line.number, line.number // chunk_lines, line.custom_id, line.request, line.result,
              int(line.failed)) for line in lines])
        conn.executemany("INSERT OR IGNORE INTO batch_chunks (batch_id, chunk) VALUES (?, ?)",
                         [(batch_id, chunk) for chunk in sorted({line.number // chunk_lines for line in lines})])
    return True


def _claim_chunk(conn: sqlite3.Connection, owner: str, lease_seconds: float, work: WorkFilter
                 ) -> ChunkClaim | None:
    now = time.time()
    served, served_params = _served(work, now)
    with _transaction(conn):
        row = conn.execute(
            "SELECT c.batch_id, c.chunk, b.body, b.tenant FROM batch_chunks c JOIN batches b ON b.id = c.batch_id "
            f"WHERE c.done = 0 AND (c.owner IS NULL OR c.lease_until < ?) AND b.status = 'in_progress' "
            f"AND b.expires_at > ? AND {served} ORDER BY b.created_at, c.chunk LIMIT 1",
            (now, now, *served_params)).fetchone()
        if row is None:
            return None
        batch_id, chunk = row[0], row[1]
        conn.execute("UPDATE batch_chunks SET owner = ?, lease_until = ? WHERE batch_id = ? AND chunk = ?",
                     (owner, now + lease_seconds, batch_id, chunk))
        pending = conn.execute("SELECT number, custom_id, request FROM batch_lines WHERE batch_id = ? AND chunk = ? "
                               "AND result IS NULL ORDER BY number", (batch_id, chunk)).fetchall()
    return ChunkClaim(Batch.model_validate_json(row[2]), row[3], chunk, [PendingLine(*line) for line in pending])


def _release_chunk(conn: sqlite3.Connection, batch_id: str, chunk: int, owner: str) -> None:
    conn.execute("UPDATE batch_chunks SET owner = NULL, lease_until = NULL, done = NOT EXISTS (SELECT 1 FROM "
                 "batch_lines WHERE batch_id = ? AND chunk = ? AND result IS NULL) WHERE batch_id = ? AND chunk = ? "
                 "AND owner = ?", (batch_id, chunk, batch_id, chunk, owner))


def _counts(conn: sqlite3.Connection, batch_id: str) -> LineCounts:
    total, answered, failed = conn.execute(
        "SELECT COUNT(*), COUNT(result), COALESCE(SUM(failed), 0) FROM batch_lines WHERE batch_id = ?",
        (batch_id,)).fetchone()
    return LineCounts(total, answered - failed, failed)
