"""A local stand-in for the Hugging Face Hub: the HTTP API huggingface_hub 2.x calls and rostra's downloader uses,
on a real loopback port, so `rostra serve OWNER/NAME`, `pull`, `ls`, `rm` are tested without the network.

What it speaks, as huggingface_hub's own source calls it (hf_api.py, file_download.py, utils/_http.py):
- GET /api/models/{repo}/revision/{rev}[?blobs=true]: model_info: `id`, `sha` (the commit), `siblings` with
  `rfilename`, `size`, `blobId` and, for LFS files, `lfs: {sha256, size, pointerSize}`;
- GET /api/models/{repo}/tree/{rev}: list_repo_tree: `type`, `oid`, `size`, `path`, `lfs: {oid, size, pointerSize}`;
- HEAD and GET /{repo}/resolve/{rev}/{path}: the file, with `ETag` (the SHA-256 of an LFS file), `X-Repo-Commit`,
  `X-Linked-Etag`, `X-Linked-Size`, and `Range: bytes=N-` answered with 206 and only the rest;
- errors as the Hub sends them: 404 (or 401 for a private repository without its token) with
  `X-Error-Code: RepoNotFound`, 404 `EntryNotFound` for a missing file.
Every request is recorded (method, path, Range, Authorization, bytes of body sent) for the tests to check.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit


@dataclass
class StandInRepo:
    files: dict[str, bytes]
    token: str | None = None  # private: only `Authorization: Bearer TOKEN` sees it
    corrupt: set[str] = field(default_factory=set)  # files served with one byte changed (listed hash unchanged)
    claimed_sizes: dict[str, int] = field(default_factory=dict)  # listed sizes that are not the real one

    @property
    def commit(self) -> str:
        listing = "".join(f"{path}:{hashlib.sha256(data).hexdigest()}" for path, data in sorted(self.files.items()))
        return hashlib.sha1(listing.encode()).hexdigest()

    def is_lfs(self, path: str) -> bool:
        return path.endswith(".gguf") or path.endswith(".safetensors")

    def size(self, path: str) -> int:
        return self.claimed_sizes.get(path, len(self.files[path]))

    def sha256(self, path: str) -> str:
        return hashlib.sha256(self.files[path]).hexdigest()

    def blob_id(self, path: str) -> str:
        data = self.files[path]
        return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class SeenRequest:
    method: str
    path: str
    range: str | None
    authorization: str | None
    sent: int = 0  # body bytes sent


class StandInHub:
    def __init__(self) -> None:
        self.repos: dict[str, StandInRepo] = {}
        self.requests: list[SeenRequest] = []
        # (path in repo, bytes): a GET from byte 0 of that file sends this many bytes, then waits for `release`
        self.stall: tuple[str, int] | None = None
        self.release = threading.Event()
        self.stall_drops = True  # after the release the connection is dropped; False: the rest is sent
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> StandInHub:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()

    def downloads(self, name: str) -> list[SeenRequest]:
        """The GETs of a file (`/resolve/`) whose path ends with `name`."""
        return [seen for seen in self.requests
                if seen.method == "GET" and "/resolve/" in seen.path and seen.path.endswith(name)]


_API = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)(?:/(?P<kind>revision|tree)/(?P<rev>[^/]+))?/?$")
_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")


def _handler(hub: StandInHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_: object) -> None:
            pass

        def do_GET(self) -> None:
            self._answer(body=True)

        def do_HEAD(self) -> None:
            self._answer(body=False)

        def _answer(self, body: bool) -> None:
            path = unquote(urlsplit(self.path).path)
            seen = SeenRequest(self.command, path, self.headers.get("Range"), self.headers.get("Authorization"))
            hub.requests.append(seen)
            api, resolve = _API.match(path), _RESOLVE.match(path)
            match = api or resolve
            repo = hub.repos.get(match["repo"]) if match else None
            if match is None:
                return self._error(404, None, "Not found")
            if repo is None or (repo.token and seen.authorization != f"Bearer {repo.token}"):
                return self._error(404 if repo is None else 401, "RepoNotFound", "Repository not found")
            if api:
                return self._json(_tree(repo) if api["kind"] == "tree" else _info(match["repo"], repo))
            if resolve["path"] not in repo.files:
                return self._error(404, "EntryNotFound", "Entry not found")
            self._file(repo, resolve["path"], seen, body)

        def _file(self, repo: StandInRepo, name: str, seen: SeenRequest, body: bool) -> None:
            data = repo.files[name]
            if name in repo.corrupt:
                data = bytes([data[0] ^ 0xFF]) + data[1:]
            start = int(seen.range.removeprefix("bytes=").split("-")[0]) if seen.range else 0
            self.send_response(206 if seen.range else 200)
            etag = repo.sha256(name) if repo.is_lfs(name) else repo.blob_id(name)
            self.send_header("ETag", f'"{etag}"')
            self.send_header("X-Repo-Commit", repo.commit)
            if repo.is_lfs(name):
                self.send_header("X-Linked-Etag", f'"{etag}"')
                self.send_header("X-Linked-Size", str(len(data)))
            self.send_header("Accept-Ranges", "bytes")
            if seen.range:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.send_header("Content-Length", str(len(data) - start))
            self.end_headers()
            if body:
                self._send_body(name, data, start, seen)

        def _send_body(self, name: str, data: bytes, start: int, seen: SeenRequest) -> None:
            end = len(data)
            stall = hub.stall
            if stall and stall[0] == name and start == 0:
                end = stall[1]
            for offset in range(start, end, 1 << 20):
                piece = data[offset:min(offset + (1 << 20), end)]
                self.wfile.write(piece)
                seen.sent += len(piece)
            self.wfile.flush()
            if end < len(data):  # stalled: hold the connection until released, then drop it or go on
                hub.release.wait(60)
                if hub.stall_drops:
                    self.close_connection = True
                    return
                self.wfile.write(data[end:])
                seen.sent += len(data) - end

        def _json(self, value: object) -> None:
            payload = json.dumps(value).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        def _error(self, status: int, code: str | None, message: str) -> None:
            payload = json.dumps({"error": message}).encode()
            self.send_response(status)
            if code:
                self.send_header("X-Error-Code", code)
            self.send_header("X-Error-Message", message)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

    return Handler


def _info(repo_id: str, repo: StandInRepo) -> dict:
    siblings = []
    for path in sorted(repo.files):
        sibling: dict = {"rfilename": path, "size": repo.size(path), "blobId": repo.blob_id(path)}
        if repo.is_lfs(path):
            sibling["lfs"] = {"sha256": repo.sha256(path), "size": repo.size(path), "pointerSize": 134}
        siblings.append(sibling)
    return {"_id": repo_id, "id": repo_id, "modelId": repo_id, "sha": repo.commit, "private": bool(repo.token),
            "tags": ["gguf"], "siblings": siblings}


def _tree(repo: StandInRepo) -> list[dict]:
    entries = []
    for path in sorted(repo.files):
        entry: dict = {"type": "file", "oid": repo.blob_id(path), "size": repo.size(path), "path": path}
        if repo.is_lfs(path):
            entry["lfs"] = {"oid": repo.sha256(path), "size": repo.size(path), "pointerSize": 134}
        entries.append(entry)
    return entries
