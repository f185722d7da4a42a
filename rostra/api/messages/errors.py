"""Anthropic's error envelope: `{"type": "error", "error": {"type": ..., "message": ...}, "request_id": ...}`,
its error type named by the HTTP status (as Anthropic's API names them)."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from rostra.errors import APIError, InvalidRequest

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
               503: "overloaded_error", 504: "timeout_error"}


class ThreadsUnsupported(InvalidRequest):
    """A request with `thread` (Anthropic's message-threads beta): rostra keeps no threads. The SDKs' tool runners
    read `error.details.error_code` and then send the whole conversation without `thread`."""

    details = {"error_code": "thread_unsupported_request"}

    def __init__(self) -> None:
        super().__init__("thread is not supported by this server: send the full conversation without `thread`",
                         param="thread", code="thread_unsupported_request")


def error_body(error: APIError, request_id: str | None = None) -> dict[str, Any]:
    """`param` (which field is wrong) has no place in Anthropic's envelope: it leads the message instead."""
    kind = ERROR_TYPES.get(error.status_code, "invalid_request_error" if error.status_code < 500 else "api_error")
    message = error.message
    if error.param and not message.startswith(error.param):
        message = f"{error.param}: {message}"
    body: dict[str, Any] = {"type": kind, "message": message}
    if isinstance(error, ThreadsUnsupported):
        body["details"] = dict(error.details)
    return {"type": "error", "error": body, "request_id": request_id}


def error_response(error: APIError, request_id: str | None = None) -> JSONResponse:
    return JSONResponse(error_body(error, request_id), status_code=error.status_code, headers=error.headers)
