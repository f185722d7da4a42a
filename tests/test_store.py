"""The Responses API store, one suite run on both backends (SQLite and a real PostgreSQL server):
round trips, paging, event logs, restart recovery, leases across replicas, schema."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest

from rostra.store import SqliteResponseStore, StoreError, default_data_dir, open_store
from rostra.store.base import LEASE_EXPIRED_ERROR
from rostra.store.postgres import MIGRATIONS as PG_MIGRATIONS
from rostra.store.postgres import PostgresResponseStore
from rostra.store.sqlite import MIGRATIONS
from rostra.store.tenancy import Tenant, fingerprint
from servers import DATA


def response(rid: str, status: str = "completed", **extra) -> dict:
    return {"id": rid, "object": "response", "created_at": 1700000000, "status": status, **extra}


def items(n: int) -> list[dict]:
    return [{"id": f"msg_{i}", "type": "message", "role": "user",
             "content": [{"type": "input_text", "text": f"text {i}"}]} for i in range(n)]


class Backend:
    """Where one test's store lives: new() opens another store on the same data (a restart, or
    another replica); query() reads the tables directly, as rostra does not."""

    def __init__(self, kind: str, location: str | Path):
        self.kind, self.location = kind, location

    def new(self):
        if self.kind == "sqlite":
            return SqliteResponseStore(self.location)
        return PostgresResponseStore(str(self.location))

    def table(self, name: str) -> str:
        return name if self.kind == "sqlite" else f"rostra_{name}"

    def query(self, sql: str) -> list[tuple]:
        """Rows of `sql`, where {responses} etc. name this backend's tables."""
        names = ("responses", "input_items", "events", "conversations", "conversation_items")
        sql = sql.format(**{name: self.table(name) for name in names})
        if self.kind == "sqlite":
            with sqlite3.connect(self.location) as conn:
                return conn.execute(sql).fetchall()

        async def fetch():
            conn = await asyncpg.connect(str(self.location))
            try:
                return [tuple(row) for row in await conn.fetch(sql)]
            finally:
                await conn.close()
        return asyncio.run(fetch())


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request, tmp_path) -> Backend:
    if request.param == "sqlite":
        return Backend("sqlite", tmp_path / "s.sqlite3")
    return Backend("postgres", request.getfixturevalue("postgres").new_database())


def run_with_store(backend: Backend, body) -> object:
    """Open a store on the backend, run `await body(store)`, close it; one event loop per call."""
    async def main():
        store = backend.new()
        await store.open()
        try:
            return await body(store)
        finally:
            await store.close()
    return asyncio.run(main())


def test_create_get_update_delete(backend):
    async def body(store):
        assert await store.get("resp_1") is None
        await store.create(response("resp_1", "in_progress", output=[]), items(2))
        assert await store.get("resp_1") == response("resp_1", "in_progress", output=[])

        done = response("resp_1", "completed", output=[{"type": "message", "id": "out_1"}])
        await store.update(done)
        assert await store.get("resp_1") == done

        with pytest.raises(StoreError):
            await store.create(response("resp_1"), [])
        with pytest.raises(StoreError):
            await store.update(response("resp_unknown"))

        assert await store.delete("resp_1") is True
        assert await store.get("resp_1") is None
        assert await store.delete("resp_1") is False
    run_with_store(backend, body)


def test_unicode_bodies(backend):
    text = "héllo — 世界 🚀 \u0000 \"quotes\" \\ back"

    async def body(store):
        await store.create(response("resp_u", instructions=text), [{"id": "msg_ü", "text": text}])
        await store.append_event("resp_u", {"sequence_number": 0, "delta": text})
        assert (await store.get("resp_u"))["instructions"] == text
        assert (await store.input_items("resp_u"))[0] == [{"id": "msg_ü", "text": text}]
        assert (await store.events("resp_u"))[0]["delta"] == text
    run_with_store(backend, body)

    # Stored as real UTF-8 text, not \u escapes (ensure_ascii=False).
    assert "世界 🚀" in backend.query("SELECT body FROM {responses}")[0][0]


