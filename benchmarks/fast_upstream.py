"""A deliberately fast OpenAI-compatible upstream for the gateway benchmark.

It answers every chat completion at once with the same short text, so that what a benchmark
measures in front of it is the gateway's own cost, not generation. Raw asyncio (uvloop when
installed) and a hand-written HTTP/1.1 parser with keep-alive: no ASGI framework, whose
per-request cost would be of the same order as the gateways' and blur the comparison.

    python benchmarks/fast_upstream.py --port 8001

Serves GET /v1/models, GET /health and POST /v1/chat/completions (stream or not; a usage chunk
when `stream_options.include_usage`). Every answer is valid for the OpenAI SDK.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json

MODEL = "fast-model"
PIECES = ("The ", "quick ", "brown ", "fox ", "jumps.")  # the completion, one SSE chunk per piece
TEXT = "".join(PIECES)
USAGE = {"prompt_tokens": 12, "completion_tokens": len(PIECES), "total_tokens": 12 + len(PIECES)}
ID_HOLE = b"chatcmpl-000000000000"  # replaced by a numbered id of the same length per answer
MODELS_BODY = json.dumps({"object": "list", "data": [
    {"id": MODEL, "object": "model", "created": 0, "owned_by": "bench"}]}).encode()


def response_head(status: str, content_type: bytes, length: int | None) -> bytes:
    framing = b"Content-Length: %d" % length if length is not None else b"Transfer-Encoding: chunked"
    return (b"HTTP/1.1 " + status.encode() + b"\r\nContent-Type: " + content_type + b"\r\n" + framing
            + b"\r\nConnection: keep-alive\r\n\r\n")


def completion_body(model: str) -> bytes:
    return json.dumps({
        "id": ID_HOLE.decode(), "object": "chat.completion", "created": 1700000000, "model": model,
        "system_fingerprint": "fp_bench",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": TEXT, "refusal": None},
                     "logprobs": None, "finish_reason": "stop"}],
        "usage": USAGE}, separators=(",", ":")).encode()


def stream_body(model: str, include_usage: bool) -> bytes:
    """The whole SSE stream, HTTP-chunked one event per chunk, ready to write in one go."""
    def chunk(choices: list, usage_field: bool = True, usage=None) -> dict:
        event = {"id": ID_HOLE.decode(), "object": "chat.completion.chunk", "created": 1700000000,
                 "model": model, "system_fingerprint": "fp_bench", "choices": choices}
        if include_usage and usage_field:
            event["usage"] = usage  # OpenAI sends usage: null on every chunk but the last when asked
        return event

    def choice(delta: dict, finish=None) -> dict:
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}

    events = [chunk([choice({"role": "assistant", "content": "", "refusal": None})])]
    events += [chunk([choice({"content": piece})]) for piece in PIECES]
    events.append(chunk([choice({}, "stop")]))
    if include_usage:
        events.append(chunk([], usage=USAGE))
    frames = [b"data: " + json.dumps(e, separators=(",", ":")).encode() + b"\n\n" for e in events]
    frames.append(b"data: [DONE]\n\n")
    return b"".join(b"%x\r\n%s\r\n" % (len(f), f) for f in frames) + b"0\r\n\r\n"


class Answers:
    """Complete responses (head + body) built once per (model, stream, usage) and reused:
    per request only the id is stamped in."""

    def __init__(self):
        self.cache: dict[tuple[str, bool, bool], bytes] = {}
        self.counter = itertools.count(1)

    def chat(self, model: str, stream: bool, include_usage: bool) -> bytes:
        key = (model, stream, include_usage)
        answer = self.cache.get(key)
        if answer is None:
            if stream:
                answer = response_head("200 OK", b"text/event-stream", None) + stream_body(model, include_usage)
            else:
                body = completion_body(model)
                answer = response_head("200 OK", b"application/json", len(body)) + body
            if len(self.cache) > 64:  # models are named by clients: keep the cache bounded
                self.cache.clear()
            self.cache[key] = answer
        return answer.replace(ID_HOLE, b"chatcmpl-%012d" % next(self.counter))


ANSWERS = Answers()
MODELS_ANSWER = response_head("200 OK", b"application/json", len(MODELS_BODY)) + MODELS_BODY
HEALTH_ANSWER = response_head("200 OK", b"application/json", 2) + b"{}"


def error_answer(status: str, message: str) -> bytes:
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error", "param": None,
                                 "code": None}}).encode()
    return response_head(status, b"application/json", len(body)) + body


class HTTPProtocol(asyncio.Protocol):
    """One keep-alive connection; pipelined requests are answered in order."""

    def connection_made(self, transport):
        self.transport = transport
        self.buffer = b""

    def data_received(self, data: bytes):
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].decode("latin-1")
            request_line, _, header_text = head.partition("\r\n")
            headers = {}
            for line in header_text.split("\r\n"):
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            start = end + 4
            if "chunked" in headers.get("transfer-encoding", ""):
                body, consumed = dechunk(self.buffer, start)
                if body is None:
                    return  # the rest of the body has not arrived
            else:
                length = int(headers.get("content-length", "0"))
                if len(self.buffer) - start < length:
                    return
                body, consumed = self.buffer[start:start + length], start + length
            self.buffer = self.buffer[consumed:]
            self.transport.write(answer(request_line, body))
            if headers.get("connection", "").lower() == "close":
                self.transport.close()
                return


def dechunk(buffer: bytes, position: int) -> tuple[bytes | None, int]:
    """A chunked request body starting at `position`: (body, end), or (None, 0) if incomplete."""
    parts = []
    while True:
        line_end = buffer.find(b"\r\n", position)
        if line_end < 0:
            return None, 0
        size = int(buffer[position:line_end].split(b";")[0], 16)
        position = line_end + 2
        if size == 0:
            trailer_end = buffer.find(b"\r\n", position)  # no trailers expected: just the blank line
            return (b"".join(parts), trailer_end + 2) if trailer_end >= 0 else (None, 0)
        if len(buffer) < position + size + 2:
            return None, 0
        parts.append(buffer[position:position + size])
        position += size + 2


def answer(request_line: str, body: bytes) -> bytes:
    method, path, _ = request_line.split(" ", 2)
    path = path.split("?", 1)[0]
    if method == "GET" and path in ("/v1/models", "/models"):
        return MODELS_ANSWER
    if method == "GET" and path == "/health":
        return HEALTH_ANSWER
    if method == "POST" and path in ("/v1/chat/completions", "/chat/completions"):
        try:
            request = json.loads(body)
        except ValueError:
            return error_answer("400 Bad Request", "the body is not JSON")
        options = request.get("stream_options") or {}
        return ANSWERS.chat(str(request.get("model") or MODEL), bool(request.get("stream")),
                            bool(options.get("include_usage")))
    return error_answer("404 Not Found", f"no route {method} {path}")


async def serve(host: str, port: int) -> None:
    server = await asyncio.get_running_loop().create_server(HTTPProtocol, host, port, backlog=1024)
    print(f"fast upstream listening on http://{host}:{port}/v1", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    args = parser.parse_args()
    try:
        import uvloop  # the fastest loop when available; plain asyncio otherwise
        loop_factory = uvloop.new_event_loop
    except ImportError:
        loop_factory = None
    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            runner.run(serve(args.host, args.port))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
