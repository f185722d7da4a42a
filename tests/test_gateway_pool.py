"""The gateway's retry, ejection and balancing policy, against upstreams simulated at the HTTP
transport (statuses and connection failures a live server cannot be made to produce on cue)."""

import asyncio
import json

import httpx
import pytest

from rostra.engines.remote.pool import UpstreamPool
from rostra.engines.remote.upstream import UpstreamConfig, parse_upstream
from rostra.errors import BadGateway, ServiceUnavailable, UpstreamRejected

A, B = "http://a.test/v1", "http://b.test/v1"
MODELS = {"object": "list", "data": [{"id": "m", "object": "model", "created": 0, "owned_by": "x",
                                      "max_model_len": 4096}]}
SSE = b'data: {"choices": [{"index": 0, "text": "hi", "finish_reason": "stop"}]}\n\ndata: [DONE]\n\n'


def pool_with(answers: list, upstreams=(A, B), eject_after: int = 2) -> tuple[UpstreamPool, list[str]]:
    """POSTs are answered from `answers` in turn, whichever upstream gets them: a status code,
    or an exception to raise."""
    calls: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        base = f"{request.url.scheme}://{request.url.host}/v1"
        if request.method == "GET":
            return httpx.Response(200, json=MODELS)
        calls.append(base)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        if answer == 200:
            return httpx.Response(200, content=SSE, headers={"content-type": "text/event-stream"})
        body = {"error": {"message": f"status {answer}", "type": "invalid_request_error", "param": "max_tokens",
                          "code": "too_big"}}
        return httpx.Response(answer, json=body, headers={"retry-after": "0"})

    pool = UpstreamPool([UpstreamConfig(url) for url in upstreams], backoff=0.001, eject_after=eject_after,
                        transport=httpx.MockTransport(handle))
    return pool, calls


async def post_and_read(pool: UpstreamPool) -> list[dict]:
    await pool.check_all()
    response = await pool.post("m", "/completions", {"model": "m"})
    try:
        return [chunk async for chunk in response.events()]
    finally:
        await response.aclose()


def run(coro):
    return asyncio.run(coro)


def test_a_5xx_is_retried_on_another_upstream_and_counts_against_the_first():
    pool, calls = pool_with([500, 200], eject_after=1)
    chunks = run(post_and_read(pool))
    assert chunks[0]["choices"][0]["text"] == "hi"
    assert len(calls) == 2 and calls[0] != calls[1]
    failed, served = (next(u for u in pool.upstreams if u.url == url) for url in calls)
    assert failed.ejected and failed.failures == 1 and not served.ejected
    assert failed.outstanding == served.outstanding == 0


def test_connection_errors_and_429_are_retried():
    pool, calls = pool_with([httpx.ConnectError("refused"), 429, 200], upstreams=(A,))
    run(post_and_read(pool))
    assert calls == [A, A, A]


def test_no_pause_after_the_last_attempt(monkeypatch):
    """A 429 on the last attempt is relayed at once: waiting out its Retry-After would only delay the error."""
    pauses: list[float] = []

    async def record(seconds):
        pauses.append(seconds)

    pool, calls = pool_with([429, 429, 429], upstreams=(A,))
    monkeypatch.setattr("rostra.engines.remote.pool.asyncio.sleep", record)
    with pytest.raises(UpstreamRejected):
        run(post_and_read(pool))
    assert len(calls) == 3
    retry_after_pauses = [p for p in pauses if p == 0]  # the answers say Retry-After: 0
    assert len(retry_after_pauses) == 2  # after the first and the second attempt, not after the third


def test_a_4xx_is_relayed_at_once_never_retried():
    pool, calls = pool_with([400, 200])
    with pytest.raises(UpstreamRejected) as raised:
        run(post_and_read(pool))
    assert len(calls) == 1
    error = raised.value
    assert (error.status_code, error.param, error.code, error.message) == (400, "max_tokens", "too_big", "status 400")
    assert all(upstream.outstanding == 0 and not upstream.ejected for upstream in pool.upstreams)


def test_the_upstreams_own_credentials_failing_is_a_502():
    pool, _ = pool_with([401], upstreams=(A,))
    with pytest.raises(BadGateway, match="credentials"):
        run(post_and_read(pool))


def test_when_every_attempt_fails_the_last_error_is_raised():
    pool, calls = pool_with([httpx.ConnectError("x")] * 3, upstreams=(A,))
    with pytest.raises(ServiceUnavailable):
        run(post_and_read(pool))
    assert len(calls) == 3  # one try and two retries
    pool, _ = pool_with([503] * 3, upstreams=(A,))
    with pytest.raises(BadGateway, match="status 503"):
        run(post_and_read(pool))


def test_an_in_band_error_in_the_stream_is_raised():
    def handle(request):
        if request.method == "GET":
            return httpx.Response(200, json=MODELS)
        return httpx.Response(200, content=b'data: {"error": {"message": "engine died"}}\n\n')

    pool = UpstreamPool([UpstreamConfig(A)], transport=httpx.MockTransport(handle))
    with pytest.raises(BadGateway, match="engine died"):
        run(post_and_read(pool))


def test_the_least_busy_healthy_upstream_is_picked():
    pool, _ = pool_with([])
    run(pool.check_all())
    first, second = pool.upstreams
    first.outstanding = 3
    assert {pool.pick("m", set()) for _ in range(4)} == {second}
    second.outstanding = 5
    assert pool.pick("m", set()) is first
    first.ejected = True
    assert pool.pick("m", set()) is second  # busier, but healthy
    assert pool.pick("m", {second}) is first  # an ejected one still beats none
    assert pool.pick("other", set()) is None
    assert pool.models()["m"].context_length == 4096


def test_upstream_specs(monkeypatch):
    monkeypatch.setenv("UP_KEY", "sk-up")
    config = parse_upstream("https://user:pw@h.test:8443/v1/,mode=raw,api_key_env=UP_KEY,model=a,model=b", "default")
    assert (config.url, config.mode, config.api_key, config.models) == (
        "https://user:pw@h.test:8443/v1", "raw", "sk-up", ("a", "b"))
    assert config.display_url == "https://h.test:8443/v1" and "sk-up" not in repr(config)
    assert parse_upstream("http://h.test/v1", "default").api_key == "default"
    for bad in ("h.test/v1", "http://h.test/v1,mode=fast", "http://h.test/v1,api_key_env=NOT_SET_ANYWHERE"):
        with pytest.raises(ValueError):
            parse_upstream(bad)
    assert json.dumps(parse_upstream("http://h.test/v1").models) == "[]"
