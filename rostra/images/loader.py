"""One request's images, from the URLs its parts give (data: or http(s):) to checked PromptImages.

Each error is a 400 that names the part it came from (`messages[0].content[1]`), in the API's own spelling:
the API gives each source its path.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from rostra.core import PromptImage
from rostra.errors import InvalidRequest
from rostra.images.budget import ImageBudget, request_budget
from rostra.images.data_url import decode_data_url
from rostra.images.decode import decode_image_off_loop
from rostra.images.fetch import FetchFailed, FetchRefused, ImageFetcher
from rostra.images.limits import ImageLimits


@dataclass(frozen=True)
class ImageSource:
    """Where an image part's bytes are: a `data:` or http(s) URL (Anthropic's `base64` sources come as data URLs);
    `param` names the part in the request."""

    param: str
    url: str


class ImageLoader:
    """One per model: the limits every request's images are held to. Each request fetches through a fetcher of
    its own (a connection pool made only if it has URLs, closed when its images are in), so nothing outlives it."""

    def __init__(self, limits: ImageLimits = ImageLimits()):
        self.limits = limits

    async def load_all(self, sources: list[ImageSource]) -> list[PromptImage]:
        """Every image, fetched and decoded concurrently within the request's budget (budget.py); the first failure
        (in request order) is the error."""
        if len(sources) > self.limits.max_images:
            raise InvalidRequest(f"the request holds {len(sources)} images: this server takes at most "
                                 f"{self.limits.max_images} per request", param=sources[self.limits.max_images].param,
                                 code="too_many_images")
        fetcher, budget = ImageFetcher(self.limits), request_budget(self.limits)
        downloads = asyncio.Semaphore(self.limits.max_fetches)
        try:
            results = await asyncio.gather(*(self.load(source, fetcher, budget, downloads) for source in sources),
                                           return_exceptions=True)
        finally:
            await fetcher.close()
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return [result for result in results if isinstance(result, PromptImage)]

    async def load(self, source: ImageSource, fetcher: ImageFetcher, budget: ImageBudget,
                   downloads: asyncio.Semaphore) -> PromptImage:
        data = await self._bytes(source, fetcher, budget, downloads)
        return await decode_image_off_loop(data, source.param, self.limits, budget)

    async def _bytes(self, source: ImageSource, fetcher: ImageFetcher, budget: ImageBudget,
                     downloads: asyncio.Semaphore) -> bytes:
        url = source.url.strip()
        if url[:5].lower() == "data:":
            data = decode_data_url(url, source.param, self.limits.max_bytes)
            budget.take_bytes(len(data), source.param)
            return data
        if url.split(":", 1)[0].lower() not in ("http", "https"):
            raise InvalidRequest("an image URL must be a data: URL or an http(s) URL", param=source.param,
                                 code="invalid_image_url")
        if not self.limits.fetch_urls:
            raise InvalidRequest("this server does not fetch image URLs (--no-image-urls): send the image as a "
                                 "data URL", param=source.param, code="image_urls_disabled")
        try:
            async with downloads:  # a few at once: a request of a hundred URLs does not open a hundred downloads
                return await fetcher.fetch(url, lambda count: budget.take_bytes(count, source.param))
        except (FetchRefused, FetchFailed) as exc:
            raise InvalidRequest(str(exc), param=source.param, code="invalid_image_url") from None