def test_input_items_pagination(backend):
    async def body(store):
        await store.create(response("resp_p"), items(5))
        ids = lambda page: [item["id"] for item in page]

        page, more = await store.input_items("resp_p", order="asc")
        assert ids(page) == ["msg_0", "msg_1", "msg_2", "msg_3", "msg_4"] and more is False
        page, more = await store.input_items("resp_p")  # default: desc, limit 20
        assert ids(page) == ["msg_4", "msg_3", "msg_2", "msg_1", "msg_0"] and more is False

        page, more = await store.input_items("resp_p", order="asc", limit=2)
        assert ids(page) == ["msg_0", "msg_1"] and more is True
        page, more = await store.input_items("resp_p", order="asc", limit=2, after="msg_1")
        assert ids(page) == ["msg_2", "msg_3"] and more is True
        page, more = await store.input_items("resp_p", order="asc", limit=2, after="msg_3")
        assert ids(page) == ["msg_4"] and more is False

        page, more = await store.input_items("resp_p", order="desc", limit=2)
        assert ids(page) == ["msg_4", "msg_3"] and more is True
        page, more = await store.input_items("resp_p", order="desc", limit=3, after="msg_3")
        assert ids(page) == ["msg_2", "msg_1", "msg_0"] and more is False
        page, more = await store.input_items("resp_p", order="desc", after="msg_0")
        assert page == [] and more is False

        # Exactly `limit` left: no further page.
        page, more = await store.input_items("resp_p", order="asc", limit=5)
        assert len(page) == 5 and more is False

        await store.create(response("resp_empty"), [])
        assert await store.input_items("resp_empty") == ([], False)

        with pytest.raises(StoreError):
            await store.input_items("resp_p", after="msg_unknown")
        with pytest.raises(StoreError):
            await store.input_items("resp_unknown")
        with pytest.raises(ValueError):
            await store.input_items("resp_p", order="sideways")
        with pytest.raises(ValueError):
            await store.input_items("resp_p", limit=0)
    run_with_store(backend, body)


def test_events_append_and_starting_after(backend):
    async def body(store):
        await store.create(response("resp_e", "in_progress"), [])
        await store.create(response("resp_other", "in_progress"), [])
        for n in range(5):
            await store.append_event("resp_e", {"type": "response.output_text.delta", "sequence_number": n,
                                                "delta": str(n)})
        await store.append_event("resp_other", {"type": "x", "sequence_number": 0})

        assert [e["sequence_number"] for e in await store.events("resp_e")] == [0, 1, 2, 3, 4]
        assert [e["delta"] for e in await store.events("resp_e", starting_after=2)] == ["3", "4"]
        assert await store.events("resp_e", starting_after=4) == []
        assert [e["sequence_number"] for e in await store.events("resp_e", starting_after=-1)] == [0, 1, 2, 3, 4]
        assert await store.events("resp_unknown") == []

        with pytest.raises(StoreError):  # repeated sequence number
            await store.append_event("resp_e", {"sequence_number": 3})
        with pytest.raises(StoreError):  # unknown response (foreign key)
            await store.append_event("resp_unknown", {"sequence_number": 0})
    run_with_store(backend, body)


def test_delete_cascades(backend):

    async def body(store):
        await store.create(response("resp_d"), items(3))
        await store.create(response("resp_keep"), items(2))
        for store_id in ("resp_d", "resp_keep"):
            await store.append_event(store_id, {"sequence_number": 0})
        assert await store.delete("resp_d") is True
        assert await store.events("resp_d") == []
        with pytest.raises(StoreError):
            await store.input_items("resp_d")
        # The other response is untouched.
        assert len((await store.input_items("resp_keep"))[0]) == 2
        assert len(await store.events("resp_keep")) == 1
    run_with_store(backend, body)

    # No orphan rows are left in the tables themselves.
    assert backend.query("SELECT COUNT(*) FROM {input_items} WHERE response_id = 'resp_d'") == [(0,)]
    assert backend.query("SELECT COUNT(*) FROM {events} WHERE response_id = 'resp_d'") == [(0,)]


