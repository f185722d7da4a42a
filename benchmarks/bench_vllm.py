"""Serving benchmark: `rostra serve --engine vllm` against vLLM's own OpenAI server, same checkpoint, same settings.

    .venv-vllm/bin/python benchmarks/bench_vllm.py                     # CPU: vLLM's CPU build (scripts/install-vllm-cpu.sh)
    python benchmarks/bench_vllm.py --checkpoint /models/Qwen2.5-0.5B-Instruct    # a GPU machine with rostra[vllm]

Run with the Python of an environment that has vLLM (its server is started from the same interpreter). Without
--checkpoint the SmolLM2-135M checkpoint the tests convert from the embedded GGUF is used. Both servers are started
once and run side by side (on a GPU each gets --gpu-memory-utilization 0.4; on a CPU, eager mode and a 1 GiB KV
cache, VLLM_CPU_KVCACHE_SPACE); each round runs every concurrency level on one server right after the other, the
order alternating by round, so each pair sees the same machine load (bench_serving.bench_paired).

Requests: streamed chat completions at temperature 0 with `ignore_eos` (both servers take it) and a fixed
max_tokens. Measured per level: generated tokens per second over the level's wall time, time to first token, and
the CPU the serving process itself spent per generated token: the process that answers HTTP (rostra's, with
vLLM's AsyncLLM front end in it; vLLM's API server), not vLLM's engine-core process that both start beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import itertools
import os
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import AsyncIterator

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from bench_serving import (  # noqa: E402  (the sibling module, importable once the folder is on the path)
    Level,
    cpu_seconds,
    launched,
    machine_info,
    measure_level,
    paired_rounds,
    rostra_version,
    wait_ready,
    warm_up,
)

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).parent / "results" / "vllm.md"
KINDS = ("rostra", "vllm")
MODEL = "bench-model"


@dataclass
class Measured:
    level: Level
    cpu_seconds: float  # the serving process's, during the level

    @property
    def cpu_ms_per_token(self) -> float:
        return self.cpu_seconds * 1000 / max(self.level.tokens, 1)


def on_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def server_command(kind: str, args: argparse.Namespace, port: int, data_dir: str) -> list[str]:
    gpu = on_gpu()
    if kind == "rostra":
        return [sys.executable, "-m", "rostra.cli", "serve", "--engine", "vllm", str(args.checkpoint),
                "--served-model-name", MODEL, "--max-model-len", str(args.max_model_len), "--port", str(port),
                "--log-level", "warning", "--data-dir", data_dir,
                *(["--gpu-memory-utilization", "0.4"] if gpu else ["--vllm-arg", "enforce_eager=true"])]
    return [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(args.checkpoint),
            "--served-model-name", MODEL, "--max-model-len", str(args.max_model_len), "--host", "127.0.0.1",
            "--port", str(port), *(["--gpu-memory-utilization", "0.4"] if gpu else ["--enforce-eager"])]


@contextlib.asynccontextmanager
async def running_server(kind: str, args: argparse.Namespace) -> AsyncIterator[tuple[httpx.AsyncClient, int]]:
    """A started, ready server of `kind`: a client for it and its process id. Stopped on leaving."""
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
    limits = httpx.Limits(max_connections=max(args.concurrency) + 4, max_keepalive_connections=0)
    async with launched(kind, lambda port, data_dir: server_command(kind, args, port, data_dir),
                        lambda client, process: wait_ready(client, process, timeout=1200), limits, env=env,
                        timeout=900) as (client, process, _):
        yield client, process.pid


async def measured_level(client: httpx.AsyncClient, pid: int, kind: str, ids, c: int,
                         args: argparse.Namespace) -> Measured:
    before = cpu_seconds(pid)
    level = await measure_level(client, MODEL, kind, ids, c, args)
    return Measured(level, cpu_seconds(pid) - before)


async def bench_paired(args: argparse.Namespace) -> dict[str, list[dict[int, Measured]]]:
    async with contextlib.AsyncExitStack() as stack:
        # One after the other: two engines loading at once would slow both starts on a small machine.
        servers = {kind: await stack.enter_async_context(running_server(kind, args)) for kind in KINDS}
        ids = {kind: itertools.count() for kind in KINDS}  # the same prompts for both, in the same order
        for kind, (client, _) in servers.items():
            await warm_up(client, MODEL, ids[kind], args)
        return await paired_rounds(KINDS, args, lambda kind, c: measured_level(*servers[kind], kind, ids[kind], c,
                                                                                args))


def table(results: dict[str, list[dict[int, Measured]]], concurrency: list[int]) -> str:
    """Medians over the rounds; the ratio column is the median of each round's own ratio (paired)."""
    rows = ["| c | rostra tok/s | vLLM tok/s | rostra / vLLM (paired) | TTFT p50 rostra / vLLM (ms) "
            "| front-end CPU ms/token rostra / vLLM |", "|---|---|---|---|---|---|"]
    for c in concurrency:
        ours, theirs = ([r[c] for r in results[kind]] for kind in KINDS)
        speed = [statistics.median(m.level.tokens_per_s for m in runs) for runs in (ours, theirs)]
        ratio = statistics.median(a.level.tokens_per_s / b.level.tokens_per_s for a, b in zip(ours, theirs))
        ttft = [statistics.median(m.level.ttft_p50_ms for m in runs) for runs in (ours, theirs)]
        cpu = [statistics.median(m.cpu_ms_per_token for m in runs) for runs in (ours, theirs)]
        rows.append(f"| {c} | {speed[0]:.1f} | {speed[1]:.1f} | {ratio:.2f}x | {ttft[0]:.0f} / {ttft[1]:.0f} "
                    f"| {cpu[0]:.2f} / {cpu[1]:.2f} |")
    return "\n".join(rows)


def default_checkpoint() -> Path:
    from rostra.embedded import embedded_model_path
    from rostra.engines.transformers_checkpoint import checkpoint_from_gguf

    return checkpoint_from_gguf(embedded_model_path(), ROOT / ".cache" / "smollm2-hf")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path, help="a model directory (default: SmolLM2-135M from the GGUF)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 8, 32])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--requests-per-level", type=int, default=0, help="default: max(4, 2 x concurrency)")
    parser.add_argument("--max-model-len", type=int, default=2048)
    parser.add_argument("--write", action="store_true", help=f"write the report to {RESULTS.relative_to(ROOT)}")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    args.checkpoint = args.checkpoint or default_checkpoint()
    started = datetime.datetime.now(datetime.timezone.utc)
    results = asyncio.run(bench_paired(args))
    report = "\n".join([
        f"# rostra --engine vllm vs vLLM's OpenAI server ({started:%Y-%m-%d %H:%M} UTC)", "",
        f"- machine: {machine_info()}, {'GPU' if on_gpu() else 'CPU (vllm-cpu, enforce_eager)'}",
        f"- rostra {rostra_version()}; checkpoint {args.checkpoint.name}; {args.rounds} paired rounds; "
        f"max_tokens {args.max_tokens} with ignore_eos; temperature 0", "",
        table(results, args.concurrency), ""])
    print(report)
    if args.write:
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(report)


if __name__ == "__main__":
    main()
