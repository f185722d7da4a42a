"""The Responses API store on PostgreSQL (asyncpg), which several rostra replicas can share.

Queries go through a connection pool. One more connection LISTENs: every event appended and every
response finished or failed is NOTIFYed on CHANNEL with the response id as payload, in the same
transaction as the write, so a follower on any replica wakes as soon as the row is visible.
Lease times come from the database's clock, so replicas whose clocks disagree still agree on
when a lease has expired.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import asyncpg

from rostra.store.base import (
    INTERRUPTED_ERROR,
    LEASE_EXPIRED_ERROR,
    RUNNING_STATUSES,
    ResponseStore,
    Settle,
    StoreError,
    Watch,
    numbered,
    settle_failed,
)
from rostra.store.postgres_images import MIGRATION as IMAGES_MIGRATION
from rostra.store.postgres_images import forget_unused, loaded, stored_bodies
from rostra.store.postgres_pool import NOW, created_page, open_pool, tenant_visible
from rostra.store.tables import ItemTable, dumps
from rostra.store.tenancy import EVERYONE, Tenant

log = logging.getLogger("rostra.store")
CHANNEL = "rostra_responses"
_RUNNING = "status IN (" + ", ".join(f"'{status}'" for status in RUNNING_STATUSES) + ")"

# Schema migrations, applied in order; rostra_schema.version is how many were applied. Append new
# scripts, never edit one that has shipped. The bodies are TEXT, not JSONB: stored exactly as given.
MIGRATIONS: list[str] = [
    # 1: the initial schema: responses with leases, conversations (SQLite's migrations 1 to 3).
    """
    CREATE TABLE rostra_responses (
        id TEXT PRIMARY KEY,
        created_at BIGINT,
        status TEXT,
        body TEXT NOT NULL,
        owner TEXT,
        lease_until DOUBLE PRECISION,
        cancel_requested BOOLEAN NOT NULL DEFAULT FALSE
    );
    CREATE INDEX rostra_responses_running ON rostra_responses (lease_until)
        WHERE status IN ('queued', 'in_progress');
    CREATE INDEX rostra_responses_created ON rostra_responses (created_at);
    CREATE TABLE rostra_input_items (
        response_id TEXT NOT NULL REFERENCES rostra_responses(id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        item_id TEXT,
        body TEXT NOT NULL,
        PRIMARY KEY (response_id, position)
    );
    CREATE INDEX rostra_input_items_by_id ON rostra_input_items (response_id, item_id);
    CREATE TABLE rostra_events (
        response_id TEXT NOT NULL REFERENCES rostra_responses(id) ON DELETE CASCADE,
        sequence_number INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (response_id, sequence_number)
    );
    CREATE TABLE rostra_conversations (
        id TEXT PRIMARY KEY,
        created_at BIGINT,
        body TEXT NOT NULL
    );
    CREATE TABLE rostra_conversation_items (
        conversation_id TEXT NOT NULL REFERENCES rostra_conversations(id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        item_id TEXT,
        body TEXT NOT NULL,
        PRIMARY KEY (conversation_id, position)
    );
    CREATE INDEX rostra_conversation_items_by_id ON rostra_conversation_items (conversation_id, item_id);
    """,
    # 2: items found by id (item_reference input items), as SQLite's migration 4.
    """
    CREATE TABLE rostra_output_items (
        response_id TEXT NOT NULL REFERENCES rostra_responses(id) ON DELETE CASCADE,
        item_id TEXT NOT NULL,
        body TEXT NOT NULL
    );
    CREATE INDEX rostra_output_items_by_item_id ON rostra_output_items (item_id);
    CREATE INDEX rostra_input_items_by_item_id ON rostra_input_items (item_id);
    INSERT INTO rostra_output_items (response_id, item_id, body)
        SELECT rostra_responses.id, output.value->>'id', output.value::text
        FROM rostra_responses, jsonb_array_elements(rostra_responses.body::jsonb->'output') AS output
        WHERE output.value->>'id' IS NOT NULL;
    """,
    # 3: tenants, as SQLite's migration 5 (NULL: shared, as every row stored before).
    """
    ALTER TABLE rostra_responses ADD COLUMN tenant TEXT;
    ALTER TABLE rostra_conversations ADD COLUMN tenant TEXT;
    CREATE INDEX rostra_conversations_by_tenant ON rostra_conversations (tenant, created_at, id);
    """,
    # 4: images stored once (postgres_images.py), as SQLite's migration 6.
    IMAGES_MIGRATION,
]


async def _keep_output_items(conn: asyncpg.Connection, response: dict) -> None:
    """The response's output items, findable by id (inside the caller's transaction)."""
    await conn.execute("DELETE FROM rostra_output_items WHERE response_id = $1", response["id"])
    await conn.executemany("INSERT INTO rostra_output_items (response_id, item_id, body) VALUES ($1, $2, $3)",
                           [(response["id"], item["id"], dumps(item)) for item in response.get("output") or ()
                            if item.get("id")])


_RESPONSE_ITEMS = ItemTable("rostra_responses", "rostra_input_items", "response_id", "response")
_CONVERSATION_ITEMS = ItemTable("rostra_conversations", "rostra_conversation_items", "conversation_id",
                                 "conversation")


async def _page(pool: asyncpg.Pool, table: ItemTable, owner: str, after: str | None, limit: int,
                order: str) -> tuple[list[dict], bool]:
    """One page of an owner's items, as OpenAI's list endpoints page them: (items, has_more)."""
    if order not in ("asc", "desc"):
        raise ValueError(f"order must be 'asc' or 'desc', not {order!r}")
    if limit < 1:
        raise ValueError(f"limit must be at least 1, not {limit}")
    # One snapshot for the cursor lookup and the page. Table and column names, the operator and the
    # direction all come from fixed strings, never from a request.
    async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        if await conn.fetchval(f"SELECT 1 FROM {table.owners} WHERE id = $1", owner) is None:
            raise StoreError(f"no {table.owner_name} {owner!r}")
        bound = None
        if after is not None:
            bound = await conn.fetchval(
                f"SELECT position FROM {table.items} WHERE {table.owner_column} = $1 AND item_id = $2 "
                "ORDER BY position LIMIT 1", owner, after)
            if bound is None:
                raise StoreError(f"no item {after!r} in {table.owner_name} {owner!r}")
        compare, direction = (">", "ASC") if order == "asc" else ("<", "DESC")
        # One extra row tells whether there is another page.
        rows = await conn.fetch(
            f"SELECT body FROM {table.items} WHERE {table.owner_column} = $1 "
            f"AND ($2::int IS NULL OR position {compare} $2) ORDER BY position {direction} LIMIT $3",
            owner, bound, limit + 1)
        page = await loaded(conn, [row["body"] for row in rows[:limit]])
    return page, len(rows) > limit


class _NotifiedWatch(Watch):
    """A watch woken by the store's LISTEN connection; it still times out, in case that
    connection was lost."""

    def __init__(self, store: "PostgresResponseStore", response_id: str):
        super().__init__(store.poll_interval)
        self._store, self._response_id = store, response_id
        self._changed = asyncio.Event()
        store._watches.setdefault(response_id, set()).add(self._changed)

    async def wait(self, timeout: float) -> bool:
        try:
            async with asyncio.timeout(timeout):
                await self._changed.wait()
        except TimeoutError:
            return False
        self._changed.clear()
        return True

    def close(self) -> None:
        waiting = self._store._watches.get(self._response_id)
        if waiting is not None:
            waiting.discard(self._changed)
            if not waiting:
                del self._store._watches[self._response_id]


class PostgresResponseStore(ResponseStore):
    poll_interval = 1.0  # only a fallback: notifications wake followers at once

    def __init__(self, dsn: str, *, pool_size: int = 10):
        self.dsn = dsn
        self.pool_size = pool_size
        self._pool: asyncpg.Pool | None = None
        self._listener: asyncpg.Connection | None = None
        self._relisten: asyncio.Task | None = None
        self._watches: dict[str, set[asyncio.Event]] = {}

    # -- plumbing ---------------------------------------------------------------------------

    @property
    def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise StoreError("the response store is not open")
        return self._pool

    async def open(self) -> None:
        if self._pool is not None:
            raise StoreError("the response store is already open")
        pool = await open_pool(self.dsn, self.pool_size, MIGRATIONS, "rostra_schema", "response store")
        try:
            await self._listen()
        except BaseException:
            await pool.close()
            raise
        self._pool = pool

    async def _listen(self) -> None:
        listener = await asyncpg.connect(self.dsn)
        await listener.add_listener(CHANNEL, self._notified)
        listener.add_termination_listener(self._listener_lost)
        self._listener = listener

    def _listener_lost(self, _conn: Any) -> None:
        """The LISTEN connection died (the server restarted, a network cut): followers fall back on
        their timeouts until a new one listens."""
        if self._pool is not None:
            self._listener = None
            self._relisten = asyncio.get_running_loop().create_task(self._listen_again())

    async def _listen_again(self) -> None:
        while self._pool is not None:
            try:
                await self._listen()
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                log.warning("cannot LISTEN for response events again (%s); retrying", exc)
                await asyncio.sleep(self.poll_interval)
                continue
            log.info("listening for response events again")
            for waiting in list(self._watches.values()):  # what happened meanwhile went unnotified
                for changed in waiting:
                    changed.set()
            return

    async def close(self) -> None:
        pool, listener, relisten = self._pool, self._listener, self._relisten
        self._pool = self._listener = self._relisten = None
        if relisten is not None:
            relisten.cancel()
        if listener is not None:
            await listener.close()
        if pool is not None:
            await pool.close()

    def _notified(self, _conn: Any, _pid: int, _channel: str, response_id: str) -> None:
        for changed in self._watches.get(response_id, ()):
            changed.set()

    def watch(self, response_id: str) -> Watch:
        return _NotifiedWatch(self, response_id)

    # -- responses --------------------------------------------------------------------------

    async def create(self, response: dict, input_items: list[dict], *, owner: str | None = None,
                     lease_seconds: float | None = None, tenant: str | None = None) -> None:
        lease = None if owner is None else lease_seconds
        async with self.pool.acquire() as conn, conn.transaction():
            try:
                await conn.execute(
                    "INSERT INTO rostra_responses (id, created_at, status, body, owner, lease_until, tenant) "
                    f"VALUES ($1, $2, $3, $4, $5, {NOW} + $6::float8, $7)",
                    response["id"], response.get("created_at"), response.get("status"), dumps(response),
                    owner, lease, tenant)
            except asyncpg.UniqueViolationError as exc:
                raise StoreError(f"response {response['id']!r} already exists") from exc
            bodies = await stored_bodies(conn, response["id"], input_items)
            await conn.executemany(
                "INSERT INTO rostra_input_items (response_id, position, item_id, body) VALUES ($1, $2, $3, $4)",
                [(response["id"], position, item.get("id"), body)
                 for position, (item, body) in enumerate(zip(input_items, bodies))])
            await _keep_output_items(conn, response)

    async def update(self, response: dict) -> None:
        done = await self.pool.execute(
            "WITH changed AS (UPDATE rostra_responses SET created_at = $1, status = $2, body = $3 WHERE id = $4 "
            f"RETURNING id) SELECT pg_notify('{CHANNEL}', id) FROM changed",
            response.get("created_at"), response.get("status"), dumps(response), response["id"])
        if done == "SELECT 0":
            raise StoreError(f"no response {response['id']!r} to update")

    async def progress(self, response: dict, owner: str) -> bool:
        done = await self.pool.execute(
            "WITH changed AS (UPDATE rostra_responses SET status = $1, body = $2 "
            f"WHERE id = $3 AND owner = $4 AND {_RUNNING} RETURNING id) "
            f"SELECT pg_notify('{CHANNEL}', id) FROM changed",
            response.get("status"), dumps(response), response["id"], owner)
        return done != "SELECT 0"

    async def finish(self, response: dict, owner: str) -> bool:
        async with self.pool.acquire() as conn, conn.transaction():
            done = await conn.execute(
                "WITH changed AS (UPDATE rostra_responses SET status = $1, body = $2, owner = NULL, lease_until = NULL "
                f"WHERE id = $3 AND owner = $4 AND {_RUNNING} RETURNING id) "
                f"SELECT pg_notify('{CHANNEL}', id) FROM changed",
                response.get("status"), dumps(response), response["id"], owner)
            if done != "SELECT 0":
                await _keep_output_items(conn, response)
        return done != "SELECT 0"

    async def find_item(self, item_id: str, tenant: Tenant = EVERYONE) -> dict | None:
        def visible(table: str) -> str:  # one primary-key lookup per candidate item
            return (f"EXISTS (SELECT 1 FROM rostra_responses WHERE rostra_responses.id = {table}.response_id "
                    f"AND {tenant_visible(2)})")
        body = (await self.pool.fetchval(f"SELECT body FROM rostra_output_items WHERE item_id = $1 AND "
                                         f"{visible('rostra_output_items')} LIMIT 1", item_id, *tenant.sql_params())
                or await self.pool.fetchval(f"SELECT body FROM rostra_input_items WHERE item_id = $1 AND "
                                            f"{visible('rostra_input_items')} ORDER BY response_id, position LIMIT 1",
                                            item_id, *tenant.sql_params()))
        return None if body is None else (await loaded(self.pool, [body]))[0]

    async def get(self, response_id: str, tenant: Tenant = EVERYONE) -> dict | None:
        body = await self.pool.fetchval(f"SELECT body FROM rostra_responses WHERE id = $1 AND {tenant_visible(2)}",
                                        response_id, *tenant.sql_params())
        return None if body is None else json.loads(body)

    async def delete(self, response_id: str) -> bool:
        # Input items and events go with it (ON DELETE CASCADE); followers wake and find it gone.
        deleted = await self.pool.fetchval(
            "WITH gone AS (DELETE FROM rostra_responses WHERE id = $1 RETURNING id) "
            f"SELECT pg_notify('{CHANNEL}', id) IS NOT NULL FROM gone", response_id)
        await forget_unused(self.pool, [response_id] if deleted else [])
        return bool(deleted)

    async def delete_finished_before(self, created_before: int) -> int:
        gone = [row["id"] for row in await self.pool.fetch(
            f"DELETE FROM rostra_responses WHERE created_at < $1 AND NOT {_RUNNING} RETURNING id", created_before)]
        await forget_unused(self.pool, gone)
        return len(gone)

    # -- input items ------------------------------------------------------------------------

    async def input_items(self, response_id: str, *, after: str | None = None, limit: int = 20,
                          order: str = "desc") -> tuple[list[dict], bool]:
        return await _page(self.pool, _RESPONSE_ITEMS, response_id, after, limit, order)

    # -- events -----------------------------------------------------------------------------

    async def append_events(self, response_id: str, events: list[dict]) -> None:
        if not events:
            return
        numbers = [event["sequence_number"] for event in events]
        try:
            # One statement, so one transaction, and one notification for the whole batch.
            await self.pool.execute(
                "WITH added AS (INSERT INTO rostra_events (response_id, sequence_number, body) "
                "SELECT $1, number, body FROM unnest($2::int[], $3::text[]) AS batch(number, body) RETURNING 1) "
                f"SELECT pg_notify('{CHANNEL}', $1) WHERE EXISTS (SELECT 1 FROM added)",
                response_id, numbers, [dumps(event) for event in events])
        except asyncpg.IntegrityConstraintViolationError as exc:
            # Either the foreign key (unknown response) or the primary key (repeated number).
            shown = f"{numbers[0]}" if len(numbers) == 1 else f"{numbers[0]}-{numbers[-1]}"
            raise StoreError(f"cannot log events {shown} for response {response_id!r}: {exc}") from exc

    async def events(self, response_id: str, starting_after: int | None = None) -> list[dict]:
        rows = await self.pool.fetch(
            "SELECT body FROM rostra_events WHERE response_id = $1 AND sequence_number > $2 "
            "ORDER BY sequence_number", response_id, -1 if starting_after is None else starting_after)
        return [json.loads(row["body"]) for row in rows]

    # -- leases and recovery -----------------------------------------------------------------

    async def renew_leases(self, owner: str, response_ids: list[str], lease_seconds: float) -> dict[str, bool]:
        if not response_ids:
            return {}
        rows = await self.pool.fetch(
            f"UPDATE rostra_responses SET lease_until = {NOW} + $3::float8 "
            f"WHERE id = ANY($1::text[]) AND owner = $2 AND {_RUNNING} RETURNING id, cancel_requested",
            list(response_ids), owner, lease_seconds)
        return {row["id"]: row["cancel_requested"] for row in rows}

    async def request_cancel(self, response_id: str) -> bool:
        done = await self.pool.execute(
            f"UPDATE rostra_responses SET cancel_requested = TRUE WHERE id = $1 AND {_RUNNING}", response_id)
        return done != "UPDATE 0"

    async def fail_expired_leases(self, settle: Settle = settle_failed) -> list[str]:
        return await self._fail_running(f"lease_until < {NOW}", LEASE_EXPIRED_ERROR, settle)

    async def mark_interrupted(self, settle: Settle = settle_failed) -> int:
        return len(await self._fail_running("TRUE", INTERRUPTED_ERROR, settle))

    async def _fail_running(self, condition: str, error: dict, settle: Settle) -> list[str]:
        """Fail the running responses that match `condition` (a fixed SQL string), each with a
        terminal `response.failed` event after its last one, in one transaction. Rows another
        transaction holds (a replica failing them too, or the runner appending) are skipped: the
        next sweep sees them again."""
        async with self.pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(f"SELECT id, body FROM rostra_responses WHERE {_RUNNING} AND {condition} "
                                    "FOR UPDATE SKIP LOCKED")
            for row in rows:
                logged = [json.loads(event["body"]) for event in await conn.fetch(
                    "SELECT body FROM rostra_events WHERE response_id = $1 ORDER BY sequence_number", row["id"])]
                response, tail = settle(json.loads(row["body"]), logged, error)
                number = logged[-1]["sequence_number"] + 1 if logged else 0
                await conn.execute("UPDATE rostra_responses SET status = 'failed', body = $2, owner = NULL, "
                                   "lease_until = NULL WHERE id = $1", row["id"], dumps(response))
                await conn.executemany(
                    "INSERT INTO rostra_events (response_id, sequence_number, body) VALUES ($1, $2, $3)",
                    [(row["id"], event["sequence_number"], dumps(event)) for event in numbered(tail, number)])
                await conn.execute(f"SELECT pg_notify('{CHANNEL}', $1)", row["id"])
        return [row["id"] for row in rows]


    # -- conversations ------------------------------------------------------------------------

    async def create_conversation(self, conversation: dict, items: list[dict], tenant: str | None = None) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            try:
                await conn.execute("INSERT INTO rostra_conversations (id, created_at, body, tenant) "
                                   "VALUES ($1, $2, $3, $4)",
                                   conversation["id"], conversation.get("created_at"), dumps(conversation), tenant)
            except asyncpg.UniqueViolationError as exc:
                raise StoreError(f"conversation {conversation['id']!r} already exists") from exc
            await _append_items(conn, conversation["id"], items)

    async def get_conversation(self, conversation_id: str, tenant: Tenant = EVERYONE) -> dict | None:
        body = await self.pool.fetchval(f"SELECT body FROM rostra_conversations WHERE id = $1 AND {tenant_visible(2)}",
                                        conversation_id, *tenant.sql_params())
        return None if body is None else json.loads(body)

    async def list_conversations(self, *, after: str | None = None, limit: int = 20, order: str = "desc",
                                 tenant: Tenant = EVERYONE) -> tuple[list[dict], bool]:
        return await created_page(self.pool, "rostra_conversations", tenant_visible(1), list(tenant.sql_params()),
                                  after, limit, order, tiebreak="id", noun="conversation")

    async def update_conversation(self, conversation: dict) -> None:
        done = await self.pool.execute("UPDATE rostra_conversations SET body = $1 WHERE id = $2",
                                       dumps(conversation), conversation["id"])
        if done == "UPDATE 0":
            raise StoreError(f"no conversation {conversation['id']!r} to update")

    async def delete_conversation(self, conversation_id: str) -> bool:
        # Its items go with it: ON DELETE CASCADE.
        done = await self.pool.execute("DELETE FROM rostra_conversations WHERE id = $1", conversation_id)
        await forget_unused(self.pool, [] if done == "DELETE 0" else [conversation_id])
        return done != "DELETE 0"

    async def add_conversation_items(self, conversation_id: str, items: list[dict]) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            # The row lock orders concurrent appends (from several replicas) one after the other.
            if await conn.fetchval("SELECT 1 FROM rostra_conversations WHERE id = $1 FOR UPDATE",
                                   conversation_id) is None:
                raise StoreError(f"no conversation {conversation_id!r}")
            await _append_items(conn, conversation_id, items)

    async def conversation_items(self, conversation_id: str, *, after: str | None = None, limit: int = 20,
                                 order: str = "desc") -> tuple[list[dict], bool]:
        return await _page(self.pool, _CONVERSATION_ITEMS, conversation_id, after, limit, order)

    async def get_conversation_item(self, conversation_id: str, item_id: str) -> dict | None:
        body = await self.pool.fetchval(
            "SELECT body FROM rostra_conversation_items WHERE conversation_id = $1 AND item_id = $2",
            conversation_id, item_id)
        return None if body is None else (await loaded(self.pool, [body]))[0]

    async def delete_conversation_item(self, conversation_id: str, item_id: str) -> bool:
        done = await self.pool.execute(
            "DELETE FROM rostra_conversation_items WHERE conversation_id = $1 AND item_id = $2",
            conversation_id, item_id)
        return done != "DELETE 0"


async def _append_items(conn: asyncpg.Connection, conversation_id: str, items: list[dict]) -> None:
    """Items after the conversation's last one (inside the caller's transaction)."""
    last = await conn.fetchval("SELECT COALESCE(MAX(position), -1) FROM rostra_conversation_items "
                               "WHERE conversation_id = $1", conversation_id)
    bodies = await stored_bodies(conn, conversation_id, items)
    await conn.executemany(
        "INSERT INTO rostra_conversation_items (conversation_id, position, item_id, body) VALUES ($1, $2, $3, $4)",
        [(conversation_id, last + 1 + offset, item.get("id"), body)
         for offset, (item, body) in enumerate(zip(items, bodies))])
