"""The Batch API beside an interactive client, on the embedded model (issue 36).

Two figures, on one `rostra serve` (`--parallel P`):
- **batch throughput**: N chat lines (max_tokens M, temperature 0, ignore_eos) as one batch (upload, create, wait
  for `completed`), vs the same N requests sent online by a client at concurrency P; lines/s and the ratio.
- **interactive TTFT**: an interactive client sends K streamed requests one after another, with the server idle and
  then while the batch runs; TTFT p50 / mean, and the ratio (how much the batch raises online TTFT).

    python benchmarks/bench_batch.py --lines 40 --max-tokens 32 --parallel 4 --interactive 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_serving import chat_stream, free_port, stop_process, wait_ready  # noqa: E402


def chat_body(model: str, n: int, max_tokens: int) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": f"Write a short story, number {n}."}],
            "max_tokens": max_tokens, "temperature": 0, "seed": n, "ignore_eos": True}


async def online(client: httpx.AsyncClient, model: str, args: argparse.Namespace) -> float:
    """The lines sent online at concurrency --parallel: seconds for all."""
    slots = asyncio.Semaphore(args.parallel)

    async def one(n: int) -> None:
        async with slots:
            reply = await client.post("/v1/chat/completions", json=chat_body(model, n, args.max_tokens))
            reply.raise_for_status()

    started = time.perf_counter()
    await asyncio.gather(*(one(n) for n in range(args.lines)))
    return time.perf_counter() - started


async def start_batch(client: httpx.AsyncClient, model: str, args: argparse.Namespace) -> str:
    lines = "".join(json.dumps({"custom_id": f"l{n}", "method": "POST", "url": "/v1/chat/completions",
                                "body": chat_body(model, n, args.max_tokens)}) + "\n" for n in range(args.lines))
    upload = (await client.post("/v1/files", files={"file": ("in.jsonl", lines.encode())},
                                data={"purpose": "batch"})).json()
    batch = await client.post("/v1/batches", json={"input_file_id": upload["id"], "endpoint": "/v1/chat/completions",
                                                   "completion_window": "24h"})
    return str(batch.json()["id"])


async def batch_done(client: httpx.AsyncClient, batch_id: str) -> dict:
    while True:
        batch = (await client.get(f"/v1/batches/{batch_id}")).json()
        if batch["status"] in ("completed", "failed", "expired", "cancelled"):
            return batch
        await asyncio.sleep(0.2)


async def ttfts(client: httpx.AsyncClient, model: str, args: argparse.Namespace, until: asyncio.Task | None = None
                ) -> list[float]:
    """K streamed requests one after another (all K; with `until`, stop early once the batch is done)."""
    measured = []
    for n in range(args.interactive):
        if until is not None and until.done():
            break
        started = time.perf_counter()
        async for event in chat_stream(client, {**chat_body(model, 10_000 + n, args.max_tokens), "stream": True}):
            if event.get("choices") and event["choices"][0]["delta"].get("content"):
                measured.append(time.perf_counter() - started)
                break
        # the rest of the stream is read (closed by the context manager); pause as a person would
        await asyncio.sleep(args.think)
    return measured


async def bench(args: argparse.Namespace) -> dict:
    load_before = os.getloadavg()[0]
    port = free_port()
    data = tempfile.mkdtemp(prefix="bench-batch-")
    process = subprocess.Popen([sys.executable, "-m", "rostra.cli", "serve", "--port", str(port), "--parallel",
                                str(args.parallel), "--log-level", "warning", "--data-dir", data, "--no-ui",
                                "--batch-concurrency", str(args.batch_concurrency), *args.rostra_flag])
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=600) as client:
            model = await wait_ready(client, process, timeout=900)
            await online(client, model, argparse.Namespace(**{**vars(args), "lines": args.parallel}))  # warm-up
            idle = await ttfts(client, model, args)
            online_seconds = await online(client, model, args)
            started = time.perf_counter()
            batch_id = await start_batch(client, model, args)
            waiter = asyncio.create_task(batch_done(client, batch_id))
            await asyncio.sleep(1.0)  # the batch is running
            busy = await ttfts(client, model, args, until=waiter)
            batch = await waiter
            batch_seconds = time.perf_counter() - started
    finally:
        stop_process(process)
    assert batch["request_counts"]["completed"] == args.lines, batch
    return {"online_s": online_seconds, "batch_s": batch_seconds, "idle": idle, "busy": busy,
            "load": (load_before, os.getloadavg()[0])}


def report(args: argparse.Namespace, result: dict) -> str:
    online_rate, batch_rate = args.lines / result["online_s"], args.lines / result["batch_s"]
    idle, busy = result["idle"], result["busy"]
    return "\n".join([
        f"ended {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, load average {result['load'][0]:.1f} at the "
        f"start, {result['load'][1]:.1f} at the end (other work on the machine: figures far from quiet ones)",
        f"{args.lines} lines, max_tokens {args.max_tokens}, --parallel {args.parallel}, "
        f"--batch-concurrency {args.batch_concurrency}",
        "| | lines/s | seconds |", "|---|---|---|",
        f"| online at c={args.parallel} | {online_rate:.2f} | {result['online_s']:.1f} |",
        f"| batch | {batch_rate:.2f} | {result['batch_s']:.1f} |",
        f"| ratio batch/online | {batch_rate / online_rate:.2f}x | |", "",
        "| interactive TTFT | n | p50 ms | mean ms |", "|---|---|---|---|",
        f"| server idle | {len(idle)} | {statistics.median(idle) * 1000:.0f} | {statistics.mean(idle) * 1000:.0f} |",
        f"| batch running | {len(busy)} | {statistics.median(busy) * 1000:.0f} | "
        f"{statistics.mean(busy) * 1000:.0f} |",
        f"| ratio p50 busy/idle | {statistics.median(busy) / statistics.median(idle):.2f}x | | |"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=500)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--batch-concurrency", type=int, default=2)
    parser.add_argument("--interactive", type=int, default=10, help="interactive requests per phase")
    parser.add_argument("--think", type=float, default=0.5, help="seconds between interactive requests")
    parser.add_argument("--rostra-flag", action="append", default=[], help="another flag for rostra serve")
    args = parser.parse_args()
    print(report(args, asyncio.run(bench(args))))


if __name__ == "__main__":
    main()