def test_survives_close_and_reopen(backend, tmp_path):
    if backend.kind == "sqlite":
        backend.location = tmp_path / "nested" / "dir" / "s.sqlite3"  # the parent directory is created

    async def write(store):
        await store.create(response("resp_r", output=[{"type": "message"}]), items(3))
        await store.append_event("resp_r", {"sequence_number": 0, "type": "response.created"})
        await store.append_event("resp_r", {"sequence_number": 1, "type": "response.completed"})
    run_with_store(backend, write)
    assert backend.kind != "sqlite" or backend.location.exists()

    async def read(store):
        assert await store.get("resp_r") == response("resp_r", output=[{"type": "message"}])
        assert (await store.input_items("resp_r", order="asc"))[0] == items(3)
        assert [e["type"] for e in await store.events("resp_r")] == ["response.created", "response.completed"]
    run_with_store(backend, read)


def test_mark_interrupted(backend):

    async def before_crash(store):
        for rid, status in [("resp_q", "queued"), ("resp_i", "in_progress"), ("resp_c", "completed"),
                            ("resp_f", "failed"), ("resp_x", "cancelled"), ("resp_n", "incomplete")]:
            await store.create(response(rid, status), [])
    run_with_store(backend, before_crash)

    async def after_restart(store):
        assert await store.mark_interrupted() == 2
        for rid in ("resp_q", "resp_i"):
            stored = await store.get(rid)
            assert stored["status"] == "failed"
            assert stored["error"] == {"code": "server_error",
                                       "message": "the server restarted while this response was running"}
            # Followers' streams end: a response.failed event after the last one.
            assert [(e["type"], e["sequence_number"]) for e in await store.events(rid)] == [("response.failed", 0)]
        for rid, status in [("resp_c", "completed"), ("resp_f", "failed"), ("resp_x", "cancelled"),
                            ("resp_n", "incomplete")]:
            stored = await store.get(rid)
            assert stored["status"] == status and "error" not in stored
        assert await store.mark_interrupted() == 0  # nothing left running
    run_with_store(backend, after_restart)

    # The status column is kept in step with the body.
    assert backend.query("SELECT status FROM {responses} WHERE id = 'resp_q'") == [("failed",)]


def test_sqlite_wal_mode(tmp_path):
    backend = Backend("sqlite", tmp_path / "s.sqlite3")
    async def body(store):
        # Ask through the store's own connection, on its worker thread.
        return await store._run(lambda conn: conn.execute("PRAGMA journal_mode").fetchone()[0])
    assert run_with_store(backend, body).lower() == "wal"
    # WAL mode is persistent: a plain connection sees it too.
    with sqlite3.connect(tmp_path / "s.sqlite3") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal"


@pytest.mark.parametrize("version", [1, 2, 3])
def test_sqlite_upgrade_from_older_schemas(tmp_path, version):
    """A store written by an older rostra (the first release; conversations without leases) opens,
    keeps its data and gets the newer tables and columns."""
    path = tmp_path / "s.sqlite3"
    with sqlite3.connect(path) as conn:
        for script in MIGRATIONS[:version]:
            conn.executescript(script)
        conn.execute("INSERT INTO responses (id, created_at, status, body) VALUES ('resp_old', 1, 'in_progress', "
                     "'{\"id\": \"resp_old\", \"output\": [{\"id\": \"msg_old\", \"type\": \"message\"}]}')")
        conn.execute(f"PRAGMA user_version = {version}")

    async def body(store):
        assert (await store.get("resp_old"))["id"] == "resp_old"
        assert await store.find_item("msg_old") == {"id": "msg_old", "type": "message"}  # indexed by the migration
        keyed = Tenant(fingerprint(b"some-key"), sees_all=False)  # rows from before tenants are shared
        assert (await store.get("resp_old", keyed))["id"] == "resp_old"
        assert await store.find_item("msg_old", keyed) == {"id": "msg_old", "type": "message"}
        assert await store.mark_interrupted() == 1
        await store.create(response("resp_new", "in_progress"), [], owner="replica-a", lease_seconds=30)
        assert await store.renew_leases("replica-a", ["resp_new"], 30) == {"resp_new": False}
        await store.create_conversation({"id": "conv_new", "created_at": 1}, items(1))
    run_with_store(Backend("sqlite", path), body)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)


