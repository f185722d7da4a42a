"""The upstreams behind a gateway: one pooled HTTP client, least-outstanding choice among
those that serve a model, retries with backoff, ejection of failing upstreams and health
checks that bring them back.

Retried: connection failures, 5xx and 429 (honouring a short Retry-After), each time on
another upstream when there is one. Never retried: 4xx (the request itself is wrong; the
upstream's error is relayed), and anything once the upstream's answer has started.

The client is aiohttp: its C HTTP parser and lean request path cost a fifth of httpx's CPU
per request (httpx, httpcore, anyio and h11 were half of the gateway's CPU; see "Gateway
overhead" in benchmarks/README.md and benchmarks/bench_http_clients.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import urllib.request
from typing import AsyncIterator

import aiohttp
import orjson

from rostra.core import ModelInfo
from rostra.engines.remote.upstream import Upstream, UpstreamConfig
from rostra.errors import APIError, BadGateway, ServiceUnavailable, UpstreamRejected

log = logging.getLogger("rostra.gateway")

MAX_RETRY_AFTER = 2.0  # seconds: a longer Retry-After is the client's to honour, not ours


class UpstreamResponse:
    """An upstream's answer whose status was 2xx; iterate its SSE objects, then close it."""

    def __init__(self, upstream: Upstream, response: aiohttp.ClientResponse):
        self.upstream = upstream
        self.response = response
        self._closed = False

    async def events(self) -> AsyncIterator[dict]:
        """The `data:` objects of the stream, up to [DONE]. An in-band error becomes an APIError.

        Lines are split here from whatever each read brings (every event of one network read is
        parsed without another await), not with the reader's readline, which refuses lines over its
        buffer size: one chunk of a long tool call can be bigger. SSE lines end in \\n or \\r\\n
        (what OpenAI-compatible servers send)."""
        done = False
        pending = b""
        try:
            # Read on past [DONE] to the body's end: a response read to its end returns its
            # connection to the pool, one closed early costs a new connection next time.
            async for data in self.response.content.iter_any():
                if done:
                    continue
                lines = (pending + data).split(b"\n")
                pending = lines.pop()
                for line in lines:
                    obj = self._data(line)
                    if obj is _DONE:
                        done = True
                        break
                    if obj is not None:
                        yield obj
            if not done and pending:  # a last line without its newline
                obj = self._data(pending)
                if obj is not None and obj is not _DONE:
                    yield obj
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            self.upstream.failed(f"{type(exc).__name__}: {exc}")
            raise BadGateway(f"the upstream's stream broke off: {type(exc).__name__}") from exc

    async def json(self) -> dict:
        """A plain (not streamed) answer's JSON object."""
        try:
            content = await self.response.read()
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            self.upstream.failed(f"{type(exc).__name__}: {exc}")
            raise BadGateway(f"the upstream's answer broke off: {type(exc).__name__}") from exc
        body = _json_or_none(content)
        if not isinstance(body, dict):
            raise BadGateway("the upstream's answer is not a JSON object")
        return body

    def _data(self, line: bytes):
        """One SSE line: its `data:` object, _DONE, or None (another field, a comment, a blank)."""
        if not line.startswith(b"data:"):
            return None
        payload = line[5:].strip()
        if payload == b"[DONE]":
            return _DONE
        try:
            obj = orjson.loads(payload)
        except orjson.JSONDecodeError:
            try:  # orjson refuses some of what the standard library reads (integers over 64 bits)
                obj = json.loads(payload)
            except ValueError as exc:
                raise BadGateway(f"the upstream sent malformed JSON in its stream: {exc}") from exc
        if isinstance(obj, dict) and "error" in obj and "choices" not in obj:
            raise _relayed_error(200, obj, self.upstream)
        return obj

    async def aclose(self) -> None:
        """Closing early drops the connection: the upstream sees the client gone and aborts.
        A response read to its end gives its connection back to the pool."""
        if not self._closed:
            self._closed = True
            self.upstream.outstanding -= 1
            if self.response.content.is_eof():
                self.response.release()
            else:
                self.response.close()


_DONE = object()  # the stream's `data: [DONE]`


