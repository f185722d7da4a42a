"""What rostra's SQLite stores share: one connection used only from its own worker thread, opened the same way
(WAL, a busy timeout, foreign keys, the schema migrated in one write transaction), and the SQL helpers around it.

Every blocking sqlite call runs on the thread via `loop.run_in_executor`, so the event loop never blocks on disk and
access to the connection is serialised without locks. The connection is in autocommit mode
(`isolation_level=None`); multi-statement writes open their own explicit transactions.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from rostra.store.base import StoreError, StoreFull, StoreWriteFailed

T = TypeVar("T")
MEMORY = ":memory:"


def statements(script: str) -> Iterator[str]:
    """Split a script into single statements. `executescript` would commit any open transaction
    first, so migrations run statement by statement inside our own transaction instead;
    `sqlite3.complete_statement` keeps semicolons inside e.g. triggers or strings intact."""
    buffer = ""
    for piece in script.split(";"):
        buffer += piece + ";"
        if sqlite3.complete_statement(buffer):
            if buffer.strip(" \t\r\n;"):
                yield buffer
            buffer = ""
    if buffer.strip(" \t\r\n;"):
        raise StoreError(f"incomplete SQL statement in migration: {buffer!r}")


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection, mode: str = "IMMEDIATE") -> Iterator[None]:
    """BEGIN ... COMMIT, or ROLLBACK if the block raises. IMMEDIATE takes the write lock up
    front, so a concurrent writer (another process) waits for busy_timeout instead of failing
    half-way through."""
    conn.execute(f"BEGIN {mode}")
    try:
        yield
    except BaseException:
        # Some errors (e.g. disk full) already rolled the transaction back themselves.
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def created_page(conn: sqlite3.Connection, table: str, where: str, params: tuple[Any, ...], after: str | None,
                 limit: int, order: str, tiebreak: str, noun: str) -> tuple[list[dict], bool]:
    """One page of the JSON `body` of `table`'s rows that `where` selects, as OpenAI's list endpoints page objects:
    by created_at, then `tiebreak` (the order rows were made in, within one second too), after the object whose id
    is `after` (a StoreError naming the `noun` when it is not one of them); (bodies, has_more). Table, condition,
    column and direction are fixed strings, never a request's."""
    compare, direction = (">", "ASC") if order == "asc" else ("<", "DESC")
    with transaction(conn, "DEFERRED"):  # one snapshot for the cursor and the page
        if after is not None:
            row = conn.execute(f"SELECT created_at, {tiebreak} FROM {table} WHERE {where} AND id = ?",
                               (*params, after)).fetchone()
            if row is None:
                raise StoreError(f"no {noun} {after!r} to list after")
            where, params = f"{where} AND (created_at, {tiebreak}) {compare} (?, ?)", (*params, *row)
        rows = conn.execute(f"SELECT body FROM {table} WHERE {where} ORDER BY created_at {direction}, "
                            f"{tiebreak} {direction} LIMIT ?", (*params, limit + 1)).fetchall()
    return [json.loads(body) for (body,) in rows[:limit]], len(rows) > limit


def translated(exc: sqlite3.Error) -> Exception:
    """A full disk as what the API answers for it (507), a failing write as a 503; the rest as it is."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = None if code is None else code & 0xFF  # extended codes keep the primary one in their low byte
    if primary == sqlite3.SQLITE_FULL:
        return StoreFull()
    if primary == sqlite3.SQLITE_IOERR:  # a file-size limit (EFBIG) reads as an I/O error, not SQLITE_FULL
        return StoreWriteFailed()
    return exc


def migrate(conn: sqlite3.Connection, migrations: list[str], what: str) -> None:
    """Apply the migrations not applied yet (`PRAGMA user_version` counts them). The version is read inside the
    write transaction, so two processes starting together cannot both apply the same migration."""
    with transaction(conn):
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > len(migrations):
            raise StoreError(f"the {what} has schema version {version}, newer than this rostra knows "
                             f"({len(migrations)})")
        for number in range(version + 1, len(migrations) + 1):
            for statement in statements(migrations[number - 1]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number}")


def connect(path: Path, migrations: list[str], what: str) -> sqlite3.Connection:
    """A connection to `path` (or MEMORY) set up as every rostra store wants it, its schema migrated."""
    on_disk = str(path) != MEMORY
    if on_disk:
        path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path if on_disk else MEMORY, check_same_thread=False, isolation_level=None)
    try:
        # Wait for another process's write lock instead of failing at once.
        conn.execute("PRAGMA busy_timeout = 10000")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if on_disk and str(mode).lower() != "wal":
            raise StoreError(f"could not put {path} in WAL mode (got {mode!r})")
        # NORMAL is durable across application crashes in WAL mode; only an OS crash or
        # power loss can lose the last commits.
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        migrate(conn, migrations, what)
    except sqlite3.Error as exc:
        conn.close()
        raise StoreError(f"cannot open the {what} {path}: {exc}") from exc
    except BaseException:
        conn.close()
        raise
    return conn


class ConnectionThread:
    """One connection and the one thread that uses it."""

    def __init__(self, path: Path, migrations: list[str], what: str, thread_name: str):
        self.path, self._migrations, self._what, self._thread_name = path, migrations, what, thread_name
        self._conn: sqlite3.Connection | None = None
        self._executor: ThreadPoolExecutor | None = None

    @property
    def is_open(self) -> bool:
        return self._executor is not None

    async def open(self) -> None:
        if self._executor is not None:
            raise StoreError(f"the {self._what} is already open")
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self._thread_name)
        try:
            self._conn = await asyncio.get_running_loop().run_in_executor(
                self._executor, connect, self.path, self._migrations, self._what)
        except BaseException:
            self._executor.shutdown(wait=False)
            self._executor = None
            raise

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(conn, *args)` on the thread."""
        if self._executor is None or self._conn is None:
            raise StoreError(f"the {self._what} is not open")
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, fn, self._conn, *args)
        except sqlite3.Error as exc:
            raise translated(exc) from exc

    async def close(self, last: Callable[[sqlite3.Connection], None] | None = None) -> None:
        """Run `last(conn)` (a checkpoint, say), then close the connection and stop the thread."""
        if self._executor is None:
            return
        executor, conn = self._executor, self._conn
        self._executor = self._conn = None
        try:
            if conn is not None:
                await asyncio.get_running_loop().run_in_executor(executor, _closed, conn, last)
        finally:
            executor.shutdown(wait=True)


def _closed(conn: sqlite3.Connection, last: Callable[[sqlite3.Connection], None] | None) -> None:
    try:
        if last is not None:
            last(conn)
    finally:
        conn.close()
