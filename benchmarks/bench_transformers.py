"""Serving benchmark: rostra's transformers engine against `transformers serve`, same checkpoint.

    python benchmarks/bench_transformers.py --reference-bin /work/venv-tfserve/bin/transformers

`transformers serve` needs `transformers[serving]`, which must not change rostra's pins, so it
lives in its own virtual environment (see benchmarks/README.md); --reference-bin points at its
`transformers` command. Servers measured, one at a time, alternating round by round:

- rostra: `rostra serve --engine transformers CHECKPOINT --parallel 4` (its own batched loop);
- tf-serve: `transformers serve CHECKPOINT` (default: no continuous batching);
- tf-serve-cb: the same with `--continuous-batching` (transformers' paged-attention batching).

Requests are streamed chat completions at temperature 0 with a fixed max_tokens. `transformers
serve` rejects `ignore_eos`, so no server gets it: greedy decoding of one checkpoint gives every
server the same text, hence the same number of tokens (checked: a level whose token count differs
from rostra's is flagged). Reuses bench_serving.py's request driver and report helpers.
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
from pathlib import Path
from typing import AsyncIterator

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from bench_serving import (  # noqa: E402  (the sibling module, importable once the folder is on the path)
    Level,
    launched,
    machine_info,
    measure_level,
    measure_levels,
    median_of_rounds,
    paired_rounds,
    rostra_version,
    rounds_table,
    wait_healthy,
    warm_up,
)

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).parent / "results" / "transformers.md"
SERVERS = ("rostra", "tf-serve", "tf-serve-cb")


def server_command(kind: str, args: argparse.Namespace, port: int, data_dir: str) -> list[str]:
    if kind == "rostra":
        return [sys.executable, "-m", "rostra.cli", "serve", "--engine", "transformers", str(args.checkpoint),
                "--served-model-name", str(args.checkpoint), "--parallel", str(args.parallel),
                "--max-model-len", "2048", "--dtype", "float32", "--device", "cpu", "--port", str(port),
                "--log-level", "warning", "--data-dir", data_dir]
    command = [args.reference_bin, "serve", str(args.checkpoint), "--host", "127.0.0.1", "--port", str(port),
               "--device", "cpu", "--dtype", "float32"]
    return command + (["--continuous-batching"] if kind == "tf-serve-cb" else [])


@contextlib.asynccontextmanager
async def running_server(kind: str, args: argparse.Namespace) -> AsyncIterator[httpx.AsyncClient]:
    """A started, healthy server of `kind` (a client for it); stopped on leaving."""
    # Ready at /health only: `transformers serve`'s /v1/models scans the Hub cache and fails without one.
    async with launched(kind, lambda port, data_dir: server_command(kind, args, port, data_dir), wait_healthy) as (
            client, _, _):
        yield client


async def bench_server(kind: str, args: argparse.Namespace) -> dict[int, Level]:
    """Every level on one freshly started server."""
    async with running_server(kind, args) as client:
        # `transformers serve` refuses ignore_eos (422): greedy decoding gives every server the same text.
        return await measure_levels(client, str(args.checkpoint), kind, args, ignore_eos=False)


async def bench_paired(args: argparse.Namespace, loads: list[str]) -> dict[str, list[dict[int, Level]]]:
    """Every server started once; then each round runs every level on each server in turn, seconds apart
    (the order rotating by round), so a pair's ratio sees the same load (bench_serving.paired_rounds)."""
    kinds = list(args.servers)
    model = str(args.checkpoint)  # every server answers to the path it was given
    async with contextlib.AsyncExitStack() as stack:
        clients = {kind: await stack.enter_async_context(running_server(kind, args)) for kind in kinds}
        ids = {kind: itertools.count() for kind in kinds}  # the same prompts for every server, in the same order
        for kind in kinds:
            await warm_up(clients[kind], model, ids[kind], args, ignore_eos=False)
        return await paired_rounds(kinds, args, lambda kind, c: measure_level(
            clients[kind], model, kind, ids[kind], c, args, ignore_eos=False), loads)


def table(results: dict[str, list[dict[int, Level]]]) -> str:
    """Medians over the rounds; "paired": the median of each round's own ratio (see bench_paired)."""
    references = [kind for kind in results if kind != "rostra"]
    header = ["concurrency", "rostra tok/s", *(f"{k} tok/s | rostra / {k} | paired" for k in references),
              "rostra TTFT mean ms", *(f"{k} TTFT mean ms" for k in references)]
    rows = ["| " + " | ".join(header) + " |", "|" + "---:|" * (3 + 4 * len(references))]
    for c in results["rostra"][0]:
        tps, ttft, _ = median_of_rounds(results["rostra"], c)
        cells = [str(c), f"{tps:.1f}"]
        ttfts = [f"{ttft:.0f}"]
        for kind in references:
            ref_tps, ref_ttft, _ = median_of_rounds(results[kind], c)
            paired = statistics.median(r[c].tokens_per_s / ref[c].tokens_per_s
                                       for r, ref in zip(results["rostra"], results[kind]))
            cells += [f"{ref_tps:.1f}", f"{tps / ref_tps:.2f}x", f"{paired:.2f}x"]
            ttfts.append(f"{ref_ttft:.0f}")
        rows.append("| " + " | ".join(cells + ttfts) + " |")
    return "\n".join(rows)


