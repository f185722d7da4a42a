"""One request's images draw on one budget (rostra/images/budget.py): bytes inline and downloaded, pixels from each
header; downloads a few at a time; decoding on its own threads."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from images import RecordingServer, Route, encoded, pattern, png_data_url
from rostra.errors import InvalidRequest
from rostra.images import decode
from rostra.images.limits import ImageLimits
from rostra.images.loader import ImageLoader, ImageSource

LOCAL = ("127.0.0.1",)


def sources(urls: list[str]) -> list[ImageSource]:
    return [ImageSource(f"messages[0].content[{n}]", url) for n, url in enumerate(urls)]


def load_all(urls: list[str], limits: ImageLimits):
    return asyncio.run(ImageLoader(limits).load_all(sources(urls)))


@pytest.fixture
def photos():
    body = encoded(pattern(300, 200), "PNG")
    server = RecordingServer({f"/{n}.png": Route(body=body) for n in range(6)}
                             | {"/slow.png": Route(body=body, delay=0.3), "/endless.png": Route(
                                 body=body * 40, sized=False)})
    yield server, len(body)
    server.close()


def test_downloads_within_the_request_budget_load_and_one_past_it_is_refused(photos):
    server, size = photos
    limits = ImageLimits(allow_hosts=LOCAL, max_request_bytes=3 * size + size // 2)
    assert len(load_all([server.url(f"/{n}.png") for n in range(3)], limits)) == 3
    with pytest.raises(InvalidRequest) as caught:
        load_all([server.url(f"/{n}.png") for n in range(4)], limits)
    assert caught.value.code == "images_too_large" and "bytes per request" in str(caught.value)


def test_a_download_is_stopped_at_the_chunk_that_overdraws_the_budget(photos):
    server, size = photos
    limits = ImageLimits(allow_hosts=LOCAL, max_request_bytes=2 * size)  # the body never says how long it is
    with pytest.raises(InvalidRequest) as caught:
        load_all([server.url("/endless.png")], limits)
    assert caught.value.code == "images_too_large" and caught.value.param == "messages[0].content[0]"


def test_inline_images_count_against_the_same_bytes(photos):
    server, size = photos
    inline = png_data_url(300, 200)
    limits = ImageLimits(allow_hosts=LOCAL, max_request_bytes=int(1.5 * size))
    with pytest.raises(InvalidRequest) as caught:
        load_all([inline, server.url("/0.png")], limits)
    assert caught.value.code == "images_too_large"


def test_pixels_are_charged_from_each_header():
    image = png_data_url(100, 100)
    limits = ImageLimits(max_request_pixels=30_000)
    assert len(load_all([image] * 3, limits)) == 3
    with pytest.raises(InvalidRequest) as caught:
        load_all([image] * 4, limits)
    assert caught.value.code == "images_too_large" and "pixels per request" in str(caught.value)


def test_downloads_run_a_few_at_a_time(photos):
    server, _ = photos
    started = time.monotonic()
    load_all([server.url("/slow.png")] * 6, ImageLimits(allow_hosts=LOCAL, max_fetches=2))
    assert time.monotonic() - started >= 0.85  # three waves of two 0.3 s downloads, never six at once
    assert server.hits.count("/slow.png") == 6


def test_decoding_runs_on_its_own_threads(monkeypatch):
    names: list[str] = []
    decode_image = decode.decode_image

    def recording(*args):
        names.append(threading.current_thread().name)
        return decode_image(*args)

    monkeypatch.setattr(decode, "decode_image", recording)
    load_all([png_data_url(20, 20)] * 3, ImageLimits())
    assert len(names) == 3 and all(name.startswith("rostra-image-decode") for name in names)


def test_every_load_of_one_request_draws_on_its_one_budget():
    """Issue 42: the budget is the request's (its scope's, rostra/http/scope.py), not one per load: a request whose
    images load in two passes (prepare's, then a later turn's) cannot take the budget twice; another request
    starts afresh."""
    from rostra.images.budget import RequestImageBudgets

    limits = ImageLimits(max_request_pixels=30_000)
    loader = ImageLoader(limits)

    async def request(passes: int) -> None:
        RequestImageBudgets().activate()  # as the gate does for each request
        for _ in range(passes):
            await loader.load_all(sources([png_data_url(100, 100)] * 2))  # 20,000 pixels a pass

    async def main():
        await asyncio.create_task(request(1))  # (a task of its own: a request's context)
        await asyncio.create_task(request(1))
        with pytest.raises(InvalidRequest) as refused:
            await asyncio.create_task(request(2))
        return refused.value

    refused = asyncio.run(main())
    assert refused.code == "images_too_large" and "pixels" in refused.message
