"""The app in-process: the scripted engine and a real SQLite store behind the ASGI interface, no sockets.

Serving-layer tests run in milliseconds here. `InProcessServer.client` is an httpx client over
`ASGITransport` (whole answers); `call()` drives the ASGI app by hand, so a test can read a stream as it
comes and hang up (`http.disconnect`) whenever it likes. End-to-end tests keep using real `rostra serve`
processes (servers.py).

`served(...)` is the same app for tests written against a sync client (an SDK's sync client, httpx.post):
starlette's TestClient, an httpx.Client that runs the app (and its lifespan) on an event loop of its own.
Answers come whole, streams included: a test that hangs up mid-stream uses `call()`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from starlette.testclient import TestClient

from rostra.config import Settings
from rostra.embedded import embedded_model_path
from rostra.engines import load_engine
from rostra.engines.registry import build_engine
from rostra.server.app import create_app
from rostra.models.specs import command_line_specs
from rostra.store import open_store

MODEL = "scripted"
BASE_URL = "http://rostra"


def write_script(directory: Path, lines: list[dict]) -> Path:
    path = directory / "script.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def read_script(path: Path) -> list[dict]:
    """A script file of tests/data as lines for InProcessServer."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@contextmanager
def served(directory: Path, script: list[dict], **settings) -> Iterator[TestClient]:
    """`with served(tmp_path, lines, api_keys=[KEY]) as http: http.post("/v1/messages", ...)`; an SDK's sync
    client takes it as its `http_client` (base URL `BASE_URL`)."""
    directory.mkdir(parents=True, exist_ok=True)
    with TestClient(InProcessServer(directory, script, **settings).app, base_url=BASE_URL) as client:
        yield client


class InProcessServer:
    """`async with InProcessServer(tmp_path, script_lines, max_concurrency=1) as server: ...`"""

    def __init__(self, directory: Path, script: list[dict], **settings):
        """Another engine than the scripted one, built as `rostra serve` builds it: `engine="transformers",
        model=PATH`, or `upstreams=[URL]` (a gateway, the remote engine, in front of them); or many models
        (`models_config=PATH`, `models_dir=PATH`)."""
        self.store = open_store(directory / "data", settings.get("store"))  # a PostgreSQL URL, or SQLite here
        self._stack = AsyncExitStack()
        if Settings(**settings).many_models:  # `models_config=` / `models_dir=`: the models they declare
            self.engine = None
            self.app = create_app(None, Settings(**settings), self.store, command_line_specs(Settings(**settings)))
            return
        settings = {"engine": "remote" if settings.get("upstreams") else "scripted", **settings}
        if settings["engine"] == "scripted":
            self.engine = load_engine("scripted", script_path=str(write_script(directory, script)),
                                      tokenizer_path=settings.get("tokenizer") or embedded_model_path(), model_name=MODEL,
                                      max_model_len=4096)
        else:
            self.engine = build_engine(Settings(**settings))
        self.app = create_app(self.engine, Settings(**settings), self.store)

    async def __aenter__(self) -> "InProcessServer":
        await self._stack.enter_async_context(self.app.router.lifespan_context(self.app))
        self.client = await self._stack.enter_async_context(
            httpx.AsyncClient(transport=httpx.ASGITransport(app=self.app), base_url="http://rostra", timeout=30))
        return self

    async def __aexit__(self, *exc) -> None:
        await self._stack.aclose()

    def call(self, method: str, path: str, body: dict | None = None, key: str | None = None) -> "Exchange":
        """Start one request (with `key` as its Bearer key); the returned Exchange shows what the app sends, as it
        sends it."""
        return Exchange(self.app, method, path, body, key=key)


@dataclass
class Exchange:
    """One request driven by hand at the ASGI level."""

    app: object
    method: str
    path: str
    body: dict | None
    status: int | None = None
    chunks: list[bytes] = field(default_factory=list)
    _hang_up: asyncio.Event = field(default_factory=asyncio.Event)
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)
    key: str | None = None

    def __post_init__(self):
        path, _, query = self.path.partition("?")
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": self.method,
                 "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": query.encode(),
                 "headers": [(b"content-type", b"application/json"), (b"host", b"rostra"),
                             *([(b"authorization", f"Bearer {self.key}".encode())] if self.key else [])],
                 "client": ("127.0.0.1", 1), "server": ("rostra", 80), "root_path": ""}
        self.task = asyncio.create_task(self.app(scope, self._receive, self._send))

    async def _receive(self) -> dict:
        if self.body is not None:
            body, self.body = json.dumps(self.body).encode(), None
            return {"type": "http.request", "body": body, "more_body": False}
        await self._hang_up.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: dict) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        elif message.get("body"):
            self.chunks.append(message["body"])
        self._arrived.set()

    def hang_up(self) -> None:
        self._hang_up.set()

    async def wait_for(self, text: str, timeout: float = 10) -> None:
        """Until the body so far contains `text`."""
        await self.wait_until(lambda exchange: text.encode() in b"".join(exchange.chunks), timeout)

    async def wait_until(self, done: Callable[["Exchange"], bool], timeout: float = 10) -> None:
        """Until `done(self)` holds of what has arrived so far."""
        async with asyncio.timeout(timeout):
            while not done(self):
                self._arrived.clear()
                await self._arrived.wait()

    async def finished(self, timeout: float = 30) -> "Exchange":
        await asyncio.wait_for(self.task, timeout)
        return self

    def text(self) -> str:
        return b"".join(self.chunks).decode()

    def json(self) -> dict:
        return json.loads(self.text())

    def events(self) -> list[dict]:
        """The SSE data frames (Responses events or chat chunks), [DONE] left out."""
        frames = [line[len("data: "):] for line in self.text().splitlines() if line.startswith("data: ")]
        return [json.loads(frame) for frame in frames if frame != "[DONE]"]
