"""What one request's images may cost together: bytes (inline and downloaded) and pixels.

The per-image limits (limits.py) alone let one request hold 256 images of 32 MiB and 64 million pixels each: 8 GiB
to download and 16 billion pixels to decode. A request's images draw on one budget instead, charged as bytes arrive
(a download is stopped at the chunk that overdraws it) and as each header declares its size (before a pixel is
decoded). The charge is taken under a lock: downloads run on the event loop, decoding in worker threads.
"""

from __future__ import annotations

import threading

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
