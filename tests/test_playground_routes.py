"""The playground's routes without a browser (tests/test_playground.py has the page in Chromium): `--no-ui`."""

from __future__ import annotations

import pytest

from harness import InProcessServer


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_no_ui_turns_the_page_off(tmp_path):
    async with InProcessServer(tmp_path, [], ui=False) as server:
        for path in ("/", "/playground/app.js", "/playground/config"):
            answer = await server.client.get(path)
            assert answer.status_code == 404 and "error" in answer.json(), path
        assert (await server.client.get("/v1/models")).status_code == 200
    async with InProcessServer(tmp_path, [], api_keys=["k"]) as keyed:  # the page is public, the API is not
        assert (await keyed.client.get("/")).status_code == 200
        assert (await keyed.client.get("/v1/models")).status_code == 401
