"""The Responses API store on SQLite.

One connection, used only from one dedicated worker thread (sqlite_connection.py, as the batch store's): the event
loop never blocks on disk and access to the connection is serialised without locks.

Several server processes on one machine may share the file, as replicas share PostgreSQL: WAL mode (readers never
wait for the writer), a busy timeout (a writer waits for another's transaction instead of failing), writes that take
the write lock up front (BEGIN IMMEDIATE), leases with owner-checked updates, and at start-up a lock file that tells
a process whether it is the only one (process_lock.py). `SqliteResponseStore.in_memory()` is a store of one process's
own that no file holds (an embedding-only server's).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from rostra.store.base import (
    INTERRUPTED_ERROR,
    LEASE_EXPIRED_ERROR,
    RUNNING_STATUSES,
    ResponseStore,
    Settle,
    StoreError,
    numbered,
    settle_failed,
)
from rostra.store.process_lock import StoreUsers
from rostra.store.sqlite_connection import MEMORY, ConnectionThread, created_page
from rostra.store.sqlite_images import MIGRATION as IMAGES_MIGRATION
from rostra.store.sqlite_images import forget_unused, loaded, stored_bodies
from rostra.store.sqlite_connection import transaction as _transaction
from rostra.store.tables import ItemTable, dumps
from rostra.store.tenancy import EVERYONE, Tenant

T = TypeVar("T")

# Schema migrations, applied in order. The database's `PRAGMA user_version` is the number of
# migrations already applied. Append new scripts; never edit one that has shipped.
MIGRATIONS: list[str] = [
    # 1: the initial schema.
    """
    CREATE TABLE responses (
        id TEXT PRIMARY KEY,
        created_at INTEGER,
        status TEXT,
        body TEXT
    );
    CREATE INDEX responses_status ON responses(status);
    CREATE TABLE input_items (
        response_id TEXT REFERENCES responses(id) ON DELETE CASCADE,
        position INTEGER,
        item_id TEXT,
        body TEXT,
        PRIMARY KEY (response_id, position)
    );
    CREATE TABLE events (
        response_id TEXT REFERENCES responses(id) ON DELETE CASCADE,
        sequence_number INTEGER,
        body TEXT,
        PRIMARY KEY (response_id, sequence_number)
    );
    """,
    # 2: conversations and their items.
    """
    CREATE TABLE conversations (
        id TEXT PRIMARY KEY,
        created_at INTEGER,
        body TEXT
    );
    CREATE TABLE conversation_items (
        conversation_id TEXT REFERENCES conversations(id) ON DELETE CASCADE,
        position INTEGER,
        item_id TEXT,
        body TEXT,
        PRIMARY KEY (conversation_id, position)
    );
    CREATE INDEX conversation_items_by_id ON conversation_items(conversation_id, item_id);
    """,
    # 3: leases of running responses (the replica that runs one, until when) and cancel requests.
    """
    ALTER TABLE responses ADD COLUMN owner TEXT;
    ALTER TABLE responses ADD COLUMN lease_until REAL;
    ALTER TABLE responses ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;
    """,
    # 4: items found by id (item_reference input items): output items in a table of their own, filled from the
    # responses already stored; input items indexed by id.
    """
    CREATE TABLE output_items (
        response_id TEXT REFERENCES responses(id) ON DELETE CASCADE,
        item_id TEXT,
        body TEXT
    );
    CREATE INDEX output_items_by_id ON output_items(item_id);
    CREATE INDEX input_items_by_item_id ON input_items(item_id);
    INSERT INTO output_items (response_id, item_id, body)
        SELECT responses.id, json_extract(output.value, '$.id'), output.value
        FROM responses, json_each(responses.body, '$.output') AS output
        WHERE json_extract(output.value, '$.id') IS NOT NULL;
    """,
    # 5: tenants (the fingerprint of the API key that made a row; NULL: shared, as every row stored before).
    """
    ALTER TABLE responses ADD COLUMN tenant TEXT;
    ALTER TABLE conversations ADD COLUMN tenant TEXT;
    CREATE INDEX conversations_by_tenant ON conversations(tenant, created_at, id);
    """,
    # 6: images stored once (sqlite_images.py).
    IMAGES_MIGRATION,
]
# Rows a tenant may see (parameters: Tenant.sql_params()).
_VISIBLE = "(? OR tenant IS NULL OR tenant = ?)"
_RUNNING = "status IN (" + ", ".join(f"'{status}'" for status in RUNNING_STATUSES) + ")"


_RESPONSE_ITEMS = ItemTable("responses", "input_items", "response_id", "response")
_CONVERSATION_ITEMS = ItemTable("conversations", "conversation_items", "conversation_id", "conversation")


def _page(conn: sqlite3.Connection, table: ItemTable, owner: str, after: str | None, limit: int,
          order: str) -> tuple[list[dict], bool]:
    """One page of an owner's items, as OpenAI's list endpoints page them: (items, has_more)."""
    if order not in ("asc", "desc"):
        raise ValueError(f"order must be 'asc' or 'desc', not {order!r}")
    if limit < 1:
        raise ValueError(f"limit must be at least 1, not {limit}")
    # A read transaction, so the cursor lookup and the page see the same snapshot. Table and column
    # names, the operator and the direction all come from fixed strings, never from a request.
    with _transaction(conn, "DEFERRED"):
        if conn.execute(f"SELECT 1 FROM {table.owners} WHERE id = ?", (owner,)).fetchone() is None:
            raise StoreError(f"no {table.owner_name} {owner!r}")
        # Positions grow in the order items were added; "after" is a position bound in the
        # direction of `order`.
        compare, direction = (">", "ASC") if order == "asc" else ("<", "DESC")
        bound: int | None = None
        if after is not None:
            row = conn.execute(
                f"SELECT position FROM {table.items} WHERE {table.owner_column} = ? AND item_id = ? "
                "ORDER BY position LIMIT 1", (owner, after)).fetchone()
            if row is None:
                raise StoreError(f"no item {after!r} in {table.owner_name} {owner!r}")
            bound = row[0]
        where = f"{table.owner_column} = ?" + ("" if bound is None else f" AND position {compare} ?")
        params: tuple = (owner,) if bound is None else (owner, bound)
        # One extra row tells whether there is another page.
        rows = conn.execute(
            f"SELECT body FROM {table.items} WHERE {where} ORDER BY position {direction} LIMIT ?",
            (*params, limit + 1)).fetchall()
    return loaded(conn, [body for (body,) in rows[:limit]]), len(rows) > limit


def _keep_output_items(conn: sqlite3.Connection, response: dict) -> None:
    """The response's output items, findable by id (inside the caller's transaction)."""
    conn.execute("DELETE FROM output_items WHERE response_id = ?", (response["id"],))
    conn.executemany("INSERT INTO output_items (response_id, item_id, body) VALUES (?, ?, ?)",
                     [(response["id"], item["id"], dumps(item)) for item in response.get("output") or ()
                      if item.get("id")])




class SqliteResponseStore(ResponseStore):
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._thread = ConnectionThread(self.path, MIGRATIONS, "response store", "rostra-store")
        self._users = StoreUsers(self.path.with_name(self.path.name + ".lock"))

    @classmethod
    def in_memory(cls) -> "SqliteResponseStore":
        """A store in this process's memory: nothing on disk, nothing shared, gone with the process."""
        return cls(MEMORY)

    @property
    def _on_disk(self) -> bool:
        return str(self.path) != MEMORY

    async def claim(self) -> bool:
        if not self._on_disk:
            return True  # no other process can see it
        return await asyncio.to_thread(self._users.join)  # may wait for another process's recovery

    def admit_others(self) -> None:
        self._users.admit_others()

    def release(self) -> None:
        self._users.leave()

    # -- plumbing ---------------------------------------------------------------------------

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn(conn, *args)` on the worker thread."""
        return await self._thread.run(fn, *args)

    async def open(self) -> None:
        await self._thread.open()

    async def close(self) -> None:
        try:
            await self._thread.close(self._checkpoint)
        finally:
            self.release()  # after its last write: a process that starts now finds this one gone

    @staticmethod
    def _checkpoint(conn: sqlite3.Connection) -> None:
        # Fold the WAL back into the main file so it is self-contained when we are gone.
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    # -- responses --------------------------------------------------------------------------

    async def create(self, response: dict, input_items: list[dict], *, owner: str | None = None,
                     lease_seconds: float | None = None, tenant: str | None = None) -> None:
        lease_until = None if owner is None or lease_seconds is None else time.time() + lease_seconds
        await self._run(self._create_sync, response, input_items, owner, lease_until, tenant)

    @staticmethod
    def _create_sync(conn: sqlite3.Connection, response: dict, input_items: list[dict], owner: str | None,
                     lease_until: float | None, tenant: str | None) -> None:
        try:
            with _transaction(conn):
                conn.execute(
                    "INSERT INTO responses (id, created_at, status, body, owner, lease_until, tenant) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (response["id"], response.get("created_at"), response.get("status"), dumps(response),
                     owner, lease_until, tenant))
                bodies = stored_bodies(conn, response["id"], input_items)
                conn.executemany(
                    "INSERT INTO input_items (response_id, position, item_id, body) VALUES (?, ?, ?, ?)",
                    [(response["id"], position, item.get("id"), body)
                     for position, (item, body) in enumerate(zip(input_items, bodies))])
                _keep_output_items(conn, response)
        except sqlite3.IntegrityError as exc:
            raise StoreError(f"response {response['id']!r} already exists") from exc

    async def update(self, response: dict) -> None:
        await self._run(self._update_sync, response)

    @staticmethod
    def _update_sync(conn: sqlite3.Connection, response: dict) -> None:
        cursor = conn.execute(
            "UPDATE responses SET created_at = ?, status = ?, body = ? WHERE id = ?",
            (response.get("created_at"), response.get("status"), dumps(response), response["id"]))
        if cursor.rowcount == 0:
            raise StoreError(f"no response {response['id']!r} to update")

    async def progress(self, response: dict, owner: str) -> bool:
        return await self._run(self._progress_sync, response, owner)

    @staticmethod
    def _progress_sync(conn: sqlite3.Connection, response: dict, owner: str) -> bool:
        return conn.execute(
            f"UPDATE responses SET status = ?, body = ? WHERE id = ? AND owner = ? AND {_RUNNING}",
            (response.get("status"), dumps(response), response["id"], owner)).rowcount > 0

    async def finish(self, response: dict, owner: str) -> bool:
        return await self._run(self._finish_sync, response, owner)

    @staticmethod
    def _finish_sync(conn: sqlite3.Connection, response: dict, owner: str) -> bool:
        with _transaction(conn):
            cursor = conn.execute(
                "UPDATE responses SET status = ?, body = ?, owner = NULL, lease_until = NULL "
                f"WHERE id = ? AND owner = ? AND {_RUNNING}",
                (response.get("status"), dumps(response), response["id"], owner))
            if cursor.rowcount > 0:
                _keep_output_items(conn, response)
        return cursor.rowcount > 0

    async def find_item(self, item_id: str, tenant: Tenant = EVERYONE) -> dict | None:
        return await self._run(self._find_item_sync, item_id, tenant)

    @staticmethod
    def _find_item_sync(conn: sqlite3.Connection, item_id: str, tenant: Tenant) -> dict | None:
        # Correlated, so each candidate costs one primary-key lookup of its response, whatever the store's size.
        def visible(table: str) -> str:
            return f"EXISTS (SELECT 1 FROM responses WHERE responses.id = {table}.response_id AND {_VISIBLE})"
        row = (conn.execute(f"SELECT body FROM output_items WHERE item_id = ? AND {visible('output_items')} LIMIT 1",
                            (item_id, *tenant.sql_params())).fetchone()
               or conn.execute(f"SELECT body FROM input_items WHERE item_id = ? AND {visible('input_items')} "
                               "ORDER BY rowid LIMIT 1", (item_id, *tenant.sql_params())).fetchone())
        return None if row is None else loaded(conn, [row[0]])[0]

    async def get(self, response_id: str, tenant: Tenant = EVERYONE) -> dict | None:
        return await self._run(self._get_sync, response_id, tenant)

    @staticmethod
    def _get_sync(conn: sqlite3.Connection, response_id: str, tenant: Tenant) -> dict | None:
        row = conn.execute(f"SELECT body FROM responses WHERE id = ? AND {_VISIBLE}",
                           (response_id, *tenant.sql_params())).fetchone()
        return None if row is None else json.loads(row[0])

    async def delete(self, response_id: str) -> bool:
        return await self._run(self._delete_sync, response_id)

    @staticmethod
    def _delete_sync(conn: sqlite3.Connection, response_id: str) -> bool:
        # Input items and events go with it: ON DELETE CASCADE (foreign_keys is ON).
        with _transaction(conn):
            deleted = conn.execute("DELETE FROM responses WHERE id = ?", (response_id,)).rowcount > 0
            forget_unused(conn, [response_id] if deleted else [])
        return deleted

    async def delete_finished_before(self, created_before: int) -> int:
        return await self._run(self._delete_finished_before_sync, created_before)

    @staticmethod
    def _delete_finished_before_sync(conn: sqlite3.Connection, created_before: int) -> int:
        placeholders = ", ".join("?" for _ in RUNNING_STATUSES)
        with _transaction(conn):
            deleted = [row[0] for row in conn.execute(
                f"DELETE FROM responses WHERE created_at < ? AND status NOT IN ({placeholders}) RETURNING id",
                (created_before, *RUNNING_STATUSES)).fetchall()]
            forget_unused(conn, deleted)
        return len(deleted)

    # -- input items ------------------------------------------------------------------------

    async def input_items(self, response_id: str, *, after: str | None = None, limit: int = 20,
                          order: str = "desc") -> tuple[list[dict], bool]:
        return await self._run(self._input_items_sync, response_id, after, limit, order)

    @staticmethod
    def _input_items_sync(conn: sqlite3.Connection, response_id: str, after: str | None,
                          limit: int, order: str) -> tuple[list[dict], bool]:
        return _page(conn, _RESPONSE_ITEMS, response_id, after, limit, order)

    # -- events -----------------------------------------------------------------------------

    async def append_events(self, response_id: str, events: list[dict]) -> None:
        if events:
            await self._run(self._append_events_sync, response_id, events)

    @staticmethod
    def _append_events_sync(conn: sqlite3.Connection, response_id: str, events: list[dict]) -> None:
        rows = [(response_id, event["sequence_number"], dumps(event)) for event in events]
        insert = "INSERT INTO events (response_id, sequence_number, body) VALUES (?, ?, ?)"
        try:
            if len(rows) == 1:  # autocommit: one statement is its own transaction
                conn.execute(insert, rows[0])
            else:
                with _transaction(conn):
                    conn.executemany(insert, rows)
        except sqlite3.IntegrityError as exc:
            # Either the foreign key (unknown response) or the primary key (repeated number).
            numbers = f"{rows[0][1]}" if len(rows) == 1 else f"{rows[0][1]}-{rows[-1][1]}"
            raise StoreError(f"cannot log events {numbers} for response {response_id!r}: {exc}") from exc

    async def events(self, response_id: str, starting_after: int | None = None) -> list[dict]:
        return await self._run(self._events_sync, response_id, starting_after)

    @staticmethod
    def _events_sync(conn: sqlite3.Connection, response_id: str, starting_after: int | None) -> list[dict]:
        if starting_after is None:
            rows = conn.execute("SELECT body FROM events WHERE response_id = ? ORDER BY sequence_number",
                                (response_id,)).fetchall()
        else:
            rows = conn.execute("SELECT body FROM events WHERE response_id = ? AND sequence_number > ? "
                                "ORDER BY sequence_number", (response_id, starting_after)).fetchall()
        return [json.loads(body) for (body,) in rows]

    # -- leases and recovery -----------------------------------------------------------------

    async def renew_leases(self, owner: str, response_ids: list[str], lease_seconds: float) -> dict[str, bool]:
        if not response_ids:
            return {}
        return await self._run(self._renew_leases_sync, owner, list(response_ids), time.time() + lease_seconds)

    @staticmethod
    def _renew_leases_sync(conn: sqlite3.Connection, owner: str, response_ids: list[str],
                           lease_until: float) -> dict[str, bool]:
        held: dict[str, bool] = {}
        with _transaction(conn):
            for response_id in response_ids:
                row = conn.execute(
                    f"UPDATE responses SET lease_until = ? WHERE id = ? AND owner = ? AND {_RUNNING} "
                    "RETURNING cancel_requested", (lease_until, response_id, owner)).fetchone()
                if row is not None:
                    held[response_id] = bool(row[0])
        return held

    async def request_cancel(self, response_id: str) -> bool:
        return await self._run(self._request_cancel_sync, response_id)

    @staticmethod
    def _request_cancel_sync(conn: sqlite3.Connection, response_id: str) -> bool:
        return conn.execute(f"UPDATE responses SET cancel_requested = 1 WHERE id = ? AND {_RUNNING}",
                            (response_id,)).rowcount > 0

    async def fail_expired_leases(self, settle: Settle = settle_failed) -> list[str]:
        return await self._run(self._fail_running_sync, "lease_until < ?", (time.time(),), LEASE_EXPIRED_ERROR,
                               settle)

    async def mark_interrupted(self, settle: Settle = settle_failed) -> int:
        return len(await self._run(self._fail_running_sync, "1", (), INTERRUPTED_ERROR, settle))

    @staticmethod
    def _fail_running_sync(conn: sqlite3.Connection, condition: str, params: tuple, error: dict,
                           settle: Settle) -> list[str]:
        """Fail the running responses that match `condition` (a fixed SQL string), each with a
        terminal `response.failed` event after its last one, in one transaction."""
        with _transaction(conn):
            rows = conn.execute(f"SELECT id, body FROM responses WHERE {_RUNNING} AND {condition}",
                                params).fetchall()
            for response_id, body in rows:
                logged = [json.loads(event) for (event,) in conn.execute(
                    "SELECT body FROM events WHERE response_id = ? ORDER BY sequence_number", (response_id,))]
                response, tail = settle(json.loads(body), logged, error)
                number = logged[-1]["sequence_number"] + 1 if logged else 0
                conn.execute("UPDATE responses SET status = ?, body = ?, owner = NULL, lease_until = NULL "
                             "WHERE id = ?", ("failed", dumps(response), response_id))
                conn.executemany("INSERT INTO events (response_id, sequence_number, body) VALUES (?, ?, ?)",
                                 [(response_id, event["sequence_number"], dumps(event))
                                  for event in numbered(tail, number)])
        return [response_id for response_id, _ in rows]

    # -- conversations ------------------------------------------------------------------------

    async def create_conversation(self, conversation: dict, items: list[dict], tenant: str | None = None) -> None:
        await self._run(self._create_conversation_sync, conversation, items, tenant)

    @staticmethod
    def _create_conversation_sync(conn: sqlite3.Connection, conversation: dict, items: list[dict],
                                  tenant: str | None) -> None:
        try:
            with _transaction(conn):
                conn.execute("INSERT INTO conversations (id, created_at, body, tenant) VALUES (?, ?, ?, ?)",
                             (conversation["id"], conversation.get("created_at"), dumps(conversation), tenant))
                _append_items(conn, conversation["id"], items)
        except sqlite3.IntegrityError as exc:
            raise StoreError(f"conversation {conversation['id']!r} already exists") from exc

    async def get_conversation(self, conversation_id: str, tenant: Tenant = EVERYONE) -> dict | None:
        return await self._run(self._get_conversation_sync, conversation_id, tenant)

    @staticmethod
    def _get_conversation_sync(conn: sqlite3.Connection, conversation_id: str, tenant: Tenant) -> dict | None:
        row = conn.execute(f"SELECT body FROM conversations WHERE id = ? AND {_VISIBLE}",
                           (conversation_id, *tenant.sql_params())).fetchone()
        return None if row is None else json.loads(row[0])

    async def list_conversations(self, *, after: str | None = None, limit: int = 20, order: str = "desc",
                                 tenant: Tenant = EVERYONE) -> tuple[list[dict], bool]:
        return await self._run(lambda conn: created_page(conn, "conversations", _VISIBLE, tenant.sql_params(), after,
                                                         limit, order, tiebreak="id", noun="conversation"))

    async def update_conversation(self, conversation: dict) -> None:
        await self._run(self._update_conversation_sync, conversation)

    @staticmethod
    def _update_conversation_sync(conn: sqlite3.Connection, conversation: dict) -> None:
        cursor = conn.execute("UPDATE conversations SET body = ? WHERE id = ?",
                              (dumps(conversation), conversation["id"]))
        if cursor.rowcount == 0:
            raise StoreError(f"no conversation {conversation['id']!r} to update")

    async def delete_conversation(self, conversation_id: str) -> bool:
        return await self._run(self._delete_conversation_sync, conversation_id)

    @staticmethod
    def _delete_conversation_sync(conn: sqlite3.Connection, conversation_id: str) -> bool:
        # Its items go with it: ON DELETE CASCADE.
        with _transaction(conn):
            deleted = conn.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,)).rowcount > 0
            forget_unused(conn, [conversation_id] if deleted else [])
        return deleted

    async def add_conversation_items(self, conversation_id: str, items: list[dict]) -> None:
        await self._run(self._add_conversation_items_sync, conversation_id, items)

    @staticmethod
    def _add_conversation_items_sync(conn: sqlite3.Connection, conversation_id: str, items: list[dict]) -> None:
        with _transaction(conn):
            if conn.execute("SELECT 1 FROM conversations WHERE id = ?", (conversation_id,)).fetchone() is None:
                raise StoreError(f"no conversation {conversation_id!r}")
            _append_items(conn, conversation_id, items)

    async def conversation_items(self, conversation_id: str, *, after: str | None = None, limit: int = 20,
                                 order: str = "desc") -> tuple[list[dict], bool]:
        return await self._run(_page, _CONVERSATION_ITEMS, conversation_id, after, limit, order)

    async def get_conversation_item(self, conversation_id: str, item_id: str) -> dict | None:
        return await self._run(self._get_conversation_item_sync, conversation_id, item_id)

    @staticmethod
    def _get_conversation_item_sync(conn: sqlite3.Connection, conversation_id: str, item_id: str) -> dict | None:
        row = conn.execute("SELECT body FROM conversation_items WHERE conversation_id = ? AND item_id = ?",
                           (conversation_id, item_id)).fetchone()
        return None if row is None else loaded(conn, [row[0]])[0]

    async def delete_conversation_item(self, conversation_id: str, item_id: str) -> bool:
        return await self._run(self._delete_conversation_item_sync, conversation_id, item_id)

    @staticmethod
    def _delete_conversation_item_sync(conn: sqlite3.Connection, conversation_id: str, item_id: str) -> bool:
        return conn.execute("DELETE FROM conversation_items WHERE conversation_id = ? AND item_id = ?",
                            (conversation_id, item_id)).rowcount > 0


def _append_items(conn: sqlite3.Connection, conversation_id: str, items: list[dict]) -> None:
    """Items after the conversation's last one (inside the caller's transaction)."""
    last = conn.execute("SELECT COALESCE(MAX(position), -1) FROM conversation_items WHERE conversation_id = ?",
                        (conversation_id,)).fetchone()[0]
    bodies = stored_bodies(conn, conversation_id, items)
    conn.executemany(
        "INSERT INTO conversation_items (conversation_id, position, item_id, body) VALUES (?, ?, ?, ?)",
        [(conversation_id, last + 1 + offset, item.get("id"), body)
         for offset, (item, body) in enumerate(zip(items, bodies))])
