"""The SQLite Responses API store: round trips, paging, event logs, restart recovery, schema."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from rostra.store import SqliteResponseStore, StoreError, default_data_dir, open_store
from rostra.store.sqlite import MIGRATIONS


def response(rid: str, status: str = "completed", **extra) -> dict:
    return {"id": rid, "object": "response", "created_at": 1700000000, "status": status, **extra}


def items(n: int) -> list[dict]:
    return [{"id": f"msg_{i}", "type": "message", "role": "user",
             "content": [{"type": "input_text", "text": f"text {i}"}]} for i in range(n)]


def run_with_store(path: Path, body) -> object:
    """Open a store on `path`, run `await body(store)`, close it; one event loop per call."""
    async def main():
        store = SqliteResponseStore(path)
        await store.open()
        try:
            return await body(store)
        finally:
            await store.close()
    return asyncio.run(main())


def test_create_get_update_delete(tmp_path):
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
    run_with_store(tmp_path / "s.sqlite3", body)


def test_unicode_bodies(tmp_path):
    text = "héllo — 世界 🚀 \u0000 \"quotes\" \\ back"
    path = tmp_path / "s.sqlite3"

    async def body(store):
        await store.create(response("resp_u", instructions=text), [{"id": "msg_ü", "text": text}])
        await store.append_event("resp_u", {"sequence_number": 0, "delta": text})
        assert (await store.get("resp_u"))["instructions"] == text
        assert (await store.input_items("resp_u"))[0] == [{"id": "msg_ü", "text": text}]
        assert (await store.events("resp_u"))[0]["delta"] == text
    run_with_store(path, body)

    # Stored as real UTF-8 text, not \u escapes (ensure_ascii=False).
    with sqlite3.connect(path) as conn:
        stored = conn.execute("SELECT body FROM responses").fetchone()[0]
    assert "世界 🚀" in stored


def test_input_items_pagination(tmp_path):
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
    run_with_store(tmp_path / "s.sqlite3", body)


def test_events_append_and_starting_after(tmp_path):
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
    run_with_store(tmp_path / "s.sqlite3", body)


def test_delete_cascades(tmp_path):
    path = tmp_path / "s.sqlite3"

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
    run_with_store(path, body)

    # No orphan rows are left in the tables themselves.
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM input_items WHERE response_id = 'resp_d'").fetchone()[0] == 0
        assert conn.execute("SELECT COUNT(*) FROM events WHERE response_id = 'resp_d'").fetchone()[0] == 0


def test_survives_close_and_reopen(tmp_path):
    path = tmp_path / "nested" / "dir" / "s.sqlite3"  # the parent directory is created

    async def write(store):
        await store.create(response("resp_r", output=[{"type": "message"}]), items(3))
        await store.append_event("resp_r", {"sequence_number": 0, "type": "response.created"})
        await store.append_event("resp_r", {"sequence_number": 1, "type": "response.completed"})
    run_with_store(path, write)
    assert path.exists()

    async def read(store):
        assert await store.get("resp_r") == response("resp_r", output=[{"type": "message"}])
        assert (await store.input_items("resp_r", order="asc"))[0] == items(3)
        assert [e["type"] for e in await store.events("resp_r")] == ["response.created", "response.completed"]
    run_with_store(path, read)


def test_mark_interrupted(tmp_path):
    path = tmp_path / "s.sqlite3"

    async def before_crash(store):
        for rid, status in [("resp_q", "queued"), ("resp_i", "in_progress"), ("resp_c", "completed"),
                            ("resp_f", "failed"), ("resp_x", "cancelled"), ("resp_n", "incomplete")]:
            await store.create(response(rid, status), [])
    run_with_store(path, before_crash)

    async def after_restart(store):
        assert await store.mark_interrupted() == 2
        for rid in ("resp_q", "resp_i"):
            stored = await store.get(rid)
            assert stored["status"] == "failed"
            assert stored["error"] == {"code": "server_error",
                                       "message": "the server restarted while this response was running"}
        for rid, status in [("resp_c", "completed"), ("resp_f", "failed"), ("resp_x", "cancelled"),
                            ("resp_n", "incomplete")]:
            stored = await store.get(rid)
            assert stored["status"] == status and "error" not in stored
        assert await store.mark_interrupted() == 0  # nothing left running
    run_with_store(path, after_restart)

    # The status column is kept in step with the body.
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT status FROM responses WHERE id = 'resp_q'").fetchone()[0] == "failed"


def test_wal_mode(tmp_path):
    async def body(store):
        # Ask through the store's own connection, on its worker thread.
        return await store._run(lambda conn: conn.execute("PRAGMA journal_mode").fetchone()[0])
    assert run_with_store(tmp_path / "s.sqlite3", body).lower() == "wal"
    # WAL mode is persistent: a plain connection sees it too.
    with sqlite3.connect(tmp_path / "s.sqlite3") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal"


def test_migrations(tmp_path):
    path = tmp_path / "s.sqlite3"

    async def nothing(store):
        await store.create(response("resp_m"), items(1))
    run_with_store(path, nothing)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) == 2
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"responses", "input_items", "events", "conversations", "conversation_items"} <= tables

    # Reopening does not run migration 1 again (CREATE TABLE would fail on existing tables)
    # and keeps the data.
    async def reopen(store):
        return await store.get("resp_m")
    assert run_with_store(path, reopen)["id"] == "resp_m"
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 2

    # A database made by the first release (schema 1) is migrated, its data kept.
    old = tmp_path / "old.sqlite3"
    with sqlite3.connect(old) as conn:
        conn.executescript(MIGRATIONS[0])
        conn.execute("INSERT INTO responses (id, created_at, status, body) VALUES ('resp_o', 1, 'completed', "
                     "'{\"id\": \"resp_o\"}')")
        conn.execute("PRAGMA user_version = 1")
    assert run_with_store(old, lambda store: store.get("resp_o"))["id"] == "resp_o"
    with sqlite3.connect(old) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 2

    # A database from a newer rostra is refused rather than misread.
    newer = tmp_path / "newer.sqlite3"
    with sqlite3.connect(newer) as conn:
        conn.execute("PRAGMA user_version = 99")
    with pytest.raises(StoreError):
        run_with_store(newer, nothing)


def test_not_open(tmp_path):
    async def main():
        store = SqliteResponseStore(tmp_path / "s.sqlite3")
        with pytest.raises(StoreError):
            await store.get("resp_1")
        await store.open()
        await store.close()
        await store.close()  # closing twice is harmless
        with pytest.raises(StoreError):
            await store.get("resp_1")
    asyncio.run(main())


def test_concurrent_calls(tmp_path):
    """Many coroutines at once: the single worker thread serialises them."""
    async def body(store):
        await asyncio.gather(*(store.create(response(f"resp_{n}"), items(2)) for n in range(50)))
        await asyncio.gather(*(store.append_event("resp_0", {"sequence_number": n}) for n in range(50)))
        got = await asyncio.gather(*(store.get(f"resp_{n}") for n in range(50)))
        assert [r["id"] for r in got] == [f"resp_{n}" for n in range(50)]
        assert [e["sequence_number"] for e in await store.events("resp_0")] == list(range(50))
    run_with_store(tmp_path / "s.sqlite3", body)


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


def test_conversations(tmp_path):
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
        got = await store.get_conversation("conv_1")
        item = await store.get_conversation_item("conv_1", "msg_2")
        deleted = await store.delete_conversation("conv_1")
        return (first, more, rest, no_more, newest, after_delete, got, item, deleted,
                await store.get_conversation("conv_1"), await store.get_conversation_item("conv_1", "msg_2"))

    (first, more, rest, no_more, newest, after_delete, got, item, deleted, gone,
     gone_item) = run_with_store(tmp_path / "s.sqlite3", scenario)
    assert [i["id"] for i in first] == ["msg_0", "msg_1"] and more
    assert [i["id"] for i in rest] == ["msg_2", "item_9"] and not no_more
    assert [i["id"] for i in newest] == ["item_9"]
    assert [i["id"] for i in after_delete] == ["msg_0", "msg_2", "item_9"]
    assert got["metadata"] == {"k": "w"} and item["id"] == "msg_2"
    assert deleted and gone is None and gone_item is None
