"""Images stored once (images.py) on SQLite: the `images` table, and which response or conversation uses which."""

from __future__ import annotations

import json
import sqlite3

from rostra.store.images import join_images, needs_joining, references, split_images
from rostra.store.tables import dumps

MIGRATION = """
    CREATE TABLE images (sha256 TEXT PRIMARY KEY, url TEXT NOT NULL);
    CREATE TABLE image_uses (owner TEXT NOT NULL, sha256 TEXT NOT NULL, PRIMARY KEY (owner, sha256));
    CREATE INDEX image_uses_by_image ON image_uses(sha256);
"""


def stored_bodies(conn: sqlite3.Connection, owner: str, items: list[dict]) -> list[str]:
    """The items' bodies as stored, their images kept once (inside the caller's transaction)."""
    split = split_images(items)
    if split.images:
        conn.executemany("INSERT OR IGNORE INTO images (sha256, url) VALUES (?, ?)", list(split.images.items()))
        conn.executemany("INSERT OR IGNORE INTO image_uses (owner, sha256) VALUES (?, ?)",
                         [(owner, digest) for digest in split.images])
    return [dumps(item) for item in split.items]


def loaded(conn: sqlite3.Connection, bodies: list[str]) -> list[dict]:
    """Stored bodies as they were written, their images put back."""
    values = [json.loads(body) for body in bodies]
    marked = [index for index, body in enumerate(bodies) if needs_joining(body)]
    wanted = sorted(set().union(*(references(values[index]) for index in marked)))
    images = dict(conn.execute(f"SELECT sha256, url FROM images WHERE sha256 IN ({', '.join('?' for _ in wanted)})",
                               wanted).fetchall()) if wanted else {}
    for index in marked:
        values[index] = join_images(values[index], images)
    return values


def forget_unused(conn: sqlite3.Connection, owners: list[str]) -> None:
    """After deleting these responses or conversations (inside the same transaction): their uses, and of the
    images they used those nobody else uses. Only their own rows are read: a delete never sweeps the store."""
    for start in range(0, len(owners), CHUNK):
        chunk = owners[start:start + CHUNK]
        marks = ", ".join("?" for _ in chunk)
        digests = [row[0] for row in conn.execute(
            f"SELECT DISTINCT sha256 FROM image_uses WHERE owner IN ({marks})", chunk)]
        conn.execute(f"DELETE FROM image_uses WHERE owner IN ({marks})", chunk)
        for first in range(0, len(digests), CHUNK):
            some = digests[first:first + CHUNK]
            conn.execute(f"DELETE FROM images WHERE sha256 IN ({', '.join('?' for _ in some)}) AND NOT EXISTS "
                         "(SELECT 1 FROM image_uses u WHERE u.sha256 = images.sha256)", some)


CHUNK = 500  # ids per statement: well under SQLite's limit on bound parameters