def test_tenants_see_their_own_rows_and_the_shared_ones(backend):
    """Each key's rows are its own: another key's are not found (get, item references, conversations, their
    listing and its cursor); rows without a tenant are everyone's; a tenant that sees all sees all."""
    a, b = (Tenant(fingerprint(key), sees_all=False) for key in (b"key-a", b"key-b"))
    admin = Tenant(fingerprint(b"admin"), sees_all=True)

    async def body(store):
        await store.create(response("resp_a", output=[{"id": "msg_out", "type": "message"}]), items(1),
                           tenant=a.key)
        await store.create(response("resp_shared"), [])
        for number, (conversation, tenant) in enumerate([("conv_a", a), ("conv_b", b), ("conv_shared", None)]):
            await store.create_conversation({"id": conversation, "created_at": number}, [],
                                            tenant and tenant.key)
        assert (await store.get("resp_a", a))["id"] == "resp_a" and await store.get("resp_a", b) is None
        assert (await store.get("resp_shared", b))["id"] == "resp_shared"
        assert (await store.get("resp_a", admin))["id"] == (await store.get("resp_a"))["id"] == "resp_a"
        for item_id in ("msg_out", "msg_0"):  # an output item, an input item
            assert await store.find_item(item_id, b) is None
            assert (await store.find_item(item_id, a))["id"] == item_id
        assert await store.get_conversation("conv_a", b) is None
        assert (await store.get_conversation("conv_shared", b))["id"] == "conv_shared"

        async def listed(tenant, **page):
            conversations, _ = await store.list_conversations(tenant=tenant, **page)
            return [conversation["id"] for conversation in conversations]
        assert await listed(a) == ["conv_shared", "conv_a"] and await listed(b) == ["conv_shared", "conv_b"]
        assert await listed(admin) == ["conv_shared", "conv_b", "conv_a"]
        assert await listed(a, after="conv_shared") == ["conv_a"]
        with pytest.raises(StoreError):  # a cursor of another key's is unknown
            await listed(a, after="conv_b")
    run_with_store(backend, body)
    assert sorted(backend.query("SELECT id, tenant FROM {conversations}")) == [
        ("conv_a", a.key), ("conv_b", b.key), ("conv_shared", None)]
    assert all(row[0].startswith("sha256:") and "key-a" not in row[0]
               for row in backend.query("SELECT tenant FROM {responses} WHERE tenant IS NOT NULL"))


def test_postgres_migrations(postgres):
    backend = Backend("postgres", postgres.new_database())

    async def nothing(store):
        await store.create(response("resp_m"), items(1))
    run_with_store(backend, nothing)
    assert backend.query("SELECT version FROM rostra_schema") == [(len(PG_MIGRATIONS),)]
    assert run_with_store(backend, lambda store: store.get("resp_m"))["id"] == "resp_m"  # not migrated twice

    # Replicas starting together: the migration lock lets each migration run once.
    together = Backend("postgres", postgres.new_database())

    async def start_three():
        stores = [together.new() for _ in range(3)]
        await asyncio.gather(*(store.open() for store in stores))
        await asyncio.gather(*(store.close() for store in stores))
    asyncio.run(start_three())
    assert together.query("SELECT version FROM rostra_schema") == [(len(PG_MIGRATIONS),)]

    backend.query("UPDATE rostra_schema SET version = 99")  # a database from a newer rostra is refused
    with pytest.raises(StoreError):
        run_with_store(backend, nothing)


def test_postgres_unreachable():
    async def main():
        store = open_store(Path("unused"), "postgresql://nobody:secret@127.0.0.1:1/none")
        with pytest.raises(StoreError) as caught:
            await store.open()
        assert "secret" not in str(caught.value)  # the password is not echoed
    asyncio.run(main())


def test_sqlite_migrations(tmp_path):
    path = tmp_path / "s.sqlite3"
    backend = Backend("sqlite", path)

    async def nothing(store):
        await store.create(response("resp_m"), items(1))
    run_with_store(backend, nothing)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) == 6
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"responses", "input_items", "events", "conversations", "conversation_items", "images", "image_uses"} <= tables

    # Reopening does not run migration 1 again (CREATE TABLE would fail on existing tables)
    # and keeps the data.
    async def reopen(store):
        return await store.get("resp_m")
    assert run_with_store(backend, reopen)["id"] == "resp_m"
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 6

    # A database from a newer rostra is refused rather than misread.
    newer = tmp_path / "newer.sqlite3"
    with sqlite3.connect(newer) as conn:
        conn.execute("PRAGMA user_version = 99")
    with pytest.raises(StoreError):
        run_with_store(Backend("sqlite", newer), nothing)


