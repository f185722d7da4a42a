"""Real `rostra serve` processes for the tests, on free loopback ports."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import httpx

DATA = Path(__file__).parent / "data"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def address_space_limit(limit: int) -> Callable[[], None]:
    """A `preexec` for RunningServer: the process may map at most `limit` bytes (RLIMIT_AS), so a request that
    makes it allocate without end fails inside it instead of pressing on the machine."""

    def preexec() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return preexec


def became_healthy(process: subprocess.Popen, base_url: str, log_path: Path, timeout: float, name: str,
                   poll: float = 0.2) -> bool:
    """Whether the server at `base_url` answered GET /health with 200 within `timeout` seconds; a process that
    exits first raises, with the end of its log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited: {log_path.read_text()[-3000:]}")
        try:
            if httpx.get(f"{base_url}/health", timeout=1).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(poll)
    return False


class RunningServer:
    def __init__(self, args: list[str], startup_timeout: float = 120, data_dir: str | None = None,
                 log_level: str = "warning", env: dict[str, str] | None = None, port: int | None = None,
                 preexec: Callable[[], None] | None = None, probe_speculation: bool = False):
        """`preexec` runs in the child before rostra starts (resource limits for the fault tests);
        `probe_speculation`: the server's own default (`--speculative auto`) rather than drafting off."""
        self.port = port or free_port()
        # Each server keeps its Responses store in its own directory (or the one given, to restart on it).
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="rostra-data-")
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"rostra-test-{self.port}.log"
        self._log = open(self.log_path, "wb")
        if probe_speculation is False and "--speculative" not in args:
            # Each test server starts on a fresh data directory, so in `auto` each would run the speculation probe
            # (tens of llama.cpp requests whenever it is idle) and might switch drafting on in the middle of a test;
            # tests/test_speculation*.py test that mode, here it only costs CI's time and makes outputs vary.
            args = [*args, "--speculative", "off"]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "rostra.cli", "serve", *args, "--port", str(self.port), "--log-level", log_level,
             "--data-dir", self.data_dir],
            stdout=self._log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}, preexec_fn=preexec)
        if not became_healthy(self.process, self.base_url, self.log_path, startup_timeout, "rostra serve"):
            self.stop()
            raise RuntimeError("rostra serve did not become healthy in time")

    @property
    def v1(self) -> str:
        return f"{self.base_url}/v1"

    def kill(self) -> None:
        """SIGKILL: the process dies mid-whatever, as a crashed upstream does."""
        self.process.kill()
        self.process.wait(timeout=15)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self._log.close()
