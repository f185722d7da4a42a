"""Image benchmark: rostra (`--mmproj`) against llama.cpp's own server, on the same model and projector.

One image per request (a different one each time, so each is encoded), 64 streamed tokens out (`ignore_eos`),
concurrency 1 and 4. Both servers start once; each round runs every level on one server right after the other,
the order alternating (bench_serving.py's paired method). Reports tokens/s and TTFT, rostra / reference.

    python benchmarks/bench_images.py --mmproj MMPROJ.gguf [--model MODEL.gguf]

Default projector: the tiny one the tests build (tests/mmproj_gguf.py, into .cache/) for the embedded SmolLM2.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import datetime
import io
import itertools
import os
import signal
import sys
import time
from pathlib import Path
from typing import AsyncIterator

import httpx
from PIL import Image

from bench_serving import (Level, chat_stream, launched, llama_server_params, machine_info, paired_rounds,
                           rostra_version, rounds_table, table, wait_ready)

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).parent / "results" / "images.md"
KINDS = ("rostra", "reference")


def image_url(request_id: int, size: int) -> str:
    """A different picture per request (its colours shift with the id)."""
    image = Image.new("RGB", (size, size))
    image.putdata([((x * 7 + request_id) % 256, (y * 5 + 3 * request_id) % 256, (x ^ y) % 256)
                   for y in range(size) for x in range(size)])
    out = io.BytesIO()
    image.save(out, format="PNG")
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()


async def one_request(client: httpx.AsyncClient, model: str, request_id: int, args: argparse.Namespace
                      ) -> tuple[int, float, int]:
    body = {"model": model, "max_tokens": args.max_tokens, "temperature": 0, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": [{"type": "text", "text": f"Describe picture {request_id}."},
                                                      {"type": "image_url", "image_url": {
                                                          "url": image_url(request_id, args.image_size)}}]}]}
    sent, ttft, usage = time.perf_counter(), None, None
    async for event in chat_stream(client, body):
        usage = event.get("usage") or usage
        if ttft is None and any((choice.get("delta") or {}).get("content") for choice in event.get("choices") or []):
            ttft = time.perf_counter() - sent
    return (usage or {}).get("completion_tokens", 0), ttft or time.perf_counter() - sent, (usage or {}).get(
        "prompt_tokens", 0)


async def level(client: httpx.AsyncClient, model: str, ids: itertools.count, c: int, args: argparse.Namespace,
                kind: str) -> Level:
    pending, results = iter(range(max(4, 2 * c))), []

    async def worker() -> None:
        for _ in pending:
            results.append(await one_request(client, model, next(ids), args))

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(c)))
    measured = Level(c, len(results), sum(r[0] for r in results), time.perf_counter() - started,
                     [r[1] for r in results], sum(r[2] for r in results) / len(results))
    print(f"[{kind}] c={c}: {measured.tokens_per_s:.1f} tok/s, TTFT p50 {measured.ttft_p50_ms:.0f} ms", flush=True)
    return measured


@contextlib.asynccontextmanager
async def running(kind: str, args: argparse.Namespace) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    def command(port: int, data_dir: str) -> list[str]:
        common = ["--parallel", str(args.parallel), "--max-model-len", str(args.max_model_len), "--port", str(port),
                  *(["--threads", str(args.threads)] if args.threads else [])]
        if kind == "rostra":
            return [sys.executable, "-m", "rostra.cli", "serve", args.model, "--mmproj", str(args.mmproj), *common,
                    "--log-level", "warning", "--data-dir", data_dir]
        return [sys.executable, __file__, "--reference-server", "--model", args.model, "--mmproj", str(args.mmproj),
                *common]

    async with launched(kind, command, wait_ready, httpx.Limits(max_keepalive_connections=0)) as (client, _, model):
        yield client, model


def reference_server(args: argparse.Namespace) -> None:
    import xllamacpp

    params = llama_server_params(args, args.port)
    params.mmproj.path = str(args.mmproj)
    server = xllamacpp.Server(params)  # noqa: F841 (serves until killed)
    while True:
        time.sleep(3600)


async def paired(args: argparse.Namespace) -> dict[str, list[dict[int, Level]]]:
    async with contextlib.AsyncExitStack() as stack:
        servers = {kind: await stack.enter_async_context(running(kind, args)) for kind in KINDS}
        ids = {kind: itertools.count() for kind in KINDS}
        for kind, (client, model) in servers.items():  # warm-up
            await one_request(client, model, next(ids[kind]), args)
        return await paired_rounds(KINDS, args, lambda kind, c: level(*servers[kind], ids[kind], c, args, kind))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="GGUF (default: the embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--mmproj", type=Path, help="the projector (default: the tests' tiny one)")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--image-size", type=int, default=256, help="pixels a side")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--max-model-len", type=int, default=2048)
    parser.add_argument("--threads", type=int, help="llama.cpp's threads in both servers (default: their own)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--reference-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.model is None:
        from rostra.embedded import embedded_model_path
        args.model = str(embedded_model_path())
    if args.mmproj is None:
        sys.path.insert(0, str(ROOT / "tests"))
        from mmproj_gguf import mmproj_path
        args.mmproj = mmproj_path(ROOT / ".cache")
    if args.reference_server:
        return reference_server(args)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stopped: the servers are stopped too
    started = datetime.datetime.now(datetime.timezone.utc)
    load_at_start = f"{os.getloadavg()[0]:.1f}"
    results = asyncio.run(paired(args))
    report = f"""# Image benchmark: rostra vs llama.cpp server (`--mmproj`)

- date: {started:%Y-%m-%d %H:%M %Z}; machine: {machine_info()}; rostra commit: {rostra_version()}
- model `{Path(args.model).name}`, projector `{Path(args.mmproj).name}`; one {args.image_size}x{args.image_size} PNG
  per request (a different one each time), {args.max_tokens} tokens out (`ignore_eos`, temperature 0), streamed
- {args.rounds} paired rounds (each level on one server right after the other, order alternating), medians;
  both servers {args.parallel} slots, {args.max_model_len} context per slot, {args.threads or 'default'} threads
- machine load (1-minute average) at the start and the end: {load_at_start} / {os.getloadavg()[0]:.1f}
- command: `python benchmarks/bench_images.py {' '.join(sys.argv[1:])}`

{table(results["rostra"], results["reference"])}

## Every round

{rounds_table(results)}
"""
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(report)
    print(report)


if __name__ == "__main__":
    main()
