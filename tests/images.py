"""Test images, made with Pillow in memory (no file outside the checkout), and a local HTTP server that records
every request it gets (the SSRF tests: it must see none)."""

from __future__ import annotations

import base64
import io
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from PIL import Image


def pattern(width: int = 24, height: int = 16) -> Image.Image:
    """An RGB image whose every pixel differs from its neighbours (so orientation and scaling show)."""
    image = Image.new("RGB", (width, height))
    image.putdata([((x * 10) % 256, (y * 15) % 256, (x * y) % 256) for y in range(height) for x in range(width)])
    return image


def encoded(image: Image.Image, fmt: str, **options) -> bytes:
    out = io.BytesIO()
    image.save(out, format=fmt, **options)
    return out.getvalue()


def data_url(data: bytes, media_type: str = "image/png") -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def png_data_url(width: int = 24, height: int = 16) -> str:
    return data_url(encoded(pattern(width, height), "PNG"))


def pixels(png: bytes) -> tuple[tuple[int, int], bytes]:
    with Image.open(io.BytesIO(png)) as image:
        return image.size, image.convert("RGB").tobytes()


@dataclass
class Route:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    sized: bool = True  # False: no Content-Length (the body ends when the connection closes)


class RecordingServer:
    """An HTTP server on 127.0.0.1 (or another loopback address: `address`, and `port` to share another's) that
    answers from `routes` (path -> Route) and records every path asked."""

    def __init__(self, routes: dict[str, Route] | None = None, address: str = "127.0.0.1", port: int = 0):
        self.routes = routes or {}
        self.hits: list[str] = []
        self.stopping = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                server.hits.append(self.path)
                route = server.routes.get(self.path, Route(404, b"not found"))
                if route.delay:
                    server.stopping.wait(route.delay)
                self.send_response(route.status)
                for name, value in route.headers.items():
                    self.send_header(name, value)
                if route.sized:
                    self.send_header("Content-Length", str(len(route.body)))
                self.end_headers()
                self.wfile.write(route.body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer((address, port), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str = "/", host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def close(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()


Factory = Callable[..., RecordingServer]
