"""Images stored once, on both backends (SQLite and a real PostgreSQL server): a response chain or a conversation
that repeats a 1 MB image keeps it once (the store's size measured), reads give back exactly what was written, a
client's string that looks like a reference stays a string, and an image nobody uses any more is deleted. Then
through the Responses API: a `previous_response_id` chain of 20 turns repeating a 1 MB PNG."""

from __future__ import annotations

import asyncio
import os
import random
import sqlite3
import struct
import zlib

import asyncpg
import pytest

from harness import MODEL, InProcessServer
from images import data_url, encoded
from PIL import Image

from rostra.store.images import REFERENCE
from rostra.store.postgres import PostgresResponseStore
from rostra.store.sqlite import SqliteResponseStore

MB = 1024 * 1024


def noise_png(size: int = 600, seed: int = 0) -> bytes:
    """A PNG of `size` x `size` random pixels (it does not compress)."""
    rng = random.Random(seed)
    return encoded(Image.frombytes("RGB", (size, size), rng.randbytes(size * size * 3)), "PNG")


def padded_png(extra: int = 800_000, seed: int = 0) -> bytes:
    """About 1 MB of valid PNG that decodes in no time: a 8 x 8 image with a private ancillary chunk of random
    bytes (PNG readers skip chunks they do not know)."""
    png = noise_png(8, seed)
    data = random.Random(seed).randbytes(extra)
    chunk = struct.pack(">I", len(data)) + b"prVt" + data + struct.pack(">I", zlib.crc32(b"prVt" + data))
    end = png.rindex(b"IEND") - 4
    return png[:end] + chunk + png[end:]


IMAGE = data_url(padded_png())


