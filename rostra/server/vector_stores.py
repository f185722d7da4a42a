"""The vector stores of one server: their store (a SQLite file beside the Files store's, `vectors.sqlite3`; with a
PostgreSQL `--store`, in that database), the embedder over the served models, the indexer and the searcher (with
the served reranker, if one is named)."""

from __future__ import annotations

from rostra.api.batches.service import BatchesService
from rostra.api.vector_stores.embedder import Embedder
from rostra.api.vector_stores.indexer import Indexer
from rostra.api.vector_stores.reranker import Reranker
from rostra.api.vector_stores.search import Searcher
from rostra.api.vector_stores.service import VectorStoresService
from rostra.config import Settings
from rostra.models.manager import ModelManager
from rostra.server.batches import batches_dir
from rostra.store import POSTGRES_SCHEMES
from rostra.store.base import ResponseStore
from rostra.store.vector_sqlite import STORE_FILENAME, SqliteVectorStores
from rostra.store.vector_store import VectorStores


def open_vector_stores(settings: Settings, responses: ResponseStore) -> VectorStores:
    """PostgreSQL when `--store` names it, else SQLite beside the Files store. Not opened yet."""
    if settings.store and settings.store.startswith(POSTGRES_SCHEMES):
        from rostra.store.vector_postgres import PostgresVectorStores  # asyncpg only where it is used

        return PostgresVectorStores(settings.store)
    return SqliteVectorStores(batches_dir(settings, responses) / STORE_FILENAME)


def build_vector_stores(settings: Settings, responses: ResponseStore, files: BatchesService,
                        models: ModelManager) -> VectorStoresService:
    store = open_vector_stores(settings, responses)
    embedder = Embedder(models, settings.vector_store_model)

    async def read(file_id: str) -> tuple[str, bytes] | None:
        found = await files.store.get_file(file_id)
        if found is None or not await files.blobs.exists(file_id):
            return None
        data = bytearray()
        async for chunk in files.blobs.read(file_id):
            data += chunk
        return found.filename, bytes(data)

    indexer = Indexer(store, read, embedder, lease_seconds=settings.lease_seconds,
                      poll_interval=min(0.5, settings.lease_seconds / 4))
    reranker = None if settings.vector_store_reranker is None else Reranker(models, settings.vector_store_reranker)
    service = VectorStoresService(store, files.store, indexer, Searcher(store, embedder, reranker), embedder)
    files.worker.file_deleted.append(service.forget_file)  # a File deleted (or expired) leaves every store
    return service