def token_mismatches(results: dict[str, list[dict[int, Level]]]) -> list[str]:
    """Levels that generated a different number of tokens than rostra's (different work done)."""
    expected = {c: lv.tokens for c, lv in results["rostra"][0].items()}
    return [f"{kind} round {n} c={c}: {lv.tokens} tokens, rostra {expected[c]}"
            for kind, rounds in results.items() for n, levels in enumerate(rounds, 1)
            for c, lv in levels.items() if lv.tokens != expected[c]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, help="checkpoint directory (default: the embedded SmolLM2-135M, "
                                                        "converted into .cache/smollm2-hf)")
    parser.add_argument("--reference-bin", default="transformers",
                        help="the `transformers` command of a venv with transformers[serving] installed")
    parser.add_argument("--servers", nargs="+", choices=SERVERS, default=list(SERVERS))
    parser.add_argument("--max-tokens", type=int, default=64, help="tokens generated per request")
    parser.add_argument("--requests-per-level", type=int, help="requests per level (default: max(4, 2 x concurrency))")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--rounds", type=int, default=3, help="runs of every level per server; medians reported")
    parser.add_argument("--parallel", type=int, default=4, help="rostra's batch size")
    parser.add_argument("--one-at-a-time", action="store_true",
                        help="a freshly started server per round, one server at a time (the method before paired rounds)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    if "rostra" not in args.servers:
        parser.error("--servers must include rostra (the ratios are rostra / reference)")
    if args.checkpoint is None:
        from rostra.embedded import embedded_model_path
        from rostra.engines.transformers_checkpoint import checkpoint_from_gguf

        args.checkpoint = checkpoint_from_gguf(embedded_model_path(), ROOT / ".cache" / "smollm2-hf")
    args.checkpoint = args.checkpoint.resolve()

    started = datetime.datetime.now().astimezone()
    version = rostra_version()
    loads: list[str] = []
    if args.one_at_a_time:
        results: dict[str, list[dict[int, Level]]] = {kind: [] for kind in args.servers}
        for n in range(args.rounds):  # servers alternate round by round: load from elsewhere hits all of them
            for kind in results:
                print(f"--- round {n + 1}/{args.rounds}: {kind}", flush=True)
                loads.append(f"{kind} round {n + 1}: {os.getloadavg()[0]:.2f}")
                results[kind].append(asyncio.run(bench_server(kind, args)))
            # Written after every round, so a run cut short (a machine busy for too long) keeps what it measured.
            write_report(args, results, loads, started, version, rounds_done=n + 1)
    else:
        results = asyncio.run(bench_paired(args, loads))
        write_report(args, results, loads, started, version, rounds_done=args.rounds)
    print("\n" + table(results) + f"\n\nwritten to {args.output}")


def write_report(args: argparse.Namespace, results: dict[str, list[dict[int, Level]]], loads: list[str],
                 started: datetime.datetime, version: str, rounds_done: int) -> None:
    result = table(results)
    mismatches = token_mismatches(results)
    command = " ".join(["python benchmarks/bench_transformers.py", *sys.argv[1:]])
    per_level = ", ".join(f"c={c}: {level.requests}" for c, level in results["rostra"][0].items())
    method = ("servers alternating round by round, each started afresh" if args.one_at_a_time else
              "every server up at once, each level run on each in turn (order rotating by round)")
    report = f"""# Serving benchmark: rostra's transformers engine vs `transformers serve`

- date: {started:%Y-%m-%d %H:%M %Z}
- machine: {machine_info()}
- rostra commit: {version}
- checkpoint: `{args.checkpoint.name}` (SmolLM2-135M-Instruct dequantized from the embedded Q4_1 GGUF), float32 on CPU
- {args.max_tokens} max tokens per request (streamed chat completions, temperature 0, no `ignore_eos`)
- requests per level: {per_level}; {rounds_done} of {args.rounds} rounds done, {method}, medians reported
- rostra: batch of {args.parallel}, its own default threads (CPU: prefills on every core, decode steps on all but one); the others: torch's default
- command: `{command}`

tok/s: generated tokens / wall time of the level (higher is better; ratio = rostra / reference).
TTFT: request sent to first content received (lower is better).

{result}

Token counts that differ from rostra's (different work): {"; ".join(mismatches) if mismatches else "none"}.

1-minute load average before each server started, or each round (2 cores; above ~0 means other work shared the CPU):
{"; ".join(loads)}.

## Every round

{rounds_table(results)}
"""
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(report)


if __name__ == "__main__":
    main()