class UpstreamPool:
    def __init__(self, configs: list[UpstreamConfig], retries: int = 2, backoff: float = 0.1,
                 eject_after: int = 2, health_interval: float = 5.0, timeout: float = 600.0,
                 connect_timeout: float = 5.0):
        self.upstreams = [Upstream(config, eject_after) for config in configs]
        self.retries = retries
        self.backoff = backoff
        self.health_interval = health_interval
        # `timeout` bounds each wait for the upstream's next bytes (a long generation streams on).
        self.timeout = aiohttp.ClientTimeout(total=None, connect=connect_timeout, sock_read=timeout)
        self._session: aiohttp.ClientSession | None = None
        self._health_task: asyncio.Task | None = None
        self._turn = 0  # rotates ties, so equal upstreams share the load

    @property
    def session(self) -> aiohttp.ClientSession:
        """The pooled client, made on first use: aiohttp binds it to the running event loop."""
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                # No limit on connections (admission control bounds the requests); idle ones kept 30 s.
                connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=30),
                timeout=self.timeout,
                # No cookies: upstreams are APIs, not browsers.
                cookie_jar=aiohttp.DummyCookieJar(),
                # HTTP(S)_PROXY / NO_PROXY are honoured as httpx did; read per request, so only when set.
                trust_env=bool(urllib.request.getproxies()))
        return self._session

    async def start(self) -> None:
        await self.check_all()
        self._health_task = asyncio.create_task(self._health_loop())

    async def close(self) -> None:
        if self._health_task:
            self._health_task.cancel()
            await asyncio.gather(self._health_task, return_exceptions=True)
        if self._session is not None:
            await self._session.close()

    # -- models and health ------------------------------------------------------------------

    def models(self) -> dict[str, ModelInfo]:
        """Every model some upstream serves (ejected ones included: they may come back)."""
        known: dict[str, ModelInfo] = {}
        for upstream in self.upstreams:
            for name, info in upstream.models.items():
                known.setdefault(name, info)
        return known

    def upstreams_for(self, model: str) -> list[Upstream]:
        return [upstream for upstream in self.upstreams if upstream.serves(model)]

    async def check_all(self) -> None:
        await asyncio.gather(*(self.check(upstream) for upstream in self.upstreams))

    async def check(self, upstream: Upstream) -> None:
        """GET /models: alive or not, and (unless declared) which models it serves."""
        try:
            async with self.session.get(f"{upstream.url}/models", headers=_auth(upstream),
                                        timeout=aiohttp.ClientTimeout(total=5.0)) as response:
                response.raise_for_status()
                listed = {entry["id"]: _model_info(entry) for entry in (await response.json(content_type=None))["data"]}
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, KeyError, TypeError) as exc:
            if not upstream.ejected:
                log.warning("upstream %s failed its health check: %s", upstream.config.display_url,
                            f"{type(exc).__name__}: {exc}")
            upstream.failed(f"health check: {type(exc).__name__}")
            upstream.ejected = True  # a failed health check ejects at once
        else:
            declared = upstream.config.models
            upstream.models = {name: listed.get(name, ModelInfo(name, 0)) for name in declared} if declared else listed
            if upstream.ejected:
                log.info("upstream %s is back", upstream.config.display_url)
            upstream.succeeded()
        upstream.checked()

    async def _health_loop(self) -> None:
        while True:
            await asyncio.sleep(self.health_interval)
            await self.check_all()

    # -- requests ---------------------------------------------------------------------------

    def pick(self, model: str, tried: set[Upstream]) -> Upstream | None:
        """The least busy healthy upstream serving `model` not tried yet; ejected ones only
        when no healthy one is left (trying beats failing outright)."""
        serving = [upstream for upstream in self.upstreams_for(model) if upstream not in tried]
        if not serving:
            return None
        if len(serving) == 1:  # the common case: nothing to choose
            return serving[0]
        healthy = [upstream for upstream in serving if not upstream.ejected] or serving
        self._turn += 1
        rotated = healthy[self._turn % len(healthy):] + healthy[:self._turn % len(healthy)]
        return min(rotated, key=lambda upstream: upstream.outstanding)

    async def post(self, model: str, path: str, body: dict) -> UpstreamResponse:
        """POST a request (streamed, or /embeddings) to an upstream serving `model`; the answer once its
        status is 2xx."""
        tried: set[Upstream] = set()
        error: APIError | None = None
        data = _encoded(body)
        for attempt in range(self.retries + 1):
            upstream = self.pick(model, tried) or self.pick(model, set())
            if upstream is None:
                break
            if attempt:
                await asyncio.sleep(self.backoff * 2 ** (attempt - 1) * (0.5 + random.random()))
            tried.add(upstream)
            # Counted from the send until the answer is handed over (its aclose() uncounts it) or given up,
            # however that happens: a cancelled request (the client left) must not count for good, or
            # least-outstanding routing shuns this upstream ever after.
            upstream.outstanding += 1
            handed_over = False
            try:
                try:
                    response = await self.session.post(f"{upstream.url}{path}", data=data,
                                                       headers=_post_headers(upstream))
                except aiohttp.SocketTimeoutError as exc:  # it may be working on it: elsewhere doubles the load
                    raise BadGateway("the upstream did not answer in time") from exc
                except (aiohttp.ClientConnectionError, asyncio.TimeoutError) as exc:
                    upstream.failed(f"{type(exc).__name__}: {exc}")
                    log.warning("upstream %s: %s (attempt %d)", upstream.config.display_url, type(exc).__name__,
                                attempt + 1)
                    error = ServiceUnavailable(f"the upstream for '{model}' could not be reached")
                    continue
                if response.status < 400:
                    upstream.succeeded()
                    handed_over = True
                    return UpstreamResponse(upstream, response)
                try:
                    content = await response.read()
                except (aiohttp.ClientError, asyncio.TimeoutError):
                    content = b""
                finally:
                    response.release()
            finally:
                if not handed_over:
                    upstream.outstanding -= 1
            error = _relayed_error(response.status, _json_or_none(content), upstream)
            if response.status == 429:
                if attempt < self.retries:  # after the last attempt the error is relayed at once
                    await asyncio.sleep(min(_retry_after(response), MAX_RETRY_AFTER))
            elif response.status >= 500:
                upstream.failed(f"HTTP {response.status}")
            else:
                raise error
        raise error or ServiceUnavailable(f"no upstream serves the model '{model}' right now")


