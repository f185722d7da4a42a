"""What an image may cost, and where rostra may fetch one from.

The defaults are far above what real clients send (a 4K screenshot is 8.3 million pixels and a few MiB; Anthropic
caps a request at 100 images of 8000x8000, OpenAI at 50 MB): they stop abuse (decompression bombs, endless
downloads, requests holding hundreds of images), not use.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ImageLimits:
    max_bytes: int = 32 * 1024 * 1024  # an image's encoded size (a data URL's decoded bytes, a download's body)
    max_pixels: int = 64_000_000  # width x height, checked from the header before any pixel is decoded
    max_side: int = 32_768  # the longer side, in pixels
    max_images: int = 256  # images in one request
    # All of one request's images together (budget.py): OpenAI takes 50 MB of images per request.
    max_request_bytes: int = 64 * 1024 * 1024
    max_request_pixels: int = 256_000_000  # 64 images of 2000x2000
    max_fetches: int = 8  # downloads of one request running at once
    fetch_timeout: float = 30.0  # seconds per download, redirects included
    max_redirects: int = 5
    # Fetching http(s) URLs: off (--no-image-urls) leaves data URLs only.
    fetch_urls: bool = True
    # Hosts (names, IP addresses or networks such as 10.0.0.0/8) fetched from though not public
    # (--image-allow-hosts): an internal image store a deployment trusts.
    allow_hosts: tuple[str, ...] = ()
