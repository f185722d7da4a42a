"""The FastAPI application: routes per API, errors in the OpenAI envelope, request ids, auth."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from contextlib import aclosing, asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from rostra import __version__, generation_defaults
from rostra.engines.base import Engine
from rostra.errors import APIError, InvalidRequest, NotFound, RequestTimeout
from rostra.parsing.reasoning import reasoning_parser_class
from rostra.parsing.tools import detect_tool_parser, tool_parser_class
from rostra.prompt.chat_template import ChatTemplate
from rostra.protocol.chat import ChatCompletionRequest
from rostra.protocol.completions import CompletionRequest
from rostra.protocol.responses import CreateResponseRequest
from rostra.config import Settings
from rostra.prompt.messages import template_messages
from rostra.protocol.tokenize import DetokenizeRequest, TokenizeRequest
from rostra.server.admission import Admission
from rostra.server.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from rostra.server.metrics import Metrics
from rostra.server.middleware import (
    PUBLIC_PATHS,
    AccessLogMiddleware,
    ApiKeyMiddleware,
    BodySizeLimitMiddleware,
    RequestIdMiddleware,
)
from rostra.serving.validation import check_model
from rostra.server.sse import EventStreamResponse, until_disconnected
from rostra.serving.chat import ChatService
from rostra.serving.completions import CompletionService
from rostra.serving.responses import ResponsesService
from rostra.store.base import ResponseStore

log = logging.getLogger("rostra.server")
CLIENT_CLOSED = 499  # nginx's code for "the client went away first"


# Parts of a pydantic error location that name a union member's type, not a field.
_TYPE_TAG = re.compile(r"^(str|int|float|bool|list|dict|none|json-or-python)(\[.*\])?$|^(function|constrained)-|\[")


def _param_from_location(location: tuple) -> str | None:
    """('messages', 0, 'role') -> 'messages[0].role' (the JSON path OpenAI names in `param`)."""
    path = ""
    for part in location:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part != "body" and not _TYPE_TAG.search(str(part)):
            path += f".{part}" if path else str(part)
    return path or None


async def parse_body(request: Request, model: type[BaseModel]) -> BaseModel:
    body = await request.body()
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        if first["type"] == "json_invalid":
            raise InvalidRequest(f"the request body is not valid JSON: {first['msg']}") from exc
        param = _param_from_location(tuple(first["loc"]))
        raise InvalidRequest(f"{param or 'body'}: {first['msg']}", param=param) from exc


def create_app(engine: Engine, settings: Settings, store: ResponseStore) -> FastAPI:
    def served_names() -> list[str]:
        """The names the API accepts: those given, else the engine's (a gateway's change as upstreams come and go)."""
        return settings.served_model_name or [model.id for model in engine.models()]

    template = ChatTemplate(settings.chat_template_source() or engine.chat_template, engine.bos_token,
                            engine.eos_token)
    parser_name = settings.tool_call_parser or detect_tool_parser(template.source)
    log.info("tool-call parser: %s", parser_name)
    field = settings.reasoning_field
    fields = ("reasoning_content", "reasoning") if field == "both" else (field,)
    reasoning = settings.reasoning_parser
    defaults = generation_defaults.resolve(settings.generation_config, engine.recommended_sampling,
                                           settings.override_generation_config)
    log.info("generation defaults: %s", defaults.describe())
    chat = ChatService(engine, template, served_names, tool_parser_class(parser_name),
                       reasoning_parser_class(reasoning) if reasoning else None, fields, defaults)
    completions = CompletionService(engine, served_names, defaults)
    responses = ResponsesService(chat, store)
    admission = Admission(settings.max_concurrency, settings.max_queue)
    metrics = Metrics((settings.served_model_name or [engine.model.id])[0], engine.running_requests, engine.parallel, admission)
    chat.on_finished = completions.on_finished = metrics.observe_job
    started = int(time.time())

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        await store.open()
        interrupted = await store.mark_interrupted()
        if interrupted:
            log.warning("%d background response(s) were running when the server stopped: marked failed", interrupted)
        await engine.start()
        yield
        await responses.cancel_running()
        await engine.close()
        await store.close()

    app = FastAPI(title="rostra", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.generation_defaults = defaults

    @app.exception_handler(APIError)
    async def api_error(_: Request, exc: APIError):
        return JSONResponse(exc.body(), status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException):
        error = APIError(str(exc.detail))
        error.status_code = exc.status_code
        error.error_type = "invalid_request_error" if exc.status_code < 500 else "server_error"
        return JSONResponse(error.body(), status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError):
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        return JSONResponse(InvalidRequest(first["msg"], param=_param_from_location(tuple(first["loc"]))).body(),
                            status_code=400)

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception):
        log.exception("unhandled error")
        return JSONResponse(APIError(f"internal error: {type(exc).__name__}").body(), status_code=500)

    def model_card(name: str) -> dict:
        info = engine.model_info(name)
        # generation_defaults (extension): what a request that leaves these fields out gets.
        return {"id": name, "object": "model", "created": started, "owned_by": info.owned_by,
                "max_model_len": info.context_length, "generation_defaults": dict(defaults.values)}

    @app.get("/health")
    async def health():
        # running: generations holding engine capacity (a disconnected client's drop within ~1 s).
        return {"status": "ok", "running": engine.running_requests(), **engine.health()}

    @app.get("/metrics")
    async def prometheus_metrics():
        return Response(metrics.exposition(), media_type=METRICS_CONTENT_TYPE)

    @app.get("/version")
    async def version():
        return {"version": __version__}

    @app.get("/v1/models")
    async def list_models():
        return {"object": "list", "data": [model_card(name) for name in served_names()]}

    @app.get("/v1/models/{model_id:path}")
    async def retrieve_model(model_id: str):
        if model_id not in served_names():
            raise NotFound(f"The model '{model_id}' does not exist", param="model", code="model_not_found")
        return model_card(model_id)

    async def respond(request: Request, service, body) -> Response:
        """Prepare and run a generation within an admission slot (held to the end of a stream)."""
        await admission.acquire()
        try:
            job = await service.prepare(body)
            request.state.job = job  # for the access log
            if settings.log_requests:
                log.info("request %s prompt: %r", job.id, job.runs[0].prompt.last_message_text)
            if body.stream:
                return EventStreamResponse(admission.hold_while(within(service.stream(job), deadline())))
        except BaseException:
            admission.release()
            raise
        try:
            async with asyncio.timeout(settings.request_timeout):
                result = await until_disconnected(request, service.complete(job))
        except TimeoutError:
            raise RequestTimeout(f"the request took longer than {settings.request_timeout} s") from None
        finally:
            admission.release()
        if settings.log_outputs and result:
            log.info("request %s output: %r", job.id, result["choices"])
        return Response(status_code=CLIENT_CLOSED) if result is None else JSONResponse(result)

    def deadline() -> float | None:
        timeout = settings.request_timeout
        return asyncio.get_running_loop().time() + timeout if timeout else None

    async def within(stream, until: float | None):
        """The stream, ended with an in-band timeout error past the deadline."""
        async with aclosing(stream):
            while True:
                try:
                    async with asyncio.timeout_at(until):
                        item = await anext(stream)
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    raise RequestTimeout(f"the request took longer than {settings.request_timeout} s") from None
                if settings.log_outputs:
                    log.info("stream chunk: %s", item)
                yield item

    @app.post("/v1/chat/completions")
    async def create_chat_completion(request: Request):
        return await respond(request, chat, await parse_body(request, ChatCompletionRequest))

    @app.post("/v1/completions")
    async def create_completion(request: Request):
        return await respond(request, completions, await parse_body(request, CompletionRequest))

    @app.post("/tokenize")
    async def tokenize(request: Request):
        body = await parse_body(request, TokenizeRequest)
        check_model(body.model, served_names()) if body.model else None
        if body.messages is not None:
            chat_body = ChatCompletionRequest.model_validate(
                {"model": served_names()[0], "messages": body.messages,
                 "add_generation_prompt": body.add_generation_prompt})
            text = await asyncio.to_thread(template.render, template_messages(chat_body.messages),
                                           add_generation_prompt=body.add_generation_prompt)
            tokens = await engine.tokenize(text, add_special=False)
        elif body.prompt is not None:
            tokens = await engine.tokenize(body.prompt, add_special=body.add_special_tokens)
        else:
            raise InvalidRequest("give a prompt or messages", param="prompt")
        return {"count": len(tokens), "max_model_len": engine.model.context_length, "tokens": tokens}

    @app.post("/detokenize")
    async def detokenize(request: Request):
        body = await parse_body(request, DetokenizeRequest)
        check_model(body.model, served_names()) if body.model else None
        if any(not 0 <= t < engine.vocab_size for t in body.tokens):
            raise InvalidRequest("token id outside the vocabulary", param="tokens")
        return {"prompt": await engine.detokenize(body.tokens)}

    @app.post("/v1/responses")
    async def create_response(request: Request):
        body = await parse_body(request, CreateResponseRequest)
        async with admission.slot():  # background runs go on after this request, outside the limit
            result = await responses.create(body)
        if isinstance(result, dict):
            return JSONResponse(result)
        return EventStreamResponse(result, responses_api=True)

    @app.get("/v1/responses/{response_id}")
    async def retrieve_response(response_id: str, stream: bool = False, starting_after: int | None = None):
        if stream:
            await responses.retrieve(response_id)  # 404 before the stream starts
            return EventStreamResponse(responses.follow(response_id, starting_after), responses_api=True)
        return await responses.retrieve(response_id)

    @app.post("/v1/responses/{response_id}/cancel")
    async def cancel_response(response_id: str):
        return await responses.cancel(response_id)

    @app.delete("/v1/responses/{response_id}")
    async def delete_response(response_id: str):
        return await responses.delete(response_id)

    @app.get("/v1/responses/{response_id}/input_items")
    async def list_input_items(response_id: str, after: str | None = None, limit: int = 20, order: str = "desc"):
        if not 1 <= limit <= 100:
            raise InvalidRequest("limit must be between 1 and 100", param="limit")
        if order not in ("asc", "desc"):
            raise InvalidRequest("order must be 'asc' or 'desc'", param="order")
        return await responses.input_items(response_id, after, limit, order)

    @app.delete("/admin/responses")
    async def purge_responses(older_than_days: float):
        """Store maintenance: drop finished responses older than N days."""
        if older_than_days < 0:
            raise InvalidRequest("older_than_days must not be negative", param="older_than_days")
        deleted = await store.delete_finished_before(int(time.time() - older_than_days * 86400))
        return {"object": "purge", "deleted": deleted}

    app.add_middleware(BodySizeLimitMiddleware, max_bytes=settings.max_body_bytes)
    public = PUBLIC_PATHS | ({"/metrics"} if settings.public_metrics else set())
    app.add_middleware(ApiKeyMiddleware, api_keys=settings.api_keys, public_paths=public,
                       admin_keys=settings.admin_keys)
    if settings.allowed_origins:  # CORS is off unless asked for
        app.add_middleware(CORSMiddleware, allow_origins=settings.allowed_origins,
                           allow_methods=settings.allowed_methods, allow_headers=settings.allowed_headers,
                           allow_credentials=settings.allow_credentials)
    app.add_middleware(AccessLogMiddleware, metrics=metrics)
    app.add_middleware(RequestIdMiddleware)
    return app
