"""The gateway's retry, ejection and balancing policy, against scripted upstreams on loopback: raw
asyncio servers that answer each POST as told (a status, a dropped connection, an SSE body), which a
real model server cannot be made to do on cue."""

import asyncio
import json

import pytest

from rostra.engines.remote.pool import UpstreamPool
from rostra.engines.remote.upstream import UpstreamConfig, parse_upstream
from rostra.errors import BadGateway, ServiceUnavailable, UpstreamRejected

MODELS = {"object": "list", "data": [{"id": "m", "object": "model", "created": 0, "owned_by": "x",
                                      "max_model_len": 4096}]}
SSE = b'data: {"choices": [{"index": 0, "text": "hi", "finish_reason": "stop"}]}\n\ndata: [DONE]\n\n'
DROP = "drop"  # an answer: the upstream closes the connection without answering (a connection failure)
HANG = "hang"  # an answer: the upstream keeps the connection open and never answers


class ScriptedUpstreams:
    """Upstreams on loopback that answer POSTs from one script, in turn, whichever gets them: a status
    code, DROP, or raw bytes of an SSE body. GET /models lists model "m"."""

    def __init__(self, answers: list, count: int = 2):
        self.answers = answers
        self.count = count
        self.calls: list[str] = []  # the base URL of the upstream each POST went to
        self.urls: list[str] = []
        self._servers: list[asyncio.Server] = []

    async def __aenter__(self) -> "ScriptedUpstreams":
        for _ in range(self.count):
            server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
            self._servers.append(server)
            self.urls.append(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1")
        return self

    async def __aexit__(self, *exc) -> None:
        for server in self._servers:
            server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        base = f"http://127.0.0.1:{writer.get_extra_info('sockname')[1]}/v1"
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                method = head.split(b" ", 1)[0]
                length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                await reader.readexactly(length)
                if method == b"GET":
                    writer.write(answer(200, json.dumps(MODELS).encode(), "application/json"))
                    continue
                self.calls.append(base)
                reply = self.answers.pop(0)
                if reply == DROP:
                    break
                if reply == HANG:
                    await asyncio.sleep(3600)
                if reply == 200:
                    writer.write(answer(200, SSE, "text/event-stream"))
                elif isinstance(reply, bytes):
                    writer.write(answer(200, reply, "text/event-stream"))
                else:
                    body = {"error": {"message": f"status {reply}", "type": "invalid_request_error",
                                      "param": "max_tokens", "code": "too_big"}}
                    writer.write(answer(reply, json.dumps(body).encode(), "application/json", "Retry-After: 0\r\n"))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def answer(status: int, body: bytes, content_type: str, extra: str = "") -> bytes:
    return (f"HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
            .encode() + body)


def pool_for(upstreams: ScriptedUpstreams, eject_after: int = 2) -> UpstreamPool:
    return UpstreamPool([UpstreamConfig(url) for url in upstreams.urls], backoff=0.001, eject_after=eject_after)


async def post_and_read(pool: UpstreamPool) -> list[dict]:
    await pool.check_all()
    try:
        response = await pool.post("m", "/completions", {"model": "m"})
        try:
            return [chunk async for chunk in response.events()]
        finally:
            await response.aclose()
    finally:
        await pool.close()


async def test_a_5xx_is_retried_on_another_upstream_and_counts_against_the_first():
    async with ScriptedUpstreams([500, 200]) as upstreams:
        pool = pool_for(upstreams, eject_after=1)
        chunks = await post_and_read(pool)
    calls = upstreams.calls
    assert chunks[0]["choices"][0]["text"] == "hi"
    assert len(calls) == 2 and calls[0] != calls[1]
    failed, served = (next(u for u in pool.upstreams if u.url == url) for url in calls)
    assert failed.ejected and failed.failures == 1 and not served.ejected
    assert failed.outstanding == served.outstanding == 0


async def test_connection_errors_and_429_are_retried():
    async with ScriptedUpstreams([DROP, 429, 200], count=1) as upstreams:
        await post_and_read(pool_for(upstreams))
    assert upstreams.calls == upstreams.urls * 3


async def test_no_pause_after_the_last_attempt(monkeypatch):
    """A 429 on the last attempt is relayed at once: waiting out its Retry-After would only delay the error."""
    pauses: list[float] = []
    sleep = asyncio.sleep

    async def record(seconds):
        pauses.append(seconds)
        await sleep(0)

    async with ScriptedUpstreams([429, 429, 429], count=1) as upstreams:
        monkeypatch.setattr("rostra.engines.remote.pool.asyncio.sleep", record)
        with pytest.raises(UpstreamRejected):
            await post_and_read(pool_for(upstreams))
    assert len(upstreams.calls) == 3
    retry_after_pauses = [p for p in pauses if p == 0]  # the answers say Retry-After: 0
    assert len(retry_after_pauses) == 2  # after the first and the second attempt, not after the third


async def test_a_4xx_is_relayed_at_once_never_retried():
    async with ScriptedUpstreams([400, 200]) as upstreams:
        pool = pool_for(upstreams)
        with pytest.raises(UpstreamRejected) as raised:
            await post_and_read(pool)
    assert len(upstreams.calls) == 1
    error = raised.value
    assert (error.status_code, error.param, error.code, error.message) == (400, "max_tokens", "too_big", "status 400")
    assert all(upstream.outstanding == 0 and not upstream.ejected for upstream in pool.upstreams)


async def test_the_upstreams_own_credentials_failing_is_a_502():
    async with ScriptedUpstreams([401], count=1) as upstreams:
        with pytest.raises(BadGateway, match="credentials"):
            await post_and_read(pool_for(upstreams))


async def test_when_every_attempt_fails_the_last_error_is_raised():
    async with ScriptedUpstreams([DROP] * 3, count=1) as upstreams:
        with pytest.raises(ServiceUnavailable):
            await post_and_read(pool_for(upstreams))
    assert len(upstreams.calls) == 3  # one try and two retries
    async with ScriptedUpstreams([503] * 3, count=1) as upstreams:
        with pytest.raises(BadGateway, match="status 503"):
            await post_and_read(pool_for(upstreams))


async def test_an_unreachable_upstream_is_a_503_and_ejected():
    async with ScriptedUpstreams([], count=1) as upstreams:
        pass  # closed: connections to it are refused
    pool = pool_for(upstreams)
    with pytest.raises(ServiceUnavailable):
        await post_and_read(pool)
    assert pool.upstreams[0].ejected


async def test_an_in_band_error_in_the_stream_is_raised():
    async with ScriptedUpstreams([b'data: {"error": {"message": "engine died"}}\n\n'], count=1) as upstreams:
        with pytest.raises(BadGateway, match="engine died"):
            await post_and_read(pool_for(upstreams))


async def test_stream_lines_split_across_reads_and_longer_than_a_read_buffer():
    """Events are cut wherever the network cuts them; one line can be larger than any read buffer;
    \\r\\n line ends and a last line without its newline are read too."""
    text = "x" * 600_000
    body = (b"data: " + json.dumps({"choices": [{"index": 0, "text": text}]}).encode() + b"\r\n\r\n"
            + b": a comment\n\ndata: " + json.dumps({"choices": [{"index": 0, "text": "end"}]}).encode())
    async with ScriptedUpstreams([body], count=1) as upstreams:
        chunks = await post_and_read(pool_for(upstreams))
    assert [chunk["choices"][0]["text"] for chunk in chunks] == [text, "end"]


async def test_the_least_busy_healthy_upstream_is_picked():
    async with ScriptedUpstreams([]) as upstreams:
        pool = pool_for(upstreams)
        await pool.check_all()
        await pool.close()
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


async def test_cancelled_requests_leave_the_in_flight_count_exact():
    """Issue 21: four requests cancelled while their upstream had not answered left `outstanding` at 4, and
    least-outstanding routing shunned that upstream for good. Cancelled before or after the answer, it is 0."""
    async with ScriptedUpstreams([HANG] * 4 + [200] * 2, count=1) as upstreams:
        pool = pool_for(upstreams)
        await pool.check_all()
        try:
            upstream = pool.upstreams[0]
            waiting = [asyncio.create_task(pool.post("m", "/completions", {"model": "m"})) for _ in range(4)]
            while len(upstreams.calls) < 4:  # every request has reached the upstream, which does not answer
                await asyncio.sleep(0.01)
            assert upstream.outstanding == 4
            for task in waiting:
                task.cancel()
            await asyncio.gather(*waiting, return_exceptions=True)
            assert upstream.outstanding == 0
            answered = await pool.post("m", "/completions", {"model": "m"})
            assert upstream.outstanding == 1  # an answer handed over counts until it is closed...
            await answered.aclose()
            await answered.aclose()  # ...once
            assert upstream.outstanding == 0
        finally:
            await pool.close()