def message(text: str, image: str = IMAGE, item_id: str | None = None) -> dict:
    item = {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": text}, {"type": "input_image", "image_url": image, "detail": "auto"}]}
    return item if item_id is None else {"id": item_id, **item}


@pytest.fixture(params=["sqlite", "postgres"])
def kind(request, tmp_path):
    if request.param == "sqlite":
        return "sqlite", str(tmp_path / "s.sqlite3")
    return "postgres", request.getfixturevalue("postgres").new_database()


def store_of(kind):
    name, location = kind
    return SqliteResponseStore(location) if name == "sqlite" else PostgresResponseStore(location)


async def size_of(kind) -> int:
    """Bytes the store takes: the SQLite file (checkpointed), or the PostgreSQL tables with their TOAST."""
    name, location = kind
    if name == "sqlite":
        with sqlite3.connect(location) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return conn.execute("PRAGMA page_count").fetchone()[0] * conn.execute("PRAGMA page_size").fetchone()[0]
    conn = await asyncpg.connect(location)
    try:
        return await conn.fetchval("SELECT SUM(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n ON "
                                   "n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r'")
    finally:
        await conn.close()


def test_a_chain_repeating_an_image_keeps_it_once(kind):
    async def main():
        store = store_of(kind)
        await store.open()
        try:
            assert len(IMAGE) > MB
            for turn in range(20):
                response = {"id": f"resp_{turn}", "object": "response", "created_at": 1700000000 + turn,
                            "status": "completed", "output": []}
                await store.create(response, [message(f"turn {turn}", item_id=f"msg_{turn}")])
            size = await size_of(kind)
            assert size < 3 * MB, size  # 20 copies would be 27 MB
            items, _ = await store.input_items("resp_7", order="asc")
            assert items == [message("turn 7", item_id="msg_7")]
            assert await store.find_item("msg_12") == message("turn 12", item_id="msg_12")
        finally:
            await store.close()
    asyncio.run(main())


def test_conversations_keep_images_once_and_give_back_what_was_written(kind):
    other = data_url(noise_png(40, seed=1))
    tricky = ["\x00", "\x00\x00x", REFERENCE + "0" * 64, "\x00image:", "data:short", "plain"]

    async def main():
        store = store_of(kind)
        await store.open()
        try:
            items = [message("one", item_id="m1"), message("two", other, item_id="m2"),
                     {"id": "m3", "type": "message", "role": "user",
                      "content": [{"type": "input_text", "text": text} for text in tricky]}]
            await store.create_conversation({"id": "conv_a", "object": "conversation", "created_at": 1}, items)
            await store.add_conversation_items("conv_a", [message("three", item_id="m4")])
            listed, _ = await store.conversation_items("conv_a", order="asc")
            assert listed == [*items, message("three", item_id="m4")]
            assert await store.get_conversation_item("conv_a", "m3") == items[2]
            assert await size_of(kind) < 3 * MB
        finally:
            await store.close()
    asyncio.run(main())


def test_an_image_nobody_uses_is_deleted(kind):
    name, _ = kind
    images = "images" if name == "sqlite" else "rostra_images"

    async def count(store) -> int:
        if name == "sqlite":
            return await store._run(lambda conn: conn.execute(f"SELECT COUNT(*) FROM {images}").fetchone()[0])
        return await store.pool.fetchval(f"SELECT COUNT(*) FROM {images}")

    async def main():
        store = store_of(kind)
        await store.open()
        try:
            done = {"object": "response", "status": "completed", "output": []}
            await store.create({"id": "resp_a", "created_at": 1, **done}, [message("a")])
            await store.create({"id": "resp_b", "created_at": 2, **done}, [message("b")])
            await store.create_conversation({"id": "conv_c", "object": "conversation", "created_at": 3}, [message("c")])
            assert await count(store) == 1
            await store.delete("resp_a")
            assert await count(store) == 1 and (await store.input_items("resp_b"))[0] == [message("b")]
            await store.delete_finished_before(10)
            assert await count(store) == 1  # the conversation still uses it
            await store.delete_conversation("conv_c")
            assert await count(store) == 0
        finally:
            await store.close()
    asyncio.run(main())


@pytest.mark.anyio
async def test_a_previous_response_id_chain_of_twenty_turns_repeating_a_1_mb_image(tmp_path):
    script = [{"match": "", "output": "I see it."}]
    async with InProcessServer(tmp_path, script) as server:
        previous = None
        sent = []
        for turn in range(20):
            item = message(f"what changed in turn {turn}?")
            body = {"model": MODEL, "input": [item], "store": True}
            if previous is not None:
                body["previous_response_id"] = previous
            reply = await server.client.post("/v1/responses", json=body)
            assert reply.status_code == 200, reply.text
            previous = reply.json()["id"]
            sent.append((previous, item))
        database = tmp_path / "data" / "responses.sqlite3"
        with sqlite3.connect(database) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = os.path.getsize(database)
        assert size < 3 * MB, size  # 20 copies would be 27 MB
        for response_id, item in (sent[0], sent[13], sent[19]):
            listed = (await server.client.get(f"/v1/responses/{response_id}/input_items?order=asc")).json()
            image = listed["data"][0]["content"][1]
            assert (image["type"], image["image_url"]) == ("input_image", item["content"][1]["image_url"])
            assert listed["data"][0]["content"][0]["text"] == item["content"][0]["text"]


@pytest.fixture
def anyio_backend():
    return "asyncio"



def test_a_delete_sweeps_only_the_images_it_let_go(kind):
    """Issue 42: a delete forgets its own uses and the images only they held, not every unused image of the
    store (a global sweep on every delete scans both tables, and on PostgreSQL holds every writer meanwhile).
    An image row nobody uses that the delete had no part in (planted here) is left alone."""
    name, _ = kind
    images = "images" if name == "sqlite" else "rostra_images"
    planted = ("f" * 64, "data:image/png;base64,AAAA")

    async def rows(store) -> set[str]:
        if name == "sqlite":
            return set(await store._run(lambda conn: [row[0] for row in conn.execute(f"SELECT sha256 FROM {images}")]))
        return {row["sha256"] for row in await store.pool.fetch(f"SELECT sha256 FROM {images}")}

    async def plant(store) -> None:
        if name == "sqlite":
            def insert(conn):
                with conn:
                    conn.execute(f"INSERT INTO {images} (sha256, url) VALUES (?, ?)", planted)
            await store._run(insert)
        else:
            await store.pool.execute(f"INSERT INTO {images} (sha256, url) VALUES ($1, $2)", *planted)

    async def main():
        store = store_of(kind)
        await store.open()
        try:
            done = {"object": "response", "status": "completed", "output": []}
            await store.create({"id": "resp_a", "created_at": 1, **done}, [message("a")])
            await store.create({"id": "resp_b", "created_at": 2, **done}, [message("b", data_url(padded_png(seed=3)))])
            await plant(store)
            assert len(await rows(store)) == 3
            await store.delete("resp_a")
            assert len(await rows(store)) == 2 and planted[0] in await rows(store)  # resp_a's image only
            await store.delete_finished_before(10)
            assert await rows(store) == {planted[0]}
            await store.create_conversation({"id": "conv_c", "object": "conversation", "created_at": 3}, [message("c")])
            await store.delete_conversation("conv_c")
            assert await rows(store) == {planted[0]}
        finally:
            await store.close()
    asyncio.run(main())


def test_a_delete_and_a_create_of_the_same_image_in_one_loop_turn(kind):
    """The sweep of unused images never takes one a create (committing at the same moment) has just used."""
    async def main():
        store = store_of(kind)
        await store.open()
        try:
            done = {"object": "response", "status": "completed", "output": []}
            for round_ in range(6):
                old, new = f"resp_old{round_}", f"resp_new{round_}"
                await store.create({"id": old, "created_at": 1, **done}, [message("old")])
                steps = [store.delete(old), store.create({"id": new, "created_at": 2, **done}, [message("new")])]
                await asyncio.gather(*(steps if round_ % 2 else steps[::-1]))
                assert (await store.input_items(new))[0] == [message("new")]
                await store.delete(new)
        finally:
            await store.close()
    asyncio.run(main())
