"""The llama.cpp engine's loopback HTTP client (rostra/engines/llamacpp_http.py) against a real socket server that
answers as llama.cpp's server does: chunked or `Connection: close` bodies, error statuses, a connection cut."""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest

from rostra.engines.llamacpp_http import LoopbackClient, LoopbackError


def chunked(body: bytes, pieces: int = 3) -> bytes:
    size = max(1, len(body) // pieces)
    parts = [body[i:i + size] for i in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in parts) + b"0\r\n\r\n"


# What the server writes for each path: the bytes in order, each written on its own (the client sees them split).
REPLIES: dict[str, list[bytes]] = {
    "/tokenize": [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", chunked(b'{"tokens": [1, 2, 3]}')],
    "/health": [b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n", b'{"status":', b' "ok"}'],
    "/broken": [b"HTTP/1.1 500 Internal Server Error\r\nTransfer-Encoding: chunked\r\n\r\n",
                chunked(b'{"error": {"message": "boom"}}')],
    "/short": [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", b"40\r\n{\"tokens\": ["],  # then: closed
    "/cut": [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", b"40\r\n{\"tokens\": ["],  # then: reset
}


async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    path = head.split(b" ", 2)[1].decode()
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length")), 0)
    await reader.readexactly(length)
    for piece in REPLIES[path]:
        writer.write(piece)
        await writer.drain()
        await asyncio.sleep(0.01)
    if path == "/cut":  # a reset (SO_LINGER 0), not a clean end
        writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()
        return
    writer.close()


async def with_server(body):
    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        return await body(LoopbackClient(f"http://127.0.0.1:{port}", "key"))
    finally:
        server.close()
        await server.wait_closed()


def test_json_replies_chunked_and_to_the_connections_end():
    async def body(client: LoopbackClient):
        return await client.post("/tokenize", {"content": "hi"}), await client.get("/health")

    assert asyncio.run(with_server(body)) == ({"tokens": [1, 2, 3]}, {"status": "ok"})


def test_an_error_status_is_raised_with_the_whole_body():
    async def body(client: LoopbackClient):
        with pytest.raises(LoopbackError, match=r"/broken failed: 500 .*boom"):
            await client.post("/broken", {})

    asyncio.run(with_server(body))


def test_a_connection_cut_mid_reply_is_a_loopback_error():
    async def body(client: LoopbackClient):
        # "connection lost", or "failed: None" where the reset came before the client read the status line
        with pytest.raises(LoopbackError):
            await client.post("/cut", {})
        with pytest.raises(LoopbackError):
            await client.get("/cut")

    asyncio.run(with_server(body))


def test_a_chunked_reply_closed_before_its_last_chunk_is_a_loopback_error():
    async def body(client: LoopbackClient):
        with pytest.raises(LoopbackError, match="connection lost: the reply ended before its last chunk"):
            await client.post("/short", {})

    asyncio.run(with_server(body))
