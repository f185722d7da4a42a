"""The vector stores API over its store, the Files API's files, the indexer and the searcher. Every call acts as
the tenant of its API key: another key's store is a 404, and so is a File it cannot see."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from rostra.api.vector_stores.chunking import chunking_strategy
from rostra.api.vector_stores.embedder import Embedder
from rostra.api.vector_stores.index import Hit
from rostra.api.vector_stores.indexer import Indexer
from rostra.api.vector_stores.requests import (
    CreateBatchBody,
    CreateFileBody,
    CreateStoreBody,
    SearchBody,
    UpdateStoreBody,
)
from rostra.api.vector_stores.objects import (
    Deleted,
    FileContentPage,
    Page,
    SearchResult,
    SearchResultsPage,
    TextContent,
)
from rostra.api.vector_stores.search import Searcher, SearchOptions, search_options
from rostra.errors import InvalidRequest, NotFound
from rostra.store.base import StoreError
from rostra.store.batch_store import BatchStore
from rostra.store.tenancy import Tenant
from rostra.store.vector_objects import FileBatch, VectorStore, VectorStoreFile
from rostra.store.vector_store import VectorStores

MAX_ATTRIBUTES, MAX_KEY, MAX_VALUE = 16, 64, 512


def new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(12)


def check_attributes(attributes: dict[str, Any] | None, param: str) -> None:
    """OpenAI's bounds: 16 keys of up to 64 characters, string values of up to 512."""
    if attributes is None:
        return
    if len(attributes) > MAX_ATTRIBUTES:
        raise InvalidRequest(f"attributes may hold at most {MAX_ATTRIBUTES} keys", param=param)
    for key, value in attributes.items():
        if len(key) > MAX_KEY:
            raise InvalidRequest(f"attribute keys are at most {MAX_KEY} characters", param=f"{param}.{key[:16]}")
        if isinstance(value, str) and len(value) > MAX_VALUE:
            raise InvalidRequest(f"attribute values are at most {MAX_VALUE} characters", param=f"{param}.{key}")


