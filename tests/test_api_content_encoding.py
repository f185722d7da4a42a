"""Compressed request bodies (Content-Encoding: gzip, deflate, zstd), as Codex and pi send them, on every route;
the body limit counts decoded bytes, so a decompression bomb is a 413 and never a memory blow-up."""

import gzip
import json
import time
import zlib

import httpx
import pytest
import zstandard

from servers import DATA, RunningServer
from wire import check_error

MODEL = "scripted"
LIMIT = 100_000

ENCODERS = {
    "gzip": gzip.compress,
    "deflate": zlib.compress,  # HTTP's "deflate" is the zlib format (RFC 9110)
    "zstd": lambda data: zstandard.ZstdCompressor().compress(data),
}

ROUTES = {
    "/v1/chat/completions": ({"model": MODEL, "messages": [{"role": "user", "content": "say hello"}]},
                             lambda body: body["choices"][0]["message"]["content"]),
    "/v1/responses": ({"model": MODEL, "input": "say hello", "store": False},
                      lambda body: body["output"][-1]["content"][0]["text"]),
}


@pytest.fixture(scope="module")
def server():
    server = RunningServer(["--engine", "scripted", "--script", str(DATA / "script.jsonl"),
                            "--max-body-bytes", str(LIMIT)])
    yield server
    server.stop()


def send(server, path: str, content: bytes, encoding: str) -> httpx.Response:
    return httpx.post(f"{server.base_url}{path}", content=content, timeout=30,
                      headers={"content-type": "application/json", "content-encoding": encoding})


@pytest.mark.parametrize("encoding", sorted(ENCODERS))
@pytest.mark.parametrize("path", sorted(ROUTES))
def test_compressed_bodies_are_decoded(server, path, encoding):
    body, answer = ROUTES[path]
    reply = send(server, path, ENCODERS[encoding](json.dumps(body).encode()), encoding)
    assert reply.status_code == 200, reply.text
    assert answer(reply.json()) == "Hello! How can I help you today?"


@pytest.mark.parametrize("encoding", sorted(ENCODERS))
def test_the_limit_counts_decoded_bytes(server, encoding):
    """Small on the wire, over the limit once decoded: 413."""
    body = {"model": MODEL, "messages": [{"role": "user", "content": "x" * (2 * LIMIT)}]}
    compressed = ENCODERS[encoding](json.dumps(body).encode())
    assert len(compressed) < LIMIT
    check_error(send(server, "/v1/chat/completions", compressed, encoding), 413)


@pytest.mark.parametrize("encoding", ["gzip", "zstd"])
def test_a_decompression_bomb_is_413_at_once(server, encoding):
    """Zeros, 1 GB in zstd (32 KB on the wire), 90 MB in gzip (deflate expands 1000-fold at most, and the body on
    the wire must stay under the limit): refused as soon as the limit is passed, and the server serves on."""
    if encoding == "gzip":
        compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
        zeros = bytes(1 << 20)
        bomb = b"".join(compressor.compress(zeros) for _ in range(90)) + compressor.flush()
    else:
        bomb = zstandard.ZstdCompressor(level=1).compress(bytes(1 << 30))
    assert len(bomb) < LIMIT
    started = time.monotonic()
    check_error(send(server, "/v1/responses", bomb, encoding), 413)
    assert time.monotonic() - started < 5
    body, answer = ROUTES["/v1/chat/completions"]
    assert answer(httpx.post(f"{server.base_url}/v1/chat/completions", json=body, timeout=30).json()) \
        == "Hello! How can I help you today?"


@pytest.mark.parametrize("encoding", sorted(ENCODERS))
def test_a_body_not_in_its_declared_encoding_is_400(server, encoding):
    body, _ = ROUTES["/v1/chat/completions"]
    check_error(send(server, "/v1/chat/completions", json.dumps(body).encode(), encoding), 400)


def test_a_truncated_body_is_400(server):
    body, _ = ROUTES["/v1/chat/completions"]
    check_error(send(server, "/v1/chat/completions", gzip.compress(json.dumps(body).encode())[:-12], "gzip"), 400)


def test_an_unknown_encoding_is_415(server):
    body, _ = ROUTES["/v1/chat/completions"]
    check_error(send(server, "/v1/chat/completions", json.dumps(body).encode(), "br"), 415)


def test_identity_is_no_encoding(server):
    body, answer = ROUTES["/v1/chat/completions"]
    reply = send(server, "/v1/chat/completions", json.dumps(body).encode(), "identity")
    assert answer(reply.json()) == "Hello! How can I help you today?"
