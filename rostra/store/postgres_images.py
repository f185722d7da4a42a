"""Images stored once (images.py) on PostgreSQL: the `rostra_images` table, and which response or conversation
uses which."""

from __future__ import annotations

import json

import asyncpg

from rostra.store.images import join_images, needs_joining, references, split_images
from rostra.store.tables import dumps

# Writers that add uses hold it shared, the sweep that deletes unused images exclusively: the sweep never sees an
# image as unused while a transaction that is adding a use of it has not committed.
IMAGES_LOCK = 0x726F737472616949

MIGRATION = """
    CREATE TABLE rostra_images (sha256 TEXT PRIMARY KEY, url TEXT NOT NULL);
    CREATE TABLE rostra_image_uses (owner TEXT NOT NULL, sha256 TEXT NOT NULL, PRIMARY KEY (owner, sha256));
    CREATE INDEX rostra_image_uses_by_image ON rostra_image_uses (sha256);
"""


async def stored_bodies(conn: asyncpg.Connection, owner: str, items: list[dict]) -> list[str]:
    """The items' bodies as stored, their images kept once (inside the caller's transaction)."""
    split = split_images(items)
    if split.images:
        await conn.execute("SELECT pg_advisory_xact_lock_shared($1)", IMAGES_LOCK)
        # In a fixed order: two transactions storing the same images never wait for each other in a cycle.
        digests = sorted(split.images)
        await conn.executemany("INSERT INTO rostra_images (sha256, url) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                               [(digest, split.images[digest]) for digest in digests])
        await conn.executemany("INSERT INTO rostra_image_uses (owner, sha256) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                               [(owner, digest) for digest in digests])
    return [dumps(item) for item in split.items]


async def loaded(conn: asyncpg.Connection | asyncpg.Pool, bodies: list[str]) -> list[dict]:
    """Stored bodies as they were written, their images put back."""
    values = [json.loads(body) for body in bodies]
    marked = [index for index, body in enumerate(bodies) if needs_joining(body)]
    wanted = sorted(set().union(*(references(values[index]) for index in marked)))
    images = {row["sha256"]: row["url"] for row in await conn.fetch(
        "SELECT sha256, url FROM rostra_images WHERE sha256 = ANY($1::text[])", wanted)} if wanted else {}
    for index in marked:
        values[index] = join_images(values[index], images)
    return values


async def forget_unused(pool: asyncpg.Pool, owners: list[str]) -> None:
    """After deleting these responses or conversations: their uses, and of the images they used those nobody else
    uses. Only their own rows are read: a delete never sweeps the store (the exclusive lock is held that long)."""
    if not owners:
        return
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", IMAGES_LOCK)
        digests = await conn.fetchval("WITH gone AS (DELETE FROM rostra_image_uses WHERE owner = ANY($1::text[]) "
                                      "RETURNING sha256) SELECT array_agg(DISTINCT sha256) FROM gone", owners)
        if digests:
            await conn.execute("DELETE FROM rostra_images i WHERE i.sha256 = ANY($1::text[]) AND NOT EXISTS "
                               "(SELECT 1 FROM rostra_image_uses u WHERE u.sha256 = i.sha256)", digests)