def test_find_item(backend):
    """item_reference: output items of responses stored whole or finished by their runner, then input items."""
    async def body(store):
        await store.create(response("resp_a", output=[{"id": "msg_out", "type": "message"}]), items(2))
        await store.create(response("resp_b", "in_progress", output=[]), [], owner="me", lease_seconds=30)
        assert await store.find_item("fc_late") is None
        assert await store.finish(response("resp_b", output=[{"id": "fc_late", "type": "function_call"}]), "me")
        assert await store.find_item("msg_out") == {"id": "msg_out", "type": "message"}
        assert await store.find_item("fc_late") == {"id": "fc_late", "type": "function_call"}
        assert await store.find_item("msg_1") == items(2)[1]
        assert await store.find_item("msg_unknown") is None
        await store.delete("resp_a")
        assert await store.find_item("msg_out") is None and await store.find_item("msg_1") is None
    run_with_store(backend, body)


def test_not_open(backend):
    async def main():
        store = backend.new()
        with pytest.raises(StoreError):
            await store.get("resp_1")
        await store.open()
        await store.close()
        await store.close()  # closing twice is harmless
        with pytest.raises(StoreError):
            await store.get("resp_1")
    asyncio.run(main())


def test_concurrent_calls(backend):
    """Many coroutines at once: SQLite's single worker thread serialises them, Postgres's pool spreads them."""
    async def body(store):
        await asyncio.gather(*(store.create(response(f"resp_{n}"), items(2)) for n in range(50)))
        await asyncio.gather(*(store.append_event("resp_0", {"sequence_number": n}) for n in range(50)))
        got = await asyncio.gather(*(store.get(f"resp_{n}") for n in range(50)))
        assert [r["id"] for r in got] == [f"resp_{n}" for n in range(50)]
        assert [e["sequence_number"] for e in await store.events("resp_0")] == list(range(50))
    run_with_store(backend, body)


def test_default_data_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("ROSTRA_DATA_DIR", str(tmp_path / "data"))
    assert default_data_dir() == tmp_path / "data"

    monkeypatch.delenv("ROSTRA_DATA_DIR")
    monkeypatch.setattr("sys.platform", "linux")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_data_dir() == tmp_path / "xdg" / "rostra"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_data_dir() == tmp_path / "home" / ".local" / "share" / "rostra"


def test_open_store(tmp_path):
    store = open_store(tmp_path / "data")
    assert isinstance(store, SqliteResponseStore)
    assert store.path == tmp_path / "data" / "responses.sqlite3"
    store = open_store(tmp_path / "data", f"sqlite://{tmp_path}/other.sqlite3")
    assert isinstance(store, SqliteResponseStore) and store.path == tmp_path / "other.sqlite3"
    for url in ("postgres://u:p@db.example:5432/rostra", "postgresql://u@db.example/rostra"):
        store = open_store(tmp_path / "data", url)
        assert isinstance(store, PostgresResponseStore) and store.dsn == url
    with pytest.raises(StoreError):
        open_store(tmp_path / "data", "mysql://u@db/rostra")


