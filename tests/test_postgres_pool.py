"""Opening either PostgreSQL store (rostra/store/postgres_pool.py): the schemas migrate apart in one database, a
database newer than this rostra or one that cannot be reached is a StoreError naming the store, never its password."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from rostra.store.base import StoreError
from rostra.store.batch_postgres import MIGRATIONS as BATCH_MIGRATIONS
from rostra.store.batch_postgres import PostgresBatchStore
from rostra.store.postgres import MIGRATIONS as RESPONSE_MIGRATIONS
from rostra.store.postgres import PostgresResponseStore
from servers import free_port

STORES = pytest.mark.parametrize("store_class, what, table", [
    (PostgresResponseStore, "response store", "rostra_schema"),
    (PostgresBatchStore, "batch store", "rostra_batch_schema"),
])


async def versions(dsn: str) -> dict[str, int]:
    conn = await asyncpg.connect(dsn)
    try:
        return {table: await conn.fetchval(f"SELECT version FROM {table}")
                for table in ("rostra_schema", "rostra_batch_schema")}
    finally:
        await conn.close()


def test_both_stores_migrate_their_own_schemas_in_one_database(postgres):
    dsn = postgres.new_database()

    async def main():
        for store in (PostgresResponseStore(dsn), PostgresBatchStore(dsn)):
            await store.open()
            await store.close()
        return await versions(dsn)

    assert asyncio.run(main()) == {"rostra_schema": len(RESPONSE_MIGRATIONS),
                                   "rostra_batch_schema": len(BATCH_MIGRATIONS)}


@STORES
def test_a_schema_newer_than_this_rostra_is_refused(postgres, store_class, what, table):
    dsn = postgres.new_database()

    async def main():
        store = store_class(dsn)
        await store.open()
        await store.close()
        conn = await asyncpg.connect(dsn)
        await conn.execute(f"UPDATE {table} SET version = version + 1")
        await conn.close()
        with pytest.raises(StoreError, match=f"the {what} has schema version"):
            await store.open()
        with pytest.raises(StoreError, match="not open"):
            store.pool  # noqa: B018 (the failed open left no pool behind)

    asyncio.run(main())


@STORES
def test_an_unreachable_database_is_named_without_its_password(store_class, what, table):
    dsn = f"postgresql://rostra:hunter2@127.0.0.1:{free_port()}/rostra"

    async def main():
        with pytest.raises(StoreError) as raised:
            await store_class(dsn).open()
        return str(raised.value)

    message = asyncio.run(main())
    assert message.startswith(f"cannot connect to the {what} at postgresql://rostra:***@127.0.0.1:")
    assert "hunter2" not in message
