"""Server-sent events, with client disconnects noticed at once, and kept alive while silent.

The response watches the connection while it streams: when the client goes away the
stream is cancelled and its event source closed, which aborts the engine work behind it,
even while no token is being produced (a long prompt being processed). A watchdog beside it
ends a stream whose reader takes nothing (--stream-write-timeout) and keeps a silent one alive
(--stream-keep-alive) with its API's keep-alive (KeepAlive), so that clients' idle timeouts do
not close a stream whose first token is minutes away.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, AsyncGenerator, Callable

import orjson
from starlette.requests import HTTPConnection, Request
from starlette.responses import Response

from rostra.errors import APIError, ServerError

log = logging.getLogger("rostra.sse")


def sse_data(payload: dict[str, Any] | str, named: bool = False) -> bytes:
    """One SSE frame; `named` adds the `event:` line the Responses API sends (its event type)."""
    data = payload.encode() if isinstance(payload, str) else json_bytes(payload)
    if named and isinstance(payload, dict) and "type" in payload:
        return b"event: " + str(payload["type"]).encode() + b"\ndata: " + data + b"\n\n"
    return b"data: " + data + b"\n\n"


def json_bytes(payload: dict[str, Any]) -> bytes:
    """Compact UTF-8 JSON, as `json.dumps(ensure_ascii=False, separators=(",", ":"))` writes it but for
    the spelling of some floats (`0.00001` for `1e-05`: the same number). orjson: there is one frame per
    token, and it encodes a chat chunk in ~0.9 us where the standard library takes ~9.6 us. What orjson
    refuses (integers over 64 bits) falls back to the standard library; NaN and infinities, which are not
    JSON, come out as null rather than as `NaN`. Non-streamed answers are encoded the same way
    (rostra/http/generation_endpoint.py)."""
    try:
        return orjson.dumps(payload, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()

_DONE_FRAME = sse_data("[DONE]")

KeepAlive = Callable[[dict[str, Any] | None], dict[str, Any] | None]
"""An API's keep-alive: given the last object its stream sent (None before any), the object a stream that has
been silent for --stream-keep-alive seconds sends (Chat: an empty chunk; Messages: Anthropic's ping; Responses:
OpenAI's keepalive event), or None for an SSE comment, which every SSE reader skips (a line that starts with a
colon). Each API's is the vendor's own idiom, and a real event where a client it serves times events, not bytes."""

KEEP_ALIVE_COMMENT = b": keep-alive\n\n"


def comment_keep_alive(last: dict[str, Any] | None) -> dict[str, Any] | None:
    """Completions': an SSE comment (no client of its times chunks)."""
    return None


async def _sse_frames(objects: AsyncGenerator[dict[str, Any], None],
                      responses_api: bool = False) -> AsyncGenerator[tuple[dict[str, Any], bytes], None]:
    """Objects -> SSE frames, each with its object (the Responses API and Messages name their events). An error
    after the headers went out is sent in-band, in the API's own shape. Chat/Completions' closing [DONE] is the
    response's last body message (see EventStreamResponse), not one of these frames."""
    sequence = -1  # the Responses stream's last sequence number, which an error event continues
    try:
        async for obj in objects:
            sequence = obj.get("sequence_number", sequence)
            yield obj, sse_data(obj, named=responses_api)
    except Exception as exc:  # the status line is already sent: report in-band, keep serving
        if not isinstance(exc, APIError):
            log.exception("stream failed")
            exc = ServerError(f"internal error: {type(exc).__name__}")
        error = _error_event(exc, sequence + 1) if responses_api else exc.body()
        yield error, sse_data(error, named=responses_api)


def _error_event(error: APIError, sequence_number: int) -> dict[str, Any]:
    """The Responses stream's `error` event (the Chat envelope is not one of its events)."""
    return {"type": "error", "code": error.code or error.error_type, "message": error.message,
            "param": error.param, "sequence_number": sequence_number}


class _Writer:
    """A response's one way to its client. The stream's frames and the watchdog's keep-alives take turns (the
    watchdog writes from its own task, only between frames; a frame that comes while a keep-alive is on its way
    goes after it); what the watchdog reads of the stream's timing is kept here. No lock: a frame's write is the
    hot path, one per token, and a check of `keeping` is all it pays."""

    def __init__(self, send, loop: asyncio.AbstractEventLoop):
        self._send = send
        self.loop = loop
        self.since = loop.time()  # when the last write began
        self.writing = False  # a write is under way (waiting, while the client's buffers are full)
        self.open = False  # the headers are out and the body's end is not: a keep-alive may go
        self.last: dict[str, Any] | None = None  # the last object the stream sent
        self.keeping = False  # a keep-alive is on its way
        self._kept = asyncio.Event()

    async def write(self, message: dict[str, Any]) -> None:
        while self.keeping:
            await self._kept.wait()
        self.writing, self.since = True, self.loop.time()
        await self._send(message)  # waits while the client's buffers are full (uvicorn's flow control)
        self.writing = False

    async def keep_alive(self, keep_alive: KeepAlive, named: bool) -> None:
        if not self.open or self.writing:
            return
        frame = keep_alive(self.last)
        body = KEEP_ALIVE_COMMENT if frame is None else sse_data(frame, named=named)
        self.keeping, self.writing, self.since = True, True, self.loop.time()
        self._kept.clear()
        try:
            await self._send({"type": "http.response.body", "body": body, "more_body": True})
        finally:
            self.keeping = self.writing = False
            self._kept.set()


