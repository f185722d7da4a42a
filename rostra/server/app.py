"""The composition root: the engine, settings and store become services, routes and middleware.

Routes live in rostra/server/routes/ (one module per API) and reach the services through the
ServerContext kept in `app.state.rostra`; every generation request goes through one endpoint shape
(rostra/server/generation_endpoint.py).
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Callable

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from rostra import __version__, generation_defaults
from rostra.api.messages.service import MessagesService
from rostra.api.responses.conversations import ConversationsService
from rostra.api.responses.mcp.tools import McpPolicy, parse_tool_servers
from rostra.api.responses.service import ResponsesService
from rostra.api.embeddings.service import EmbeddingsService
from rostra.config import Settings
from rostra.engines.base import Engine
from rostra.parsing.reasoning import reasoning_parser_class
from rostra.parsing.tools import detect_tool_parser, layered_tool_parser, tool_parser_class
from rostra.parsing.tools.base import ToolParser
from rostra.playground import routes as playground
from rostra.prompt.chat_template import ChatTemplate
from rostra.server.admission import Admission
from rostra.server.context import ServerContext
from rostra.server.error_handlers import install_error_handlers
from rostra.server.metrics import Metrics
from rostra.server.middleware import (
    PUBLIC_PATHS,
    AccessLogMiddleware,
    ApiKeyMiddleware,
    BodySizeLimitMiddleware,
    RequestIdMiddleware,
)
from rostra.server.routes import ROUTERS
from rostra.serving.chat import ChatService
from rostra.serving.completions import CompletionService
from rostra.serving.reasoning_crypto import ReasoningSealer, decode_key
from rostra.store import default_data_dir
from rostra.store.base import ResponseStore

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


def build_context(engine: Engine, settings: Settings, store: ResponseStore) -> ServerContext:
    template = ChatTemplate(settings.chat_template_source() or engine.chat_template, engine.bos_token,
                            engine.eos_token)
    parser_name = settings.tool_call_parser or detect_tool_parser(template.source)
    log.info("tool-call parser: %s%s", parser_name, "" if settings.strict_tool_parsing else " (then the lenient ones)")
    primary = tool_parser_class(parser_name)
    # The class itself, or (the default) a factory like it that layers the lenient parsers after it.
    tool_parser: Callable[..., ToolParser] = primary if settings.strict_tool_parsing else layered_tool_parser(primary)
    field = settings.reasoning_field
    fields = ("reasoning_content", "reasoning") if field == "both" else (field,)
    reasoning = settings.reasoning_parser

    defaults = generation_defaults.resolve(settings.generation_config, engine.recommended_sampling,
                                           settings.override_generation_config)
    log.info("generation defaults: %s", defaults.describe())

    def served_names() -> list[str]:
        return settings.served_model_name or [model.id for model in engine.models()]

    chat = ChatService(engine, template, served_names, tool_parser,
                       reasoning_parser_class(reasoning) if reasoning else None, fields, defaults,
                       raw_special_tokens=settings.raw_special_tokens)
    completions = CompletionService(engine, served_names, defaults, max_choices=settings.max_choices)
    admission = Admission(settings.max_concurrency, settings.max_queue)
    metrics = Metrics((settings.served_model_name or [engine.model.id])[0], engine.running_requests, engine.parallel,
                      admission, engine.speculative_tokens)
    chat.on_finished = completions.on_finished = metrics.observe_job
    sealer = reasoning_sealer(settings)  # one key seals Responses' encrypted reasoning and Messages' signatures
    responses = ResponsesService(chat, store, mcp_policy(settings), sealer,
                                 lease_seconds=settings.lease_seconds, shutdown_grace=settings.shutdown_grace,
                                 max_background=settings.max_background_responses or None)
    messages = MessagesService(chat, sealer, keep_attribution=settings.keep_attribution_line)
    return ServerContext(engine, settings, store, template, chat, completions, responses, ConversationsService(store),
                         admission, metrics, served_names, defaults, messages, EmbeddingsService(engine, served_names))


@asynccontextmanager
async def lifespan(app: FastAPI):
    context: ServerContext = app.state.rostra
    await context.store.open()
    await context.responses.start()  # recovery, then lease keeping (several replicas may share the store)
    await context.engine.start()
    yield
    await context.responses.stop()
    await context.engine.close()
    await context.store.close()


def add_middleware(app: FastAPI, settings: Settings, metrics: Metrics) -> None:
    """Outermost last: request id, access log, CORS, API keys, body size."""
    app.add_middleware(BodySizeLimitMiddleware, max_bytes=settings.max_body_bytes)
    public = (PUBLIC_PATHS | ({"/metrics"} if settings.public_metrics else set())
              | (playground.PUBLIC_PATHS if settings.ui else set()))
    app.add_middleware(ApiKeyMiddleware, api_keys=settings.api_keys, public_paths=public,
                       admin_keys=settings.admin_keys)
    if settings.allowed_origins:  # CORS is off unless asked for
        app.add_middleware(CORSMiddleware, allow_origins=settings.allowed_origins,
                           allow_methods=settings.allowed_methods, allow_headers=settings.allowed_headers,
                           allow_credentials=settings.allow_credentials)
    app.add_middleware(AccessLogMiddleware, metrics=metrics)
    app.add_middleware(RequestIdMiddleware)


def create_app(engine: Engine, settings: Settings, store: ResponseStore) -> FastAPI:
    context = build_context(engine, settings, store)
    app = FastAPI(title="rostra", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None)
    # No redirects from `/v1/models/` to `/v1/models`: Starlette builds their Location from the Host
    # header, which a client chooses. A path with a trailing slash is a 404.
    app.router.redirect_slashes = False
    app.state.rostra = context
    install_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    add_middleware(app, settings, context.metrics)
    return app
