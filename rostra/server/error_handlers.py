"""Every error leaves the app in the OpenAI envelope `{"error": {"message", "type", "param", "code"}}`."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from rostra.errors import APIError, InvalidRequest
from rostra.server.request_body import param_from_location

log = logging.getLogger("rostra.server")


def install_error_handlers(app: FastAPI) -> None:
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
        return JSONResponse(InvalidRequest(first["msg"], param=param_from_location(tuple(first["loc"]))).body(),
                            status_code=400)

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception):
        log.exception("unhandled error")
        return JSONResponse(APIError(f"internal error: {type(exc).__name__}").body(), status_code=500)
