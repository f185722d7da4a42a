"""How soon a first `rostra serve` answers: the embedded model on a fresh data directory (no speculation
calibration kept), from the process's start to the end of its first chat completion, then the same on the data
directory the first run left (the calibration kept). Fresh processes, median of the rounds; what else runs on the
machine is printed with the load average.

    python benchmarks/bench_first_start.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

BODY = {"model": "SmolLM2-135M-Instruct", "messages": [{"role": "user", "content": "Say hello."}],
        "max_tokens": 8, "temperature": 0}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def first_answer(data_dir: str, keep_calibration: bool = False) -> float:
    """Seconds from `rostra serve`'s start to its first answer (asked at once: the port waits while it loads);
    `keep_calibration`: the server runs on until its background probe has kept its calibration."""
    port = free_port()
    started = time.monotonic()
    process = subprocess.Popen([sys.executable, "-m", "rostra.cli", "serve", "--port", str(port), "--data-dir",
                                data_dir, "--log-level", "warning"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                reply = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=BODY, timeout=600)
                reply.raise_for_status()
                answered = time.monotonic() - started
                break
            except httpx.ConnectError:  # not bound yet: the interpreter is still starting
                assert process.poll() is None, "rostra serve exited"
                time.sleep(0.05)
        deadline = time.monotonic() + 600
        while keep_calibration and not list(Path(data_dir, "speculation").glob("*.json")):
            assert time.monotonic() < deadline, "no calibration kept"
            time.sleep(0.5)
        return answered
    finally:
        process.terminate()
        process.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    fresh, kept = [], []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="rostra-first-start-") as data_dir:
            fresh.append(first_answer(data_dir, keep_calibration=True))
            kept.append(first_answer(data_dir))
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"fresh data directory: first answer {statistics.median(fresh):.1f} s after the start "
          f"(runs: {', '.join(f'{s:.1f}' for s in fresh)})")
    print(f"calibration kept:     first answer {statistics.median(kept):.1f} s "
          f"(runs: {', '.join(f'{s:.1f}' for s in kept)})")


if __name__ == "__main__":
    main()
