"""One small error hierarchy: each class knows its HTTP status and OpenAI error `type`.

Foreign exceptions are translated at the HTTP boundary (rostra.server.app); before response
headers are sent an error is a JSON error response, after that an in-band SSE error event.
"""

from __future__ import annotations


class APIError(Exception):
    status_code = 500
    error_type = "server_error"
    headers: dict[str, str] = {}

    def __init__(self, message: str, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.error_type, "param": self.param, "code": self.code}}


class InvalidRequest(APIError):
    status_code = 400
    error_type = "invalid_request_error"


class Unauthorized(APIError):
    status_code = 401
    error_type = "invalid_request_error"

    def __init__(self, message: str = "Incorrect API key provided.", param: str | None = None,
                 code: str | None = "invalid_api_key"):
        super().__init__(message, param, code)


class NotFound(APIError):
    status_code = 404
    error_type = "invalid_request_error"


class PayloadTooLarge(APIError):
    status_code = 413
    error_type = "invalid_request_error"


class UnsupportedMediaType(APIError):
    status_code = 415
    error_type = "invalid_request_error"


class TooManyRequests(APIError):
    status_code = 429
    error_type = "rate_limit_error"

    def __init__(self, message: str, retry_after: int = 1):
        super().__init__(message, code="server_busy")
        self.headers = {"Retry-After": str(retry_after)}


class RequestTimeout(APIError):
    status_code = 504
    error_type = "timeout_error"


class ServerError(APIError):
    status_code = 500
    error_type = "server_error"


class ServiceUnavailable(APIError):
    status_code = 503
    error_type = "server_error"


class NotImplementedHere(APIError):
    """A request this server understands but cannot serve for this model (a count a gateway cannot make)."""
    status_code = 501
    error_type = "invalid_request_error"


class InsufficientStorage(APIError):
    """The server could not store what the request asked it to keep (its disk is full)."""

    status_code = 507
    error_type = "server_error"


class BadGateway(APIError):
    """An upstream failed (5xx, a broken connection, a malformed answer) after the retries."""

    status_code = 502
    error_type = "server_error"


class UpstreamRejected(APIError):
    """An upstream's own 4xx answer, relayed with its status and error fields."""

    def __init__(self, status_code: int, message: str, error_type: str | None = None, param: str | None = None,
                 code: str | None = None):
        super().__init__(message, param, code)
        self.status_code = status_code
        self.error_type = error_type or ("rate_limit_error" if status_code == 429 else "invalid_request_error")


class Conflict(APIError):
    """The request cannot be done in the resource's present state (an admin unload of a model in use)."""

    status_code = 409
    error_type = "invalid_request_error"
