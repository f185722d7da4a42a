"""A minimal HTTP/1.1 client, on the event loop, for llama.cpp's own loopback server (xllamacpp's listener).

Why not xllamacpp's `handle_completions`: it blocks a thread per request and calls back into Python for
every token, in that thread, which must take the GIL; on a machine whose cores llama.cpp's compute threads
keep busy, each such wake-up (and then the event loop's) takes a core away from them. Reading the same
stream from llama.cpp's HTTP server instead, its C++ connection thread writes each token to a socket without
touching Python, and the event loop, woken by the socket, takes every token that arrived meanwhile in one
read: no thread of rostra's per request, no GIL hand-over, one Python wake-up per batch.

Why not httpx: a few hundred microseconds of Python per request, and per streamed chunk more than the
protocol below spends. One connection per request (`Connection: close`): no kept-alive connection that the
server may close just as it is reused, and closing it is how a generation is cancelled (llama.cpp stops a
request whose connection is gone at its next token).
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

import orjson

_HEAD_END = b"\r\n\r\n"


# Bytes handed to the transport at once: the body of a prompt with images is written in slices this size.
WRITE_SLICE = 1 << 20


class LoopbackError(Exception):
    """The server answered with an error status, or the connection failed."""


class _Exchange(asyncio.Protocol):
    """One request's reply: status and headers, then the body, de-chunked as it arrives."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.raw = bytearray()  # received, not yet parsed (head, chunk framing)
        self.body = bytearray()  # the body's bytes, not yet taken
        self.status: int | None = None
        self.chunked = False
        self.ended = False  # the whole body is in `body` (or the connection is gone)
        self.lost: Exception | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False  # the transport's buffer is full (flow control): writing waits for it to drain

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.raw += data
        if self.status is None:
            end = self.raw.find(_HEAD_END)
            if end < 0:
                return
            head = bytes(self.raw[:end]).decode("latin-1").split("\r\n")
            del self.raw[:end + 4]
            self.status = int(head[0].split(" ", 2)[1])
            self.chunked = any(line.lower().replace(" ", "") == "transfer-encoding:chunked" for line in head[1:])
        if self.chunked:
            self._dechunk()
        else:  # Connection: close: the body ends with the connection
            self.body += self.raw
            self.raw.clear()
        self._wake()

    def _dechunk(self) -> None:
        raw = self.raw
        while True:
            line_end = raw.find(b"\r\n")
            if line_end < 0:
                return
            size = int(bytes(raw[:line_end]).split(b";", 1)[0], 16)
            if size == 0:
                self.ended = True
                raw.clear()
                return
            start = line_end + 2
            if len(raw) < start + size + 2:
                return
            self.body += raw[start:start + size]
            del raw[:start + size + 2]

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is None and self.chunked and not self.ended:  # closed cleanly, but the body is cut short
            exc = ConnectionError("the reply ended before its last chunk")
        self.ended = True
        self.lost = exc
        self._wake()

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake()

    async def send(self, pieces: list[bytes]) -> None:
        """The request's bytes, a slice at a time, waiting while the transport's buffer is full: a body of tens
        of megabytes never goes into that buffer (a copy of it all) in one turn of the event loop."""
        assert self.transport is not None
        for piece in pieces:
            view = memoryview(piece)
            for start in range(0, len(view), WRITE_SLICE):
                self.transport.write(view[start:start + WRITE_SLICE])
                while self._paused and not self.ended:
                    await self.wait()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def wait(self) -> None:
        """Until more arrived (or the reply ended)."""
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    async def whole_body(self) -> bytes:
        """The rest of the reply, read to its end; the connection is closed however that ends."""
        try:
            while not self.ended:
                await self.wait()
        finally:
            self.close()
        return bytes(self.body)


class EventStream:
    """The SSE events of one streamed reply, taken in batches: all those complete when asked."""

    def __init__(self, exchange: _Exchange):
        self._exchange = exchange
        self.done = False  # [DONE] seen, or the reply ended

    async def next_batch(self) -> list[dict[str, Any]]:
        """The events that arrived since the last call (at least one), parsed; [] once the stream is over.
        An `error:` event comes as {"error": ...}."""
        exchange = self._exchange
        while not self.done:
            events = self._take()
            if events:
                return events
            if exchange.ended:
                self.done = True
                if exchange.body.strip():
                    raise LoopbackError(f"stream ended inside an event: {bytes(exchange.body[:200])!r}")
                break
            await exchange.wait()
        return []

    def _take(self) -> list[dict[str, Any]]:
        body = self._exchange.body
        end = body.rfind(b"\n\n")
        if end < 0:
            return []
        complete = bytes(body[:end])
        del body[:end + 2]
        events: list[dict[str, Any]] = []
        for line in complete.split(b"\n"):
            if line.startswith(b"data: "):
                data = line[6:]
                if data == b"[DONE]":
                    self.done = True
                    break
                events.append(orjson.loads(data))
            elif line.startswith(b"error: "):
                events.append({"error": orjson.loads(line[7:])})
        return events

    def close(self) -> None:
        """Closing the connection stops the generation (llama.cpp notices at its next token)."""
        self.done = True
        self._exchange.close()


class LoopbackClient:
    def __init__(self, address: str, api_key: str):
        parts = urlsplit(address)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self._head = (f"Host: {self.host}:{self.port}\r\nAuthorization: Bearer {api_key}\r\n"
                      "Content-Type: application/json\r\nConnection: close\r\n").encode()

    async def _send(self, path: str, body: dict[str, Any] | list[bytes] | None,
                    method: bytes = b"POST") -> _Exchange:
        """`body`: a JSON object, or one already encoded as pieces (written as they are, never joined: a body with
        images is tens of megabytes, llamacpp_payload.py)."""
        pieces = body if isinstance(body, list) else [orjson.dumps(body)] if body is not None else []
        loop = asyncio.get_running_loop()
        try:
            _, exchange = await loop.create_connection(_Exchange, self.host, self.port)
        except OSError as exc:
            raise LoopbackError(f"cannot reach llama.cpp's server: {exc}") from exc
        assert exchange.transport is not None
        length = sum(len(piece) for piece in pieces)
        head = (method + b" " + path.encode() + b" HTTP/1.1\r\n" + self._head + b"Content-Length: "
                + str(length).encode() + b"\r\n\r\n")
        try:
            await exchange.send([head, *pieces])
            while exchange.status is None and not exchange.ended:
                await exchange.wait()
        except BaseException:
            exchange.close()
            raise
        if exchange.status != 200:
            raise LoopbackError(f"llama.cpp {path} failed: {exchange.status} {(await exchange.whole_body())[:300]!r}")
        return exchange

    async def post(self, path: str, body: dict[str, Any]) -> Any:
        """A plain request: the JSON reply."""
        return await self._json_reply(path, await self._send(path, body))

    async def get(self, path: str) -> Any:
        """A GET request (llama.cpp's /health): the JSON reply."""
        return await self._json_reply(path, await self._send(path, None, b"GET"))

    @staticmethod
    async def _json_reply(path: str, exchange: _Exchange) -> Any:
        body = await exchange.whole_body()
        if exchange.lost is not None:
            raise LoopbackError(f"llama.cpp {path}: connection lost: {exchange.lost}")
        return orjson.loads(body)

    async def stream(self, path: str, body: dict[str, Any] | list[bytes]) -> EventStream:
        """A streamed request (`"stream": true` in `body`): its events as they come."""
        return EventStream(await self._send(path, body))
