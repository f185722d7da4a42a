"""The Files and Batch APIs of one server: their store, the file contents and the batch worker, wired to the app.

Files and batches live beside the Responses store: a SQLite file (`batches.sqlite3`) and a `files/` directory in
the data directory (or beside the SQLite file `--store sqlite:///...` names), which several serving processes on
one data directory share; with a PostgreSQL `--store`, in that database, contents included, which replicas on any
machine share (README "Files and batches").
"""

from __future__ import annotations

import logging
from contextlib import AsyncExitStack
from pathlib import Path

from fastapi import FastAPI
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.types import Receive, Scope, Send

from rostra.api.batches.budget import BatchBudgets
from rostra.api.batches.objects import ENDPOINTS
from rostra.api.batches.service import BatchesService
from rostra.api.batches.worker import BatchSettings, BatchWorker
from rostra.config import Settings
from rostra.http.admission import Admission
from rostra.model_aliases import aliased
from rostra.models.manager import ModelManager
from rostra.store import POSTGRES_SCHEMES, SqliteResponseStore, default_data_dir
from rostra.store.base import ResponseStore
from rostra.store.batch_sqlite import STORE_FILENAME, SqliteBatchStore
from rostra.store.batch_store import BatchStore, WorkFilter
from rostra.store.blobs import Blobs, DirectoryBlobs
from rostra.store.tenancy import fingerprint

log = logging.getLogger("rostra.batches")


def batches_dir(settings: Settings, responses: ResponseStore) -> Path:
    """Beside the Responses store's SQLite file, else in the data directory."""
    if isinstance(responses, SqliteResponseStore) and str(responses.path) != ":memory:":
        return responses.path.parent
    return Path(settings.data_dir) if settings.data_dir else default_data_dir()


def open_batch_store(settings: Settings, responses: ResponseStore) -> tuple[BatchStore, Blobs]:
    """PostgreSQL when `--store` names it, else SQLite and a directory beside the Responses store. Not opened yet."""
    if settings.store and settings.store.startswith(POSTGRES_SCHEMES):
        from rostra.store.batch_postgres import PostgresBatchStore, PostgresBlobs  # asyncpg only where it is used

        postgres = PostgresBatchStore(settings.store)
        return postgres, PostgresBlobs(postgres)
    root = batches_dir(settings, responses)
    return SqliteBatchStore(root / STORE_FILENAME), DirectoryBlobs(root / "files")


def build_batches(app: FastAPI, settings: Settings, responses: ResponseStore, admission: Admission,
                  models: ModelManager) -> BatchesService:
    store, blobs = open_batch_store(settings, responses)
    # The app's own routes with their error handlers, without the middleware (the key check, the body limit, the
    # access log): a line is answered as its request is online, as the batch's owner.
    async def lines_app(scope: Scope, receive: Receive, send: Send) -> None:
        scope["app"] = app  # what routes reach the server's context through
        # Built per line: the handlers are copied when it is made, and the app's are installed after this runs.
        async with AsyncExitStack() as stack:  # what FastAPI's own middleware gives its routes
            scope["fastapi_middleware_astack"] = stack
            await ExceptionMiddleware(app.router, handlers=app.exception_handlers)(scope, receive, send)

    def busy() -> bool:
        """An online request waits for an admission slot, or every slot is taken."""
        full = admission.max_running is not None and admission.running >= admission.max_running
        return admission.waiting > 0 or full

    def work() -> WorkFilter:
        tasks = {slot.bundle.engine.task if slot.bundle is not None else slot.spec.settings.task
                 for slot in models.slots}
        endpoints = tuple(endpoint for endpoint in ENDPOINTS  # a reranker answers no batch endpoint
                          if (endpoint == "/v1/embeddings" and "embed" in tasks)
                          or (endpoint != "/v1/embeddings" and tasks & {"generate", "auto"}))
        # One model answers whatever model a request names (as online); several: the batches of their names.
        return WorkFilter(endpoints, None if len(models.slots) == 1 else tuple(models.names()))

    def resolve_model(name: str) -> str:
        """The model that answers a batch naming `name` (--model-alias), as online: its chunks are that model's."""
        return aliased(name, settings.model_aliases, models.names())

    worker = BatchWorker(store, blobs, lines_app, BatchSettings(
        concurrency=settings.batch_concurrency, lease_seconds=settings.lease_seconds,
        chunk_lines=settings.batch_chunk_lines, poll_interval=min(0.5, settings.lease_seconds / 4),
        window_seconds=int(settings.batch_window) or 1), busy, work, resolve_model)
    budgets = {fingerprint(detail.key.encode()): detail.limits.batch_daily_tokens
               for detail in settings.api_key_details if detail.limits.batch_daily_tokens is not None}
    if budgets:
        worker.budgets = BatchBudgets(app.state.rostra.usage, budgets)
    return BatchesService(store, blobs, worker, settings.max_file_bytes, settings.min_file_expiry)
