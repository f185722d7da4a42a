"""Serving benchmark: rostra against llama.cpp's own server, on the same GGUF file.

Each server is started alone (so the two never compete for the CPU), warmed up, and then
driven with streamed chat completions at each concurrency level. Every request generates
exactly --max-tokens tokens (`ignore_eos`), so the servers do the same amount of work.

    python benchmarks/bench_serving.py            # embedded SmolLM2-135M, concurrency 1 4 8

Reports aggregate generated tokens/s and time-to-first-token (TTFT) per level, with the
ratio rostra / reference, and writes them to benchmarks/results/serving.md.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

RESULTS = Path(__file__).parent / "results" / "serving.md"
PROMPT = "Write a long story about a lighthouse keeper who finds a message in a bottle. (request {i})"


def run_reference_server(args: argparse.Namespace) -> None:
    """The reference: llama.cpp's HTTP server as xllamacpp embeds it, configured like rostra configures it."""
    import threading

    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.n_parallel = args.parallel
    # rostra gives each slot the whole context window, unshared: do the same here.
    params.n_ctx = args.max_model_len * args.parallel
    params.kv_unified = False
    if args.threads:
        params.cpuparams.n_threads = params.cpuparams_batch.n_threads = args.threads
    params.port = args.port
    params.hostnames = ["127.0.0.1"]
    server = xllamacpp.Server(params)  # loads the model and starts listening  # noqa: F841
    threading.Event().wait()  # serve until the benchmark terminates this process


@dataclass
class Level:
    concurrency: int
    requests: int
    tokens: int
    seconds: float
    ttfts: list[float]
    prompt_tokens: float  # mean per request: shows both servers rendered the same prompt

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds

    @property
    def ttft_mean_ms(self) -> float:
        return statistics.mean(self.ttfts) * 1000

    @property
    def ttft_p50_ms(self) -> float:
        return statistics.median(self.ttfts) * 1000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_command(kind: str, args: argparse.Namespace, port: int) -> list[str]:
    common = ["--port", str(port), "--parallel", str(args.parallel), "--max-model-len", str(args.max_model_len)]
    if args.threads:
        common += ["--threads", str(args.threads)]
    if kind == "rostra":
        return [sys.executable, "-m", "rostra.cli", "serve", args.model, "--log-level", "warning", *common]
    return [sys.executable, __file__, "--reference-server", "--model", args.model, *common]


async def wait_ready(client: httpx.AsyncClient, process: subprocess.Popen, timeout: float = 300) -> str:
    """Wait for /health, then return the model name the server lists."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with code {process.returncode}")
        try:
            if (await client.get("/health")).status_code == 200:
                models = (await client.get("/v1/models")).json()["data"]
                return models[0]["id"]
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.5)
    raise RuntimeError("server did not become ready in time")


async def one_request(client: httpx.AsyncClient, model: str, i: int, max_tokens: int) -> tuple[int, float, int]:
    """Stream one chat completion; return (generated tokens, seconds to the first content, prompt tokens)."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": PROMPT.format(i=i)}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "seed": 1234,
        "ignore_eos": True,  # always generate max_tokens, whatever the model would say
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    sent = time.perf_counter()
    ttft = None
    chunks = 0
    usage = None
    async with client.stream("POST", "/v1/chat/completions", json=body) as reply:
        if reply.status_code != 200:
            raise RuntimeError(f"HTTP {reply.status_code}: {(await reply.aread())[:300]!r}")
        async for line in reply.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            if event.get("usage"):
                usage = event["usage"]
            for choice in event.get("choices") or []:
                if (choice.get("delta") or {}).get("content"):
                    chunks += 1
                    if ttft is None:
                        ttft = time.perf_counter() - sent
    tokens = usage["completion_tokens"] if usage else chunks
    prompt_tokens = usage["prompt_tokens"] if usage else 0
    return tokens, ttft if ttft is not None else time.perf_counter() - sent, prompt_tokens


async def run_level(client: httpx.AsyncClient, model: str, concurrency: int, requests: int, max_tokens: int) -> Level:
    """`requests` requests, at most `concurrency` in flight at once; throughput over the level's wall time."""
    pending = iter(range(requests))
    results: list[tuple[int, float, int]] = []

    async def worker() -> None:
        for i in pending:  # workers share one iterator, so each request runs once
            results.append(await one_request(client, model, i, max_tokens))

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    seconds = time.perf_counter() - started
    return Level(concurrency, requests, sum(r[0] for r in results), seconds, [r[1] for r in results],
                 statistics.mean(r[2] for r in results))