class VectorStoresService:
    def __init__(self, store: VectorStores, files: BatchStore, indexer: Indexer, searcher: Searcher,
                 embedder: Embedder):
        self.store, self.files, self.indexer, self.searcher = store, files, indexer, searcher
        self.embedder = embedder

    def now(self) -> int:
        """The time expiry is measured by: the indexer's clock (a test's own), which expires the stores."""
        return int(self.indexer.clock())

    # -- stores ------------------------------------------------------------------------------------
    async def create_store(self, body: CreateStoreBody, tenant: Tenant) -> VectorStore:
        check_expiry(body.expires_after)
        strategy = chunking_strategy(body.chunking_strategy, "chunking_strategy")
        now = self.now()
        store = VectorStore(id=new_id("vs_"), created_at=now, name=body.name or "", description=body.description,
                            expires_after=body.expires_after, metadata=body.metadata or {}).active(now)
        if body.file_ids:
            self.embedder.model_name()  # no embedding model: say so now, not in each file's last_error
            for index, file_id in enumerate(body.file_ids):
                await self._file_object(file_id, tenant, f"file_ids[{index}]")
        await self.store.create_store(store, tenant.key)
        for file_id in body.file_ids or []:
            await self._attach(store, file_id, tenant, strategy, None, None)
        return await self.live(store)

    async def get_store(self, store_id: str, tenant: Tenant, param: str = "vector_store_id") -> VectorStore:
        store = await self.store.get_store(store_id, tenant)
        if store is None:
            raise NotFound(f"No vector store found with id '{store_id}'.", param=param)
        return store

    async def live(self, store: VectorStore) -> VectorStore:
        counts, usage = await self.store.counts(store.id)
        return store.live(counts, usage, self.now())

    async def list_stores(self, after: str | None, limit: int, order: str, tenant: Tenant) -> Page[VectorStore]:
        try:
            stores, more = await self.store.list_stores(after=after, limit=limit, order=order, tenant=tenant)
        except StoreError as exc:
            raise InvalidRequest(str(exc), param="after") from exc
        return Page[VectorStore](data=[await self.live(store) for store in stores], has_more=more)

    async def update_store(self, store_id: str, body: UpdateStoreBody, tenant: Tenant) -> VectorStore:
        store = await self.get_store(store_id, tenant)
        changes: dict[str, Any] = {}
        if "name" in body.model_fields_set:
            changes["name"] = body.name or ""
        if "metadata" in body.model_fields_set:
            changes["metadata"] = body.metadata or {}
        if "expires_after" in body.model_fields_set:
            check_expiry(body.expires_after)
            changes["expires_after"] = body.expires_after
        store = store.model_copy(update=changes).active(self.now())
        await self.store.put_store(store)
        return await self.live(store)

    async def delete_store(self, store_id: str, tenant: Tenant) -> Deleted:
        if not await self.store.delete_store(store_id, tenant):
            raise NotFound(f"No vector store found with id '{store_id}'.", param="vector_store_id")
        self.searcher.forget(store_id)
        return Deleted(id=store_id, object="vector_store.deleted")

    # -- files -------------------------------------------------------------------------------------
    async def add_file(self, store_id: str, body: CreateFileBody, tenant: Tenant) -> VectorStoreFile:
        store = await self._usable(store_id, tenant)
        strategy = chunking_strategy(body.chunking_strategy, "chunking_strategy")
        check_attributes(body.attributes, "attributes")
        await self._file_object(body.file_id, tenant, "file_id")
        return await self._attach(store, body.file_id, tenant, strategy, body.attributes, None)

    async def _usable(self, store_id: str, tenant: Tenant) -> VectorStore:
        """A store files can be added to: not expired, and an embedding model to index them with."""
        store = await self.get_store(store_id, tenant)
        if store.expired(self.now()):
            raise InvalidRequest(f"the vector store {store_id} has expired", param="vector_store_id")
        self.embedder.model_name()
        return store

    async def _file_object(self, file_id: str, tenant: Tenant, param: str) -> str:
        file = await self.files.get_file(file_id, tenant)
        if file is None:
            raise NotFound(f"No such File object: {file_id}", param=param)
        return file.filename

    async def _attach(self, store: VectorStore, file_id: str, tenant: Tenant, strategy: Any,
                      attributes: dict[str, Any] | None, batch_id: str | None) -> VectorStoreFile:
        filename = await self._file_object(file_id, tenant, "file_id")
        file = VectorStoreFile(id=file_id, created_at=self.now(), vector_store_id=store.id,
                               chunking_strategy=strategy, attributes=attributes, batch_id=batch_id,
                               filename=filename)
        await self.store.add_file(file)
        await self.store.put_store(store.active(self.now()))
        self.indexer.wake()
        return file

    async def get_file(self, store_id: str, file_id: str, tenant: Tenant) -> VectorStoreFile:
        await self.get_store(store_id, tenant)
        file = await self.store.get_file(store_id, file_id)
        if file is None:
            raise NotFound(f"No file found with id '{file_id}' in vector store '{store_id}'.", param="file_id")
        return file

    async def list_files(self, store_id: str, after: str | None, limit: int, order: str, status: str | None,
                         tenant: Tenant, batch_id: str | None = None) -> Page[VectorStoreFile]:
        await self.get_store(store_id, tenant)
        if status is not None and status not in ("in_progress", "completed", "failed", "cancelled"):
            raise InvalidRequest("filter must be in_progress, completed, failed or cancelled", param="filter")
        try:
            files, more = await self.store.list_files(store_id, after=after, limit=limit, order=order, status=status,
                                                      batch_id=batch_id)
        except StoreError as exc:
            raise InvalidRequest(str(exc), param="after") from exc
        return Page[VectorStoreFile](data=files, has_more=more)

    async def update_file(self, store_id: str, file_id: str, attributes: dict[str, Any] | None,
                          tenant: Tenant) -> VectorStoreFile:
        check_attributes(attributes, "attributes")
        file = (await self.get_file(store_id, file_id, tenant)).model_copy(update={"attributes": attributes})
        if not await self.store.set_attributes(file):
            raise NotFound(f"No file found with id '{file_id}' in vector store '{store_id}'.", param="file_id")
        return file

    async def delete_file(self, store_id: str, file_id: str, tenant: Tenant) -> Deleted:
        await self.get_store(store_id, tenant)
        if not await self.store.delete_file(store_id, file_id):
            raise NotFound(f"No file found with id '{file_id}' in vector store '{store_id}'.", param="file_id")
        return Deleted(id=file_id, object="vector_store.file.deleted")

    async def forget_file(self, file_id: str) -> None:
        """The File `file_id` is deleted (or expired): it leaves every store that held it, and their searches."""
        for store_id in await self.store.drop_file(file_id):
            self.searcher.forget(store_id)

    async def file_content(self, store_id: str, file_id: str, tenant: Tenant) -> FileContentPage:
        await self.get_file(store_id, file_id, tenant)
        texts = await self.store.file_text(store_id, file_id)
        return FileContentPage(data=[TextContent(text=text) for text in texts])

    # -- file batches ------------------------------------------------------------------------------
    async def create_batch(self, store_id: str, body: CreateBatchBody, tenant: Tenant) -> FileBatch:
        store = await self._usable(store_id, tenant)
        if (body.file_ids is None) == (body.files is None):
            raise InvalidRequest("give either file_ids or files", param="file_ids")
        if body.files is not None and (body.attributes is not None or body.chunking_strategy is not None):
            raise InvalidRequest("with files, give attributes and chunking_strategy per file", param="files")
        files = body.files or [CreateFileBody(file_id=file_id, attributes=body.attributes,
                                              chunking_strategy=body.chunking_strategy)
                               for file_id in body.file_ids or []]
        if not files:
            raise InvalidRequest("a file batch needs at least one file", param="file_ids")
        where = "files" if body.files is not None else "file_ids"
        strategies = []
        for index, file in enumerate(files):  # all checked before any is attached
            await self._file_object(file.file_id, tenant, f"{where}[{index}]")
            check_attributes(file.attributes, f"{where}[{index}].attributes")
            strategies.append(chunking_strategy(file.chunking_strategy, f"{where}[{index}].chunking_strategy"))
        batch = FileBatch(id=new_id("vsfb_"), created_at=self.now(), vector_store_id=store_id)
        await self.store.put_batch(batch)
        for file, strategy in zip(files, strategies):
            await self._attach(store, file.file_id, tenant, strategy, file.attributes, batch.id)
        return await self._live_batch(batch)

    async def get_batch(self, store_id: str, batch_id: str, tenant: Tenant) -> FileBatch:
        return await self._live_batch(await self._batch(store_id, batch_id, tenant))

    async def _batch(self, store_id: str, batch_id: str, tenant: Tenant) -> FileBatch:
        await self.get_store(store_id, tenant)
        batch = await self.store.get_batch(store_id, batch_id)
        if batch is None:
            raise NotFound(f"No file batch found with id '{batch_id}'.", param="batch_id")
        return batch

    async def _live_batch(self, batch: FileBatch) -> FileBatch:
        counts, _ = await self.store.counts(batch.vector_store_id, batch.id)
        return batch.live(counts)

    async def cancel_batch(self, store_id: str, batch_id: str, tenant: Tenant) -> FileBatch:
        batch = await self._batch(store_id, batch_id, tenant)
        counts, _ = await self.store.counts(store_id, batch_id)
        if batch.live(counts).status != "in_progress":
            return await self._live_batch(batch)  # done already: nothing to cancel
        await self.store.cancel_batch_files(store_id, batch_id)
        cancelled = batch.model_copy(update={"status": "cancelled"})
        await self.store.put_batch(cancelled)
        return await self._live_batch(cancelled)

    # -- search ------------------------------------------------------------------------------------
    async def search(self, store_id: str, body: SearchBody, tenant: Tenant) -> SearchResultsPage:
        if body.rewrite_query:
            raise InvalidRequest("rewrite_query is not served: the query is searched as written", param="rewrite_query")
        options = search_options(body.query, body.max_num_results, body.filters, body.ranking_options)
        hits = await self.search_stores([store_id], options, tenant)
        return SearchResultsPage(search_query=list(options.queries), data=[SearchResult.of(hit) for hit in hits])

    async def file_search_run(self, tool: dict[str, Any], tenant: Tenant, param: str
                              ) -> Callable[[list[str]], Awaitable[list[dict[str, Any]]]]:
        """The search a Responses `file_search` tool stands for (rostra/api/responses/file_search.py): its stores
        (visible to `tenant`) and options checked now, before the response runs."""
        store_ids = tool.get("vector_store_ids")
        if not isinstance(store_ids, list) or not store_ids or not all(isinstance(item, str) for item in store_ids):
            raise InvalidRequest("file_search needs vector_store_ids, a list of vector store ids",
                                 param=f"{param}.vector_store_ids")
        for store_id in store_ids:
            await self.get_store(store_id, tenant, f"{param}.vector_store_ids")
        prefix = f"{param}."
        base = search_options("-", tool.get("max_num_results"), tool.get("filters"), tool.get("ranking_options"),
                              prefix)
        self.embedder.model_name()

        async def run(queries: list[str]) -> list[dict[str, Any]]:
            hits = await self.search_stores(store_ids, replace(base, queries=tuple(queries)), tenant,
                                            f"{param}.vector_store_ids")
            return [{"file_id": hit.row.file_id, "filename": hit.row.filename, "score": round(hit.score, 6),
                     "text": hit.row.text, "attributes": hit.row.attributes} for hit in hits]
        return run

    async def search_stores(self, store_ids: list[str], options: SearchOptions, tenant: Tenant,
                            param: str = "vector_store_id") -> list[Hit]:
        """The best chunks of these stores (each visible to `tenant`, not expired), best first."""
        stores = []
        for store_id in store_ids:
            store = await self.store.get_store(store_id, tenant)
            if store is None:
                raise NotFound(f"No vector store found with id '{store_id}'.", param=param)
            if store.expired(self.now()):
                raise InvalidRequest(f"the vector store {store_id} has expired", param=param)
            stores.append(store)
        self.embedder.model_name()
        hits = await self.searcher.search(store_ids, options)
        for store in stores:  # searched: active now
            await self.store.put_store(store.active(self.now()))
        return hits


def check_expiry(expires_after: Any) -> None:
    if expires_after is not None and not 1 <= expires_after.days <= 365:
        raise InvalidRequest(f"expires_after.days must be between 1 and 365, not {expires_after.days}",
                             param="expires_after.days")

