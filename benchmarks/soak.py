"""Soak: N concurrent streams against a scripted-engine server for a while; reports errors, mixed or
truncated streams, throughput and the server's RSS before and after.

    python benchmarks/soak.py --minutes 3 --concurrency 32

(CI runs a short version: tests/test_soak.py.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from servers import DATA, RunningServer  # noqa: E402
from test_soak import one_stream, rss_kib  # noqa: E402


async def soak(base_url: str, seconds: float, concurrency: int) -> dict:
    counts = {"streams": 0, "errors": 0, "mixed_or_truncated": 0}
    deadline = time.monotonic() + seconds

    async def worker(client: httpx.AsyncClient, number: int) -> None:
        sequence = 0
        while time.monotonic() < deadline:
            text = f"soak {number}-{sequence}: " + " ".join(f"w{number}x{j}" for j in range(20))
            sequence += 1
            try:
                got = await one_stream(client, text)
                counts["streams"] += 1
                counts["mixed_or_truncated"] += got != text
            except (AssertionError, httpx.HTTPError, json.JSONDecodeError):
                counts["errors"] += 1

    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(base_url=base_url, timeout=60, limits=limits) as client:
        await asyncio.gather(*(worker(client, n) for n in range(concurrency)))
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=3)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    server = RunningServer(["--engine", "scripted", "--script", str(DATA / "script.jsonl")])
    try:
        asyncio.run(soak(server.base_url, 5, args.concurrency))  # warm-up
        before = rss_kib(server.process.pid)
        started = time.monotonic()
        counts = asyncio.run(soak(server.base_url, args.minutes * 60, args.concurrency))
        elapsed = time.monotonic() - started
        after = rss_kib(server.process.pid)
    finally:
        server.stop()
    print(f"{args.concurrency} concurrent streams for {elapsed:.0f} s: {counts['streams']} streams "
          f"({counts['streams'] / elapsed:.1f}/s), {counts['errors']} errors, "
          f"{counts['mixed_or_truncated']} mixed or truncated; RSS {before} KiB -> {after} KiB")


if __name__ == "__main__":
    main()
