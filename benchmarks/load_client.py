"""A lean HTTP/1.1 keep-alive load client for the gateway benchmark.

httpx costs a few hundred microseconds of Python per request, ten times what the fast upstream
takes, so it would cap the direct upstream's rate and add to every latency. This client
writes a prebuilt request and parses only the framing of the answer (Content-Length or
chunked), on a raw asyncio protocol (uvloop when installed). The time of a request is taken
in the protocol callback that sees its last byte, so event-loop wake-ups are not counted.

Used by bench_gateway.py: `latencies` at concurrency 1 in the benchmark's own process,
`sustained` in worker processes (one client process cannot keep up with the direct upstream).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    request: bytes  # a complete HTTP request, head and body
    expect: tuple[bytes, ...]  # pieces every 200 answer's body must contain


def build_request(host: str, port: int, path: str, body: bytes, api_key: str) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {api_key}\r\nAccept: */*\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body


class ClientProtocol(asyncio.Protocol):
    """One connection, one request at a time: `send` returns (seconds, status, body)."""

    def __init__(self):
        self.transport = None
        self.closed = asyncio.get_running_loop().create_future()
        self.waiter: asyncio.Future | None = None
        self._reset()

    def _reset(self):
        self.buffer = b""
        self.head: dict | None = None
        self.position = 0  # where the unparsed body starts (chunked) in self.buffer
        self.parts: list[bytes] = []

    def connection_made(self, transport):
        self.transport = transport

    def connection_lost(self, exc):
        if not self.closed.done():
            self.closed.set_result(None)
        if self.waiter and not self.waiter.done():
            self.waiter.set_exception(ConnectionError("the server closed the connection"))

    def send(self, request: bytes) -> asyncio.Future:
        self._reset()
        self.waiter = asyncio.get_running_loop().create_future()
        self.sent = time.perf_counter()
        self.transport.write(request)
        return self.waiter

    def data_received(self, data: bytes):
        self.buffer += data
        if self.head is None:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            lines = self.buffer[:end].decode("latin-1").split("\r\n")
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip().lower()
            self.head = {"status": int(lines[0].split(" ", 2)[1]), "headers": headers}
            self.buffer = self.buffer[end + 4:]
        headers = self.head["headers"]
        if "chunked" in headers.get("transfer-encoding", ""):
            if not self._dechunk():
                return
            body = b"".join(self.parts)
        else:
            length = int(headers.get("content-length", "0"))
            if len(self.buffer) < length:
                return
            body = self.buffer[:length]
        seconds = time.perf_counter() - self.sent
        if headers.get("connection") == "close":
            self.transport.close()
        if self.waiter and not self.waiter.done():
            self.waiter.set_result((seconds, self.head["status"], body))

    def _dechunk(self) -> bool:
        """Consume whole chunks from the buffer; True once the last (empty) chunk is in."""
        buffer, position = self.buffer, self.position
        while True:
            line_end = buffer.find(b"\r\n", position)
            if line_end < 0:
                break
            size = int(buffer[position:line_end].split(b";")[0], 16)
            if size == 0:
                if buffer.find(b"\r\n", line_end + 2) >= 0:  # the blank line after the last chunk
                    return True
                break
            if len(buffer) < line_end + 2 + size + 2:
                break
            self.parts.append(buffer[line_end + 2:line_end + 2 + size])
            position = line_end + 2 + size + 2
        self.position = position
        return False


class Connection:
    """A kept-alive connection that reconnects when the server closes it."""

    def __init__(self, target: Target):
        self.target = target
        self.protocol: ClientProtocol | None = None

    async def request(self) -> tuple[float, bool]:
        """(seconds, answer ok) for one request."""
        if self.protocol is None or self.protocol.closed.done():
            loop = asyncio.get_running_loop()
            _, self.protocol = await loop.create_connection(ClientProtocol, self.target.host, self.target.port)
        try:
            seconds, status, body = await self.protocol.send(self.target.request)
        except ConnectionError:
            self.protocol = None
            return 0.0, False
        return seconds, status == 200 and all(piece in body for piece in self.target.expect)

    def close(self):
        if self.protocol and self.protocol.transport:
            self.protocol.transport.close()


async def latencies(target: Target, requests: int) -> tuple[list[float], int]:
    """`requests` requests one after another on one connection: (seconds of each ok one, failures)."""
    connection = Connection(target)
    times, failures = [], 0
    try:
        for _ in range(requests):
            seconds, ok = await connection.request()
            if ok:
                times.append(seconds)
            else:
                failures += 1
    finally:
        connection.close()
    return times, failures


@dataclass
class Load:
    done: int = 0  # answers completed inside the measured window
    failures: int = 0
    times: list[float] = field(default_factory=list)


async def sustained(target: Target, connections: int, start_at: float, seconds: float) -> Load:
    """`connections` connections, each sending its next request as soon as the last is answered,
    from `start_at` (time.monotonic, the same clock in every process) for `seconds`."""
    load = Load()
    stop_at = start_at + seconds
    pool = [Connection(target) for _ in range(connections)]

    async def loop(connection: Connection):
        await connection.request()  # connect (and warm) before the window opens
        await asyncio.sleep(max(0.0, start_at - time.monotonic()))
        while time.monotonic() < stop_at:
            elapsed, ok = await connection.request()
            if time.monotonic() > stop_at:
                break  # finished after the window: not counted
            if ok:
                load.done += 1
                load.times.append(elapsed)
            else:
                load.failures += 1

    try:
        await asyncio.gather(*(loop(connection) for connection in pool))
    finally:
        for connection in pool:
            connection.close()
    return load


def new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
        return uvloop.new_event_loop()
    except ImportError:
        return asyncio.new_event_loop()


def run(coroutine):
    """asyncio.run on uvloop where available."""
    with asyncio.Runner(loop_factory=new_loop) as runner:
        return runner.run(coroutine)


def sustained_in_process(target: Target, connections: int, start_at: float, seconds: float) -> Load:
    """Entry point for a worker process of bench_gateway.py."""
    return run(sustained(target, connections, start_at, seconds))
