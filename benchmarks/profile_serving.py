"""CPU time per generated token, thread by thread, of `rostra serve` under streamed chat load.

With --api responses (or responses-nostore), the load is streamed Responses API requests instead
(bench_responses.py's, `store: true` / `false`); the SQLite store's thread is among "other Python threads".

Starts rostra on the embedded model (or --model), warms it up, runs one level of bench_serving.py's
requests (--concurrency, --requests, 128 tokens each) and reads each thread's CPU time from /proc
before and after: the event loop (main thread), llama.cpp's compute threads and the per-request
worker threads, in CPU microseconds per generated token. With --py-spy FILE, py-spy records the
server meanwhile (raw format, all threads); note that py-spy stops the process to sample it, which
stalls llama.cpp's spinning threads: throughput drops a lot while it records.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
import bench_responses  # noqa: E402
import bench_serving  # noqa: E402


def thread_cpu(pid: int) -> dict[str, tuple[str, float]]:
    """Thread id -> (name, CPU seconds) of every thread of `pid`; the main thread is the event loop."""
    tick = os.sysconf("SC_CLK_TCK")
    threads = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:  # the thread ended
            continue
        name = "event loop" if tid == str(pid) else stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        threads[tid] = (name, (int(fields[11]) + int(fields[12])) / tick)  # utime + stime
    return threads


async def measure(args: argparse.Namespace) -> None:
    port = bench_serving.free_port()
    data_dir = tempfile.TemporaryDirectory(prefix="profile-serving-")  # a fresh store, removed afterwards
    command = [sys.executable, "-m", "rostra.cli", "serve", args.model, "--log-level", "warning", "--port", str(port),
               "--parallel", "8", "--max-model-len", "8192", "--data-dir", data_dir.name]
    if args.threads:
        command += ["--threads", str(args.threads)]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    spy = None
    try:
        limits = httpx.Limits(max_connections=args.concurrency + 4, max_keepalive_connections=0)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=600, limits=limits) as client:
            model = await bench_serving.wait_ready(client, server)
            ids = itertools.count()
            request = bench_responses.REQUESTS[args.api]
            await bench_responses.run_level(client, model, request, ids, 2, 2, 128)  # warm-up
            if args.py_spy:
                spy = subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(server.pid),
                                        "-o", str(args.py_spy), "-f", "raw", "--threads", "-r", "100", "-d", "20"])
            before = thread_cpu(server.pid)
            level = await bench_responses.run_level(client, model, request, ids, args.concurrency, args.requests, 128)
            after = thread_cpu(server.pid)
        report(level, before, after)
    finally:
        if spy is not None:
            spy.wait()
        bench_serving.stop_process(server)
        data_dir.cleanup()


def report(level: bench_serving.Level, before: dict, after: dict) -> None:
    used = sorted(((seconds - before.get(tid, (name, 0.0))[1], name) for tid, (name, seconds) in after.items()),
                  reverse=True)
    per_token = lambda seconds: seconds / level.tokens * 1e6  # noqa: E731
    compute = used[:2] if used[0][1] != "event loop" else used[1:3]  # llama.cpp's two busiest threads
    loop = next(seconds for seconds, name in used if name == "event loop")
    workers = sum(seconds for seconds, name in used if name.startswith("python") and (seconds, name) not in compute)
    print(f"c={level.concurrency}: {level.tokens_per_s:.1f} tok/s, {level.tokens} tokens")
    print(f"  event loop thread:           {per_token(loop):8.0f} us CPU per token")
    print(f"  llama.cpp compute (2 busiest): {per_token(sum(s for s, _ in compute)):6.0f} us CPU per token")
    # Python 3.11 leaves its threads' OS names alone: the store's thread (SQLite) is counted here too.
    print(f"  other Python threads:        {per_token(workers):8.0f} us CPU per token")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="GGUF file (default: the embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--requests", type=int, default=24)
    parser.add_argument("--api", choices=list(bench_responses.REQUESTS), default="chat",
                        help="what the load streams: chat completions, or responses with store true / false")
    parser.add_argument("--threads", type=int, help="llama.cpp threads (default: llama.cpp's choice)")
    parser.add_argument("--py-spy", type=Path, help="record a py-spy profile (raw) to this file meanwhile")
    args = parser.parse_args()
    if not args.model:
        from rostra.embedded import embedded_model_path
        args.model = str(embedded_model_path())
    asyncio.run(measure(args))


if __name__ == "__main__":
    main()
