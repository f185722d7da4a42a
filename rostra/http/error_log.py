"""What the access log says of a request that failed: the error as the client got it (status, type, code,
param, message), and with --log-request-bodies the request's body with its secrets redacted.

The error is read from the response body (every API's envelope: OpenAI's `{"error": {...}}`, Anthropic's
`{"type": "error", "error": {...}}`), so whichever layer refused the request (a middleware, a route, a
handler) the line is the same. Request headers are never logged: they carry the API keys.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

# Error bodies are small; anything past this is not an error envelope worth reading.
MAX_ERROR_BODY = 16 * 1024
# A request body logged for debugging is cut here (a 16 MiB prompt does not belong in a log line).
MAX_LOGGED_BODY = 64 * 1024
SECRET_NAMES = frozenset({"api_key", "apikey", "authorization", "x-api-key", "password", "secret", "token",
                          "access_token", "refresh_token", "client_secret", "headers", "env"})
SECRET_SUFFIXES = ("_key", "_secret", "_token", "_password")
REDACTED = "[redacted]"


@dataclass(frozen=True)
class ErrorSummary:
    type: str | None
    code: str | None
    param: str | None
    message: str | None

    def record(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value is not None}


def read_error(body: bytes) -> ErrorSummary | None:
    """The error of a JSON error response, in any API's envelope; None when the body is not one."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if not isinstance(error, dict):
        return None
    code = error.get("code")
    details = error.get("details")
    if code is None and isinstance(details, dict):  # Anthropic's machine-readable code
        code = details.get("error_code")

    def text(value: Any) -> str | None:
        return None if value is None else str(value)

    return ErrorSummary(text(error.get("type")), text(code), text(error.get("param")), text(error.get("message")))


def redacted_body(body: bytes) -> Any:
    """The request body for the log: JSON with every secret-looking field's value replaced, cut to a size."""
    if len(body) > MAX_LOGGED_BODY:
        return f"<{len(body)} bytes: too large to log>"
    try:
        return redact(json.loads(body))
    except ValueError:
        return f"<{len(body)} bytes, not JSON>"  # raw text could hold a key where no field names it


def redact(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: REDACTED if _secret(key) else redact(item) for key, item in value.items()}
    if isinstance(value, list):
        return [redact(item) for item in value]
    return value


def _secret(name: Any) -> bool:
    lowered = str(name).lower()
    return lowered in SECRET_NAMES or lowered.endswith(SECRET_SUFFIXES)