def test_conversations(backend):
    conversation = {"id": "conv_1", "object": "conversation", "created_at": 5, "metadata": {"k": "v"}}

    async def scenario(store):
        await store.create_conversation(conversation, items(3))
        with pytest.raises(StoreError):
            await store.create_conversation(conversation, [])
        await store.add_conversation_items("conv_1", [{"id": "item_9", "type": "message"}])
        with pytest.raises(StoreError):
            await store.add_conversation_items("conv_unknown", items(1))
        first, more = await store.conversation_items("conv_1", limit=2, order="asc")
        rest, no_more = await store.conversation_items("conv_1", after=first[-1]["id"], order="asc")
        newest, _ = await store.conversation_items("conv_1", limit=1)
        assert await store.delete_conversation_item("conv_1", "msg_1")
        assert not await store.delete_conversation_item("conv_1", "msg_1")
        after_delete, _ = await store.conversation_items("conv_1", order="asc")
        await store.update_conversation({**conversation, "metadata": {"k": "w"}})
        with pytest.raises(StoreError):
            await store.update_conversation({**conversation, "id": "conv_unknown"})
        with pytest.raises(StoreError):
            await store.conversation_items("conv_unknown")
        with pytest.raises(StoreError):
            await store.conversation_items("conv_1", after="item_unknown")
        got = await store.get_conversation("conv_1")
        item = await store.get_conversation_item("conv_1", "msg_2")
        deleted = await store.delete_conversation("conv_1")
        return (first, more, rest, no_more, newest, after_delete, got, item, deleted,
                await store.get_conversation("conv_1"), await store.get_conversation_item("conv_1", "msg_2"),
                await store.delete_conversation("conv_1"))

    (first, more, rest, no_more, newest, after_delete, got, item, deleted, gone,
     gone_item, deleted_again) = run_with_store(backend, scenario)
    assert [i["id"] for i in first] == ["msg_0", "msg_1"] and more
    assert [i["id"] for i in rest] == ["msg_2", "item_9"] and not no_more
    assert [i["id"] for i in newest] == ["item_9"]
    assert [i["id"] for i in after_delete] == ["msg_0", "msg_2", "item_9"]
    assert got["metadata"] == {"k": "w"} and item["id"] == "msg_2"
    assert deleted and gone is None and gone_item is None and not deleted_again
    # The items went with the conversation.
    assert backend.query("SELECT COUNT(*) FROM {conversation_items}") == [(0,)]


# -- leases: several replicas on one store ------------------------------------------------------

def test_leases_renew_and_cancel_requests(backend):
    async def body(store):
        await store.create(response("resp_a", "in_progress"), [], owner="replica-a", lease_seconds=30)
        await store.create(response("resp_b", "queued"), [], owner="replica-b", lease_seconds=30)
        await store.create(response("resp_done"), [])
        # Each replica renews only its own running responses.
        assert await store.renew_leases("replica-a", ["resp_a", "resp_b", "resp_done"], 30) == {"resp_a": False}
        assert await store.renew_leases("replica-b", ["resp_b"], 30) == {"resp_b": False}
        assert await store.renew_leases("replica-a", [], 30) == {}

        # A cancel asked anywhere reaches the owner at its next renewal.
        assert await store.request_cancel("resp_a") is True
        assert await store.request_cancel("resp_done") is False  # not running
        assert await store.request_cancel("resp_unknown") is False
        assert await store.renew_leases("replica-a", ["resp_a"], 30) == {"resp_a": True}

        # The owner's last update ends the lease; then nobody holds it and nothing can finish it twice.
        assert await store.finish(response("resp_a", "cancelled"), "replica-b") is False  # not the owner
        assert await store.finish(response("resp_a", "cancelled"), "replica-a") is True
        assert (await store.get("resp_a"))["status"] == "cancelled"
        assert await store.renew_leases("replica-a", ["resp_a"], 30) == {}
        assert await store.finish(response("resp_a", "completed"), "replica-a") is False
        assert (await store.get("resp_a"))["status"] == "cancelled"
        assert await store.fail_expired_leases() == []  # live leases are left alone
        await store.delete("resp_b")
        assert await store.finish(response("resp_b", "completed"), "replica-b") is False  # deleted
    run_with_store(backend, body)


def test_expired_leases_are_failed_once(backend):
    async def body(store):
        await store.create(response("resp_dead", "in_progress"), [], owner="replica-dead", lease_seconds=0.2)
        await store.create(response("resp_live", "in_progress"), [], owner="replica-live", lease_seconds=60)
        await store.create(response("resp_old", "in_progress"), [])  # no lease (an older rostra): not swept
        for n in range(3):
            await store.append_event("resp_dead", {"type": "response.output_text.delta", "sequence_number": n})
        await asyncio.sleep(0.3)
        # Two replicas sweep at the same time: each dead response is failed exactly once.
        other = backend.new()
        await other.open()
        try:
            swept = await asyncio.gather(store.fail_expired_leases(), other.fail_expired_leases())
        finally:
            await other.close()
        assert sorted(swept[0] + swept[1]) == ["resp_dead"]
        stored = await store.get("resp_dead")
        assert stored["status"] == "failed" and stored["error"] == LEASE_EXPIRED_ERROR
        events = await store.events("resp_dead")
        assert [e["sequence_number"] for e in events] == [0, 1, 2, 3]
        assert events[-1]["type"] == "response.failed" and events[-1]["response"] == stored
        # The dead replica, were it only slow, can neither renew, nor log another event, nor finish.
        assert await store.renew_leases("replica-dead", ["resp_dead"], 60) == {}
        with pytest.raises(StoreError):
            await store.append_event("resp_dead", {"type": "response.output_text.delta", "sequence_number": 3})
        assert await store.finish(response("resp_dead", "completed"), "replica-dead") is False
        # Issue 21: nor bring it back to in_progress (the update a background run makes as it starts).
        assert await store.progress(response("resp_dead", "in_progress"), "replica-dead") is False
        assert (await store.get("resp_dead"))["status"] == "failed"
        assert await store.progress(response("resp_live", "in_progress"), "replica-dead") is False  # not its own
        assert await store.progress({**response("resp_live", "in_progress"), "metadata": {"k": "v"}},
                                    "replica-live") is True
        assert (await store.get("resp_live"))["metadata"] == {"k": "v"}
        assert (await store.get("resp_old"))["status"] == "in_progress"
        assert await store.fail_expired_leases() == []
    run_with_store(backend, body)


