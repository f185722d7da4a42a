"""Which envelope an error leaves the server in, by the request's path.

OpenAI's `{"error": {"message", "type", "param", "code"}}` unless an API registered its own for its paths
(Anthropic's Messages API: its clients read only theirs). The middleware (a missing key, a body too large) and the
app's error handlers (an unknown path or method) answer through it, so an error raised before a route runs reads
as the API's own; this package never names an API: each registers itself at start-up (rostra/server/app.py).
"""

from __future__ import annotations

from typing import Any, Callable

from rostra.errors import APIError

# An error (and the request's id, which some envelopes carry) -> the JSON body the client gets.
Envelope = Callable[[APIError, "str | None"], dict[str, Any]]


def openai_envelope(error: APIError, request_id: str | None = None) -> dict[str, Any]:
    return error.body()


class ErrorEnvelopes:
    def __init__(self) -> None:
        self._by_prefix: list[tuple[str, Envelope]] = []

    def register(self, prefix: str, envelope: Envelope) -> None:
        """Errors on `prefix` and the paths under it (`/v1/messages`, `/v1/messages/count_tokens`, not
        `/v1/messagesX`) leave in `envelope`; the longest registered prefix wins."""
        self._by_prefix.append((prefix.rstrip("/"), envelope))
        self._by_prefix.sort(key=lambda entry: len(entry[0]), reverse=True)

    def envelope(self, path: str) -> Envelope:
        for prefix, envelope in self._by_prefix:
            if path == prefix or path.startswith(prefix + "/"):
                return envelope
        return openai_envelope

    def body(self, path: str, error: APIError, request_id: str | None = None) -> dict[str, Any]:
        return self.envelope(path)(error, request_id)
