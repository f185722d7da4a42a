"""Every error leaves the app in its API's envelope (envelopes.py): OpenAI's `{"error": {"message", "type", "param",
"code"}}` unless the path's API registered its own."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from rostra.errors import APIError, InvalidRequest
from rostra.http.envelopes import ErrorEnvelopes
from rostra.http.request_body import param_from_location

log = logging.getLogger("rostra.server")


def install_error_handlers(app: FastAPI, envelopes: ErrorEnvelopes) -> None:
    def respond(request: Request, error: APIError) -> JSONResponse:
        state = request.scope.setdefault("state", {})
        state["error"] = error  # the access log's param and code, whatever the envelope shows
        return JSONResponse(envelopes.body(request.url.path, error, state.get("request_id")),
                            status_code=error.status_code, headers=error.headers)

    @app.exception_handler(APIError)
    async def api_error(request: Request, exc: APIError):
        return respond(request, exc)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        error = APIError(str(exc.detail))
        error.status_code = exc.status_code
        error.error_type = "invalid_request_error" if exc.status_code < 500 else "server_error"
        error.headers = dict(exc.headers or {})
        return respond(request, error)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError):
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        return respond(request, InvalidRequest(first["msg"], param=param_from_location(tuple(first["loc"]))))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception):
        log.exception("unhandled error")
        return respond(request, APIError(f"internal error: {type(exc).__name__}"))