class EventStreamResponse(Response):
    media_type = "text/event-stream"

    def __init__(self, objects: AsyncGenerator[dict[str, Any], None], responses_api: bool = False,
                 on_close: Callable[[], None] | None = None, keep_alive: KeepAlive = comment_keep_alive):
        """`on_close` runs once the response is over, whether its stream ever started or not: the
        response owns what the stream holds (an admission slot), not a generator's `finally`. `keep_alive`:
        what the stream sends when it has been silent for --stream-keep-alive seconds (see KeepAlive)."""
        self.status_code = 200
        self.on_close = on_close
        self.responses_api = responses_api
        self.keep_alive = keep_alive
        self.background = None
        # No content-length: the body is a stream.
        self.raw_headers = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache"),
                            (b"x-accel-buffering", b"no")]
        self._objects = objects

    async def __call__(self, scope, receive, send) -> None:
        frames = _sse_frames(self._objects, self.responses_api)
        writer = _Writer(send, asyncio.get_running_loop())

        async def stream() -> None:
            await writer.write({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            writer.open = True
            async for obj, frame in frames:
                writer.last = obj
                await writer.write({"type": "http.response.body", "body": frame, "more_body": True})
            writer.open = False
            # [DONE] and the end of the body in one write.
            last = b"" if self.responses_api else _DONE_FRAME
            await writer.write({"type": "http.response.body", "body": last, "more_body": False})

        async def watch_disconnect() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass

        tasks = {asyncio.create_task(stream()), asyncio.create_task(watch_disconnect())}
        timeout, every = write_timeout(scope), keep_alive_interval(scope)
        if timeout or every:  # one watchdog task for both duties, none when neither is asked for
            tasks.add(asyncio.create_task(self._watch(writer, timeout, every)))
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            try:
                await frames.aclose()
                await self._objects.aclose()
            finally:
                if self.on_close is not None:
                    self.on_close()

    async def _watch(self, writer: _Writer, timeout: float | None, every: float | None) -> None:
        """Returns (which ends the stream) once a write has waited `timeout` seconds: a reader that takes nothing
        has its generation aborted and what it pins (a slot, the buffers) released, where it would otherwise wait
        forever. Meanwhile, a keep-alive into a stream silent for `every` seconds, however long into the stream
        (the first token after a long prompt, or a pause later on: a hosted tool's call, a parser holding text
        back), so that a client's idle timeout (a socket silent for 300 s, Qwen Code's 240 s without a chunk)
        never closes a stream that is still working."""
        step = min(1.0, *(limit / 4 for limit in (timeout, every) if limit))
        while True:
            waited = writer.loop.time() - writer.since
            if writer.writing:
                if timeout and waited >= timeout:
                    log.warning("stream ended: the client read nothing for %.0f s", timeout)
                    return
            elif every and writer.open and waited >= every:
                try:
                    async with asyncio.timeout(timeout or None):
                        await writer.keep_alive(self.keep_alive, self.responses_api)
                except TimeoutError:
                    log.warning("stream ended: the client read nothing for %.0f s", timeout)
                    return
            await asyncio.sleep(step)


DEFAULT_WRITE_TIMEOUT = 60.0


def write_timeout(scope) -> float | None:
    """The server's --stream-write-timeout (None or 0: none), for every stream whoever built it."""
    context = getattr(getattr(scope.get("app"), "state", None), "rostra", None)
    settings = getattr(context, "settings", None)
    return getattr(settings, "stream_write_timeout", DEFAULT_WRITE_TIMEOUT)


DEFAULT_KEEP_ALIVE = 15.0


def keep_alive_interval(scope) -> float | None:
    """The server's --stream-keep-alive (None or 0: none), for every stream whoever built it."""
    context = getattr(getattr(scope.get("app"), "state", None), "rostra", None)
    settings = getattr(context, "settings", None)
    return getattr(settings, "stream_keep_alive", DEFAULT_KEEP_ALIVE)


async def until_disconnected(request: HTTPConnection, work):
    """Run `work` (a coroutine) unless the client goes away first: then it is cancelled
    (which aborts its generations) and None is returned. A WebSocket's transport owns its connection's
    messages (a client's next event must not be read here): it cancels the work itself when the client goes."""
    if not isinstance(request, Request):
        return await work
    job = asyncio.ensure_future(work)

    async def watch() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    watcher = asyncio.create_task(watch())
    try:
        await asyncio.wait({job, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not job.done():
            job.cancel()
        await asyncio.gather(job, watcher, return_exceptions=True)
    return None if job.cancelled() else job.result()