def test_follower_on_another_replica_sees_every_event_once_in_order(backend):
    """A writer and three followers, each on its own store (as replicas are): every follower reads
    0..n-1 exactly once, in order, woken by the store's watch (notified on Postgres, polled on SQLite)."""
    count = 60

    async def follow(store) -> list[int]:
        seen, last = [], -1
        with store.watch("resp_f") as watch:
            while not seen or seen[-1] < count - 1:
                for event in await store.events("resp_f", last):
                    seen.append(event["sequence_number"])
                    last = event["sequence_number"]
                if seen and seen[-1] == count - 1:
                    break
                await watch.wait(1.0)
        return seen

    async def main():
        stores = [backend.new() for _ in range(4)]
        for store in stores:
            await store.open()
        try:
            writer, followers = stores[0], stores[1:]
            await writer.create(response("resp_f", "in_progress"), [], owner="replica-a", lease_seconds=60)
            readers = [asyncio.create_task(follow(store)) for store in followers]
            for n in range(count):
                await writer.append_event("resp_f", {"type": "response.output_text.delta", "sequence_number": n})
                if n % 7 == 0:
                    await asyncio.sleep(0.01)
            results = await asyncio.wait_for(asyncio.gather(*readers), 30)
        finally:
            for store in stores:
                await store.close()
        assert results == [list(range(count))] * 3
    asyncio.run(main())


@contextlib.asynccontextmanager
async def writer_and_follower(dsn: str):
    """Two stores on one database, as two replicas: one runs a response, the other follows it."""
    writer, follower = PostgresResponseStore(dsn), PostgresResponseStore(dsn)
    await writer.open()
    await follower.open()
    try:
        yield writer, follower
    finally:
        await writer.close()
        await follower.close()


def test_postgres_watch_is_notified(postgres):
    """On Postgres a follower is woken by NOTIFY, not by its timeout: wait() returns True."""
    dsn = postgres.new_database()

    async def main():
        async with writer_and_follower(dsn) as (writer, follower):
            await writer.create(response("resp_n", "in_progress"), [], owner="replica-a", lease_seconds=60)
            with follower.watch("resp_n") as watch, follower.watch("resp_other") as other:
                await writer.append_event("resp_n", {"type": "x", "sequence_number": 0})
                assert await watch.wait(30) is True
                assert await other.wait(0.2) is False  # another response's writes do not wake it
                assert await writer.finish(response("resp_n", "completed"), "replica-a")
                assert await watch.wait(30) is True  # the end of the run wakes it too
            assert follower._watches == {}  # closed watches are forgotten
    asyncio.run(main())


def test_postgres_listens_again_after_losing_its_connection(postgres):
    """The server ends the LISTEN connection (as a restart would): the store listens again, wakes its
    followers (they may have missed notifications), and later writes notify them as before."""
    dsn = postgres.new_database()

    async def main():
        async with writer_and_follower(dsn) as (writer, follower):
            await writer.create(response("resp_l", "in_progress"), [], owner="replica-a", lease_seconds=60)
            with follower.watch("resp_l") as watch:
                old_pid = follower._listener.get_server_pid()
                await writer.pool.execute("SELECT pg_terminate_backend($1)", old_pid)
                assert await watch.wait(30) is True  # woken by the reconnection
                assert follower._listener is not None and follower._listener.get_server_pid() != old_pid
                await writer.append_event("resp_l", {"type": "x", "sequence_number": 0})
                assert await watch.wait(30) is True
    asyncio.run(main())