async def bench_server(kind: str, args: argparse.Namespace) -> dict[int, Level]:
    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix=f"bench-{kind}-", suffix=".log", delete=False)
    process = subprocess.Popen(server_command(kind, args, port), stdout=log, stderr=subprocess.STDOUT)
    levels: dict[int, Level] = {}
    limits = httpx.Limits(max_connections=max(args.concurrency) + 4)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=600, limits=limits) as client:
            model = await wait_ready(client, process)
            print(f"[{kind}] ready on port {port}, model {model!r}; warming up", flush=True)
            # Warm-up: first requests pay for allocations and cache faults that steady serving does not.
            await run_level(client, model, 2, 2, args.max_tokens)
            for concurrency in args.concurrency:
                requests = args.requests_per_level or max(4, 2 * concurrency)
                level = await run_level(client, model, concurrency, requests, args.max_tokens)
                expected = requests * args.max_tokens
                if level.tokens != expected:
                    print(f"[{kind}] warning: {level.tokens} tokens generated, expected {expected}", flush=True)
                print(f"[{kind}] c={concurrency}: {level.tokens_per_s:.1f} tok/s, "
                      f"TTFT mean {level.ttft_mean_ms:.0f} ms, p50 {level.ttft_p50_ms:.0f} ms, "
                      f"{level.prompt_tokens:.0f} prompt tokens", flush=True)
                levels[concurrency] = level
    except Exception:
        print(f"[{kind}] failed; server log tail ({log.name}):\n" + Path(log.name).read_text()[-3000:], file=sys.stderr)
        raise
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
    os.unlink(log.name)
    return levels


def table(rostra: dict[int, Level], reference: dict[int, Level]) -> str:
    rows = [
        "| concurrency | rostra tok/s | reference tok/s | ratio | rostra TTFT mean / p50 ms "
        "| reference TTFT mean / p50 ms | TTFT ratio (mean) |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in rostra:
        r, ref = rostra[c], reference[c]
        rows.append(
            f"| {c} | {r.tokens_per_s:.1f} | {ref.tokens_per_s:.1f} | {r.tokens_per_s / ref.tokens_per_s:.2f}x "
            f"| {r.ttft_mean_ms:.0f} / {r.ttft_p50_ms:.0f} | {ref.ttft_mean_ms:.0f} / {ref.ttft_p50_ms:.0f} "
            f"| {r.ttft_mean_ms / ref.ttft_mean_ms:.2f}x |"
        )
    return "\n".join(rows)


def machine_info() -> str:
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, Python {platform.python_version()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="GGUF file (default: the embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--max-tokens", type=int, default=128, help="tokens generated per request")
    parser.add_argument("--requests-per-level", type=int, help="requests per level (default: max(4, 2 x concurrency))")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--parallel", type=int, default=8, help="server slots, for both servers")
    parser.add_argument("--max-model-len", type=int, default=8192, help="context per slot, for both servers")
    parser.add_argument("--threads", type=int, help="CPU threads, for both servers (default: llama.cpp's choice)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--reference-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.model is None:
        from rostra.embedded import embedded_model_path

        args.model = str(embedded_model_path())
    if args.reference_server:
        return run_reference_server(args)

    started = datetime.datetime.now().astimezone()
    rostra = asyncio.run(bench_server("rostra", args))
    reference = asyncio.run(bench_server("reference", args))
    result = table(rostra, reference)
    print("\n" + result)

    command = " ".join(["python benchmarks/bench_serving.py", *sys.argv[1:]])
    per_level = ", ".join(f"c={c}: {level.requests}" for c, level in rostra.items())
    report = f"""# Serving benchmark: rostra vs llama.cpp server

- date: {started:%Y-%m-%d %H:%M %Z}
- machine: {machine_info()}
- model: `{Path(args.model).name}` ({Path(args.model).stat().st_size / 1e6:.0f} MB)
- {args.max_tokens} generated tokens per request (streamed chat completions, temperature 0, `ignore_eos`)
- requests per level: {per_level}
- both servers: {args.parallel} slots, {args.max_model_len} context per slot, threads: {args.threads or "llama.cpp default"}
- command: `{command}`

tok/s: generated tokens / wall time of the level (higher is better; ratio = rostra / reference).
TTFT: request sent to first content received (lower is better; ratio = rostra / reference).

{result}
"""
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(report)
    print(f"\nwritten to {args.output}")


if __name__ == "__main__":
    main()
