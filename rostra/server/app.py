"""The composition root: the models, settings and store become services, routes and middleware.

The only package that knows every API: it builds their services (the server's Responses and Conversations, each
model's Messages and Embeddings) into the ServerContext kept in `app.state.rostra` and the model bundles, mounts
their routes (rostra/server/routes/, the APIs' own routes.py) and registers their error envelopes. The HTTP
plumbing below (rostra/http/) and the model lifecycle below that (rostra/models/) never import an API; every
generation request goes through one endpoint shape (rostra/http/generation_endpoint.py).
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from rostra import __version__, generation_defaults
from rostra.api.batches.service import BatchesService
from rostra.api.completions.service import CompletionService
from rostra.api.decisions.service import DecisionsService
from rostra.api.embeddings.service import EmbeddingsService
from rostra.api.messages.service import MessagesService
from rostra.api.rerank.service import RerankService
from rostra.api.responses.conversations import ConversationsService
from rostra.api.responses.mcp.tools import McpPolicy, parse_tool_servers
from rostra.api.responses.service import ResponsesService
from rostra.api.vector_stores.service import VectorStoresService
from rostra.config import Settings
from rostra.engines.base import Engine
from rostra.engines.registry import build_engine
from rostra.http.admission import Admission
from rostra.http.context import ServerContext
from rostra.http.envelopes import ErrorEnvelopes
from rostra.http.error_handlers import install_error_handlers
from rostra.http.key_limits import KeyLimitsMiddleware
from rostra.http.metrics import Metrics
from rostra.http.usage_recorder import UsageRecorder
from rostra.http.middleware import (
    PUBLIC_PATHS,
    AccessLogMiddleware,
    ApiKeyMiddleware,
    BodySizeLimitMiddleware,
    RequestIdMiddleware,
)
from rostra.models.bundle import JobObserver, ModelBundle, build_bundle
from rostra.models.manager import ModelManager, ModelSlot
from rostra.models.specs import ModelSpec
from rostra.playground import routes as playground
from rostra.server.batches import build_batches
from rostra.server.vector_stores import build_vector_stores
from rostra.server.routes import ENVELOPES, ROUTERS
from rostra.server.usage import open_usage_store
from rostra.service_set import ServiceSet
from rostra.serving.job import Job
from rostra.serving.reasoning_crypto import ReasoningSealer, decode_key
from rostra.store import default_data_dir
from rostra.store.base import ResponseStore
from rostra.store.tenancy import fingerprint

log = logging.getLogger("rostra.server")


def mcp_policy(settings: Settings) -> McpPolicy:
    try:
        servers = parse_tool_servers(settings.tool_servers)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    return McpPolicy(tuple(settings.mcp_allow), servers, settings.mcp_timeout, settings.mcp_max_output)


def reasoning_sealer(settings: Settings) -> ReasoningSealer:
    try:
        key = decode_key(settings.reasoning_key) if settings.reasoning_key else None
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    return ReasoningSealer(key, Path(settings.data_dir) if settings.data_dir else default_data_dir())


def build_context(settings: Settings, store: ResponseStore, specs: list[ModelSpec],
                  built: Engine | None = None) -> ServerContext:
    """The server's services over a model manager of `specs`; `built`: the one spec's engine, built already."""
    admission = Admission(settings.max_concurrency, settings.max_queue)
    metrics = Metrics(admission)
    names = {fingerprint(detail.key.encode()): detail.name for detail in settings.api_key_details if detail.name}
    usage = UsageRecorder(open_usage_store(settings, store), metrics.registry, names)
    sealer = reasoning_sealer(settings)  # one key seals Responses' encrypted reasoning and Messages' signatures

    def make_bundle(spec: ModelSpec, engine: Engine) -> ModelBundle:
        """A loaded model and the services of the capabilities its engine has (engines/base.py Capabilities):
        an embedding model gets no Completions, Messages or Decisions, a chat model no Embeddings."""
        observer = both(metrics.observer(spec.name), usage.observer(spec.name))
        bundle = build_bundle(spec.name, engine, spec.settings, observer)
        capabilities = engine.capabilities()
        if capabilities.text:
            completions = CompletionService(engine, bundle.served_names, bundle.generation_defaults,
                                            max_choices=spec.settings.max_choices,
                                            fit_budgets=spec.settings.output_budget == "fit")
            completions.on_finished = observer
            bundle.services.add(completions)
            bundle.services.add(MessagesService(bundle.chat, sealer,
                                                keep_attribution=spec.settings.keep_attribution_line))
            bundle.services.add(DecisionsService(bundle.chat))
        if capabilities.embedding:
            bundle.services.add(EmbeddingsService(engine, bundle.served_names))
        if capabilities.rerank:
            bundle.services.add(RerankService(engine, bundle.served_names))
        return bundle

    def on_change(slot: ModelSlot) -> None:
        name = slot.spec.name
        if slot.bundle is not None:
            metrics.model_loaded(name, slot.bundle.engine, slot.load_seconds)
        elif slot.state == "unloaded":
            metrics.add_model(name, lambda: slot.waiting, lambda: slot.leases)
        else:
            metrics.model_unloaded(name)

    models = ModelManager([], settings, build_engine, make_bundle, on_change)
    for spec in specs:
        models.add(spec, built if len(specs) == 1 else None)
    mcp = mcp_policy(settings)
    responses = ResponsesService(models.chat_for, store, mcp, sealer,
                                 lease_seconds=settings.lease_seconds, shutdown_grace=settings.shutdown_grace,
                                 max_background=settings.max_background_responses or None)
    return ServerContext(settings, store, models, admission, metrics,
                         ServiceSet(responses, ConversationsService(store),
                                    playground.PlaygroundConfig(tuple(mcp.tool_servers))), usage)


def both(first: JobObserver, second: JobObserver) -> JobObserver:
    def observe(job: Job, reasons: list[str]) -> None:
        first(job, reasons)
        second(job, reasons)
    return observe


def single_model_spec(engine: Engine, settings: Settings) -> ModelSpec:
    """A classic `rostra serve [MODEL]`: its one model, loaded at start-up (and kept, unless --model-ttl)."""
    name = (settings.served_model_name or [engine.model.id])[0]
    return ModelSpec(name, settings, preload=True)


@asynccontextmanager
async def lifespan(app: FastAPI):
    context: ServerContext = app.state.rostra
    batches: BatchesService = app.state.batches
    vector_stores: VectorStoresService = app.state.vector_stores
    responses = context.services.get(ResponsesService)
    await context.store.open()
    await batches.store.open()
    await context.usage.store.open()
    await vector_stores.store.open()
    await responses.start()  # recovery, then lease keeping (several replicas may share the store)
    try:
        await context.models.start()  # the preloaded models (a classic server's one model)
        batches.worker.start()  # batch lines run behind online requests, from now on
        vector_stores.indexer.start()  # files left in progress (by a process that died too) are indexed
        yield
    finally:
        await vector_stores.indexer.stop()  # a file it was indexing is taken over once its lease expires
        await batches.worker.stop()  # the lines it was running are taken over once their chunk's lease expires
        await responses.stop()
        await context.models.stop()
        await vector_stores.store.close()
        await batches.store.close()
        await context.usage.flush()
        await context.usage.store.close()
        await context.store.close()


def add_middleware(app: FastAPI, settings: Settings, context: ServerContext, envelopes: ErrorEnvelopes) -> None:
    """Outermost last: request id, access log, CORS, API keys, per-key limits, body size."""
    metrics = context.metrics
    app.add_middleware(BodySizeLimitMiddleware, max_bytes=settings.max_body_bytes, upload_bytes=settings.max_file_bytes,
                       envelopes=envelopes)
    if any(detail.limits.any for detail in settings.api_key_details):
        app.add_middleware(KeyLimitsMiddleware, usage=context.usage.store, envelopes=envelopes)
    public = (PUBLIC_PATHS | ({"/metrics"} if settings.public_metrics else set())
              | (playground.PUBLIC_PATHS if settings.ui else set()))
    app.add_middleware(ApiKeyMiddleware, api_keys=settings.api_keys, public_paths=public,
                       admin_keys=settings.admin_keys, shared_store=settings.shared_store, envelopes=envelopes,
                       key_details=settings.api_key_details)
    if settings.allowed_origins:  # CORS is off unless asked for
        app.add_middleware(CORSMiddleware, allow_origins=settings.allowed_origins,
                           allow_methods=settings.allowed_methods, allow_headers=settings.allowed_headers,
                           allow_credentials=settings.allow_credentials)
    app.add_middleware(AccessLogMiddleware, metrics=metrics, log_bodies=settings.log_request_bodies)
    app.add_middleware(RequestIdMiddleware)


def create_app(engine: Engine | None, settings: Settings, store: ResponseStore,
               specs: list[ModelSpec] | None = None) -> FastAPI:
    """A server of one engine built already (a classic `rostra serve`), or of the models `specs` declares."""
    if engine is not None:
        specs = [single_model_spec(engine, settings)]
    context = build_context(settings, store, specs or [], engine)
    if engine is not None:  # a bad --generation-config is reported now, before the model loads
        generation_defaults.resolve(settings.generation_config, engine.recommended_sampling,
                                    settings.override_generation_config)
    app = FastAPI(title="rostra", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None)
    # No redirects from `/v1/models/` to `/v1/models`: Starlette builds their Location from the Host
    # header, which a client chooses. A path with a trailing slash is a 404.
    app.router.redirect_slashes = False
    app.state.rostra = context
    app.state.batches = build_batches(app, settings, store, context.admission, context.models)
    context.services.get(ResponsesService).files = app.state.batches  # input_image and input_file parts by file_id
    app.state.vector_stores = build_vector_stores(settings, store, app.state.batches, context.models)
    context.services.get(ResponsesService).file_searcher = app.state.vector_stores  # the file_search tool
    envelopes = ErrorEnvelopes()
    for register in ENVELOPES:  # each API whose clients read an error envelope of their own
        register(envelopes)
    install_error_handlers(app, envelopes)
    for router in ROUTERS:
        app.include_router(router)
    app.state.usage = context.usage.store  # the usage API's
    add_middleware(app, settings, context, envelopes)
    return app