def _encoded(body: dict) -> bytes:
    try:
        return orjson.dumps(body)
    except TypeError:  # what orjson refuses (integers over 64 bits), the standard library writes
        return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def _post_headers(upstream: Upstream) -> dict[str, str]:
    return {"Content-Type": "application/json", **_auth(upstream)}


def _auth(upstream: Upstream) -> dict[str, str]:
    return {"Authorization": f"Bearer {upstream.config.api_key}"} if upstream.config.api_key else {}


def _model_info(entry: dict) -> ModelInfo:
    # vLLM and rostra say max_model_len; others say nothing (0: unknown). rostra (and OpenRouter) list
    # input_modalities; a card without them is taken as text only.
    modalities = entry.get("input_modalities")
    return ModelInfo(entry["id"], int(entry.get("max_model_len") or 0), str(entry.get("owned_by") or "upstream"),
                     sees_images=isinstance(modalities, list) and "image" in modalities)


def _json_or_none(content: bytes):
    try:
        return json.loads(content)
    except ValueError:
        return None


def _retry_after(response: aiohttp.ClientResponse) -> float:
    try:
        return float(response.headers.get("retry-after", "0.5"))
    except ValueError:
        return 0.5


def _relayed_error(status: int, body, upstream: Upstream) -> APIError:
    """The upstream's error in OpenAI's envelope. Its 4xx are the client's to see (status and
    fields kept); 401/403 mean the gateway's own credentials are wrong, and 5xx are the
    upstream's failure: both are a 502 to the client."""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, str):
        error = {"message": error}
    if not isinstance(error, dict):
        error = {"message": str(body)[:500] if body is not None else f"HTTP {status}"}
    message = str(error.get("message") or f"HTTP {status}")
    if status in (401, 403):
        return BadGateway(f"the upstream {upstream.config.display_url} refused rostra's credentials (HTTP {status})")
    if 400 <= status < 500:
        param, code = error.get("param"), error.get("code")
        return UpstreamRejected(status, message, error.get("type"), str(param) if param is not None else None,
                                str(code) if code is not None else None)
    return BadGateway(f"the upstream failed: {message}")
