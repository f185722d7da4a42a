"""What one request's images may cost together: bytes (inline and downloaded) and pixels.

The per-image limits (limits.py) alone let one request hold 256 images of 32 MiB and 64 million pixels each: 8 GiB
to download and 16 billion pixels to decode. A request's images draw on one budget instead, charged as bytes arrive
(a download is stopped at the chunk that overdraws it) and as each header declares its size (before a pixel is
decoded). The charge is taken under a lock: downloads run on the event loop, decoding in worker threads.
"""

from __future__ import annotations

import threading
from contextvars import ContextVar

from rostra.errors import InvalidRequest
from rostra.images.limits import ImageLimits


class ImageBudget:
    """One request's: the bytes and pixels its images have taken so far."""

    def __init__(self, limits: ImageLimits):
        self.limits = limits
        self._used = {"bytes": 0, "pixels": 0}
        self._lock = threading.Lock()

    def take_bytes(self, count: int, param: str) -> None:
        self._take("bytes", count, self.limits.max_request_bytes, param)

    def take_pixels(self, count: int, param: str) -> None:
        self._take("pixels", count, self.limits.max_request_pixels, param)

    def _take(self, unit: str, count: int, limit: int, param: str) -> None:
        with self._lock:
            self._used[unit] += count
            over = self._used[unit] > limit
        if over:
            raise InvalidRequest(f"the request's images come to more than this server's limit of {limit} {unit} per "
                                 "request", param=param, code="images_too_large")


class RequestImageBudgets:
    """A request's budgets (one per model's limits: a Responses turn may go on with another model), held by its
    scope (rostra/http/scope.py): every load of its images draws on them, the ones `prepare` makes and a later
    turn's (an MCP call's results, a think-first continuation) alike, not a fresh budget per load."""

    def __init__(self) -> None:
        self._budgets: dict[ImageLimits, ImageBudget] = {}

    def of(self, limits: ImageLimits) -> ImageBudget:
        budget = self._budgets.get(limits)
        if budget is None:
            budget = self._budgets[limits] = ImageBudget(limits)
        return budget

    def activate(self) -> None:
        """The request's budgets for the rest of the task that admitted it (a route's task serves that request
        alone; a WebSocket lane's next turn activates its own) and the tasks it starts (a stream, a background
        run, which copy its context)."""
        _current.set(self)


_current: ContextVar[RequestImageBudgets | None] = ContextVar("rostra_request_images", default=None)


def request_budget(limits: ImageLimits) -> ImageBudget:
    """The budget of the request whose work runs now, for these limits; outside any request (a test, a batch's
    own tooling) a budget of its own."""
    budgets = _current.get()
    return ImageBudget(limits) if budgets is None else budgets.of(limits)