@pytest.mark.parametrize("flags, message", [
    (["--store", "mysql://u@db/rostra"], "rostra: --store: unknown store 'mysql://u@db/rostra'"),
    (["--lease-seconds", "0"], "--lease-seconds: must be more than 0"),
])
def test_serve_refuses_a_bad_store_setting(flags, message):
    """At once and clearly, before any model loads."""
    done = subprocess.run([sys.executable, "-m", "rostra.cli", "serve", "--engine", "scripted", "--script",
                           str(DATA / "script.jsonl"), *flags, "--port", "0"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and message in done.stderr


def test_processes_on_one_sqlite_store_know_whether_they_are_alone(tmp_path):
    """Issue 33: several server processes may share one SQLite store (leases decide whose runs are dead); `claim()`
    tells a starting one whether it is the only one. The first is, and keeps others out until its recovery is done
    (`admit_others`); one that joins a live one is not; once the others are gone the next one is alone again."""
    async def main():
        first, second, third = (SqliteResponseStore(tmp_path / "s.sqlite3") for _ in range(3))
        assert await first.claim() is True
        joining = asyncio.create_task(second.claim())
        await asyncio.sleep(0.3)
        assert not joining.done()  # waits while the first recovers
        first.admit_others()
        assert await asyncio.wait_for(joining, 10) is False
        first.release()
        assert await third.claim() is False  # the second is still there
        second.release()
        third.release()
        assert await first.claim() is True  # everyone else gone: alone again
        other = SqliteResponseStore(tmp_path / "other.sqlite3")
        assert await other.claim() is True  # another store in the same directory is another lock
        first.release()
        other.release()
        assert await SqliteResponseStore.in_memory().claim() is True  # no other process can see it
    asyncio.run(main())


def test_a_store_in_memory_writes_nothing_to_disk(tmp_path, monkeypatch):
    """What an embedding-only server uses: a working store, no file."""
    monkeypatch.chdir(tmp_path)

    async def main():
        store = SqliteResponseStore.in_memory()
        await store.open()
        await store.create(response("resp_m"), items(1))
        assert (await store.get("resp_m"))["id"] == "resp_m"
        await store.close()
    asyncio.run(main())
    assert list(tmp_path.iterdir()) == []


def test_list_conversations(backend):
    """The listing behind GET /v1/conversations (a rostra extension): by creation time, then id; paged
    with `after` in either order; ties in the same second are ordered by id, so no page skips one."""
    created = [("conv_b", 10), ("conv_a", 10), ("conv_c", 11), ("conv_d", 9)]

    async def scenario(store):
        empty = await store.list_conversations()
        for conversation_id, created_at in created:
            await store.create_conversation({"id": conversation_id, "object": "conversation",
                                             "created_at": created_at, "metadata": {}}, [])
        pages = {}
        for order in ("desc", "asc"):
            seen, after, more = [], None, True
            while more:
                page, more = await store.list_conversations(after=after, limit=3 if order == "asc" else 1,
                                                            order=order)
                seen += [conversation["id"] for conversation in page]
                after = page[-1]["id"]
            pages[order] = seen
        whole, whole_more = await store.list_conversations(limit=100)
        with pytest.raises(StoreError, match="no conversation 'conv_unknown' to list after"):
            await store.list_conversations(after="conv_unknown")
        await store.delete_conversation("conv_c")
        return empty, pages, whole, whole_more, await store.list_conversations()

    empty, pages, whole, whole_more, after_delete = run_with_store(backend, scenario)
    assert empty == ([], False)
    assert pages["desc"] == ["conv_c", "conv_b", "conv_a", "conv_d"]
    assert pages["asc"] == ["conv_d", "conv_a", "conv_b", "conv_c"]
    assert [c["id"] for c in whole] == pages["desc"] and not whole_more
    assert whole[0] == {"id": "conv_c", "object": "conversation", "created_at": 11, "metadata": {}}
    assert [c["id"] for c in after_delete[0]] == ["conv_b", "conv_a", "conv_d"]
