"""Edit benchmark: a source file (300-600 tokens) in the prompt, asked back with a small change.

Most of such an answer copies the prompt, which is where speculative decoding from the prompt (n-gram drafts)
can decode several tokens per step. Servers, all on the same GGUF, started once and run in paired rounds
(bench_serving.py's method and helpers: each level on one server right after the other, order rotating):

- `rostra`: rostra as it starts by default (`--speculative auto`: drafting only if measured to pay at load);
- `rostra-on`: rostra with `--speculative on` (drafting forced), to show what drafting does on this model;
- `reference`: llama.cpp's own server (xllamacpp) at its defaults (no speculation).

    python benchmarks/bench_edit.py                # embedded SmolLM2-135M, concurrency 1 and 4

Every request is a streamed chat completion at temperature 0, without ignore_eos (the answer ends where the model
ends it, up to --max-tokens); tok/s is completion tokens over the level's wall time. The answers of each rostra
server are compared with the reference's: the share that is identical text shows what batched verification
changes (see rostra/engines/llamacpp_speculation.py). Writes benchmarks/results/edit.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_serving import chat_stream, machine_info, rostra_version, running_server  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results" / "edit.md"
# Files of this repository, each cut to its first lines (300-600 tokens with the instruction), and a change.
FILES = [
    ("rostra/engines/llamacpp_http.py", 40, "Rename the class LoopbackError to LoopbackFailure everywhere."),
    ("rostra/config.py", 30, "Change the default port from 8000 to 9000."),
    ("benchmarks/default_length.py", 45, "Add a comment line '# benchmark' at the top of the file."),
    ("rostra/engines/embed_batcher.py", 45, "Rename the variable `log` to `logger`."),
    ("rostra/engines/transformers_tokens.py", 40, "Add a blank line at the end of the file."),
    ("rostra/engines/registry.py", 38, "Change the help of --script to say 'JSON lines'."),
]


def edit_messages(index: int) -> list[dict]:
    path, lines, change = FILES[index % len(FILES)]
    source = "\n".join((ROOT / path).read_text().splitlines()[:lines])
    return [{"role": "user", "content": f"Here is the file {path}:\n```python\n{source}\n```\n\n{change} "
                                        "Reply with the whole changed file only."}]


@dataclass
class Level:
    concurrency: int
    seconds: float
    tokens: int
    prompt_tokens: float
    texts: dict[int, str] = field(default_factory=dict)  # request index -> answer

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds


async def one_edit(client: httpx.AsyncClient, model: str, index: int, max_tokens: int) -> tuple[str, int, int]:
    body = {"model": model, "messages": edit_messages(index), "max_tokens": max_tokens, "temperature": 0,
            "stream": True, "stream_options": {"include_usage": True}}
    text, usage = [], None
    async for event in chat_stream(client, body):
        usage = event.get("usage") or usage
        for choice in event.get("choices") or []:
            text.append((choice.get("delta") or {}).get("content") or "")
    assert usage is not None
    return "".join(text), usage["completion_tokens"], usage["prompt_tokens"]


async def run_level(client: httpx.AsyncClient, model: str, concurrency: int, requests: int, max_tokens: int) -> Level:
    pending = iter(range(requests))
    results: dict[int, tuple[str, int, int]] = {}

    async def worker() -> None:
        for index in pending:
            results[index] = await one_edit(client, model, index, max_tokens)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    seconds = time.perf_counter() - started
    return Level(concurrency, seconds, sum(r[1] for r in results.values()),
                 statistics.mean(r[2] for r in results.values()), {i: r[0] for i, r in results.items()})


async def bench(args: argparse.Namespace) -> dict[str, list[dict[int, Level]]]:
    results: dict[str, list[dict[int, Level]]] = {kind: [] for kind in args.kinds}
    async with contextlib.AsyncExitStack() as stack:
        servers = {kind: await stack.enter_async_context(running_server(kind, args)) for kind in args.kinds}
        for client, model in servers.values():  # warm-up: allocations, page faults, first prompts
            await run_level(client, model, 2, 2, 32)
        for n in range(args.rounds):
            print(f"--- round {n + 1}/{args.rounds}", flush=True)
            order = args.kinds[n % len(args.kinds):] + args.kinds[:n % len(args.kinds)]
            for kind in args.kinds:
                results[kind].append({})
            for c in args.concurrency:
                for kind in order:
                    client, model = servers[kind]
                    level = await run_level(client, model, c, args.requests or max(3, 2 * c), args.max_tokens)
                    results[kind][n][c] = level
                    print(f"[{kind}] c={c}: {level.tokens_per_s:.1f} tok/s ({level.tokens} tokens in "
                          f"{level.seconds:.1f} s, {level.prompt_tokens:.0f} prompt tokens)", flush=True)
    return results


def report_table(results: dict[str, list[dict[int, Level]]], concurrency: list[int]) -> str:
    reference = results["reference"]
    rows = ["| concurrency | server | tok/s (median) | paired ratio to reference (median) | ratios per round "
            "| answers identical to the reference's |", "|---:|---|---:|---:|---|---:|"]
    for c in concurrency:
        for kind, rounds in results.items():
            tps = statistics.median(r[c].tokens_per_s for r in rounds)
            ratios = [r[c].tokens_per_s / ref[c].tokens_per_s for r, ref in zip(rounds, reference)]
            same = sum(text == ref[c].texts.get(i) for r, ref in zip(rounds, reference) for i, text in r[c].texts.items())
            total = sum(len(r[c].texts) for r in rounds)
            rows.append(f"| {c} | {kind} | {tps:.1f} | {statistics.median(ratios):.2f}x | "
                        f"{' '.join(f'{x:.2f}' for x in ratios)} | {same}/{total} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="GGUF file (default: the embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--max-tokens", type=int, default=256, help="at most this many tokens per answer")
    parser.add_argument("--requests", type=int, help="requests per level (default: max(3, 2 x concurrency))")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--parallel", type=int, default=4, help="server slots, for every server")
    parser.add_argument("--max-model-len", type=int, default=4096, help="context per slot, for every server")
    parser.add_argument("--threads", type=int, help="CPU threads, for every server (default: llama.cpp's choice)")
    parser.add_argument("--kinds", nargs="+", default=["rostra", "rostra-on", "reference"],
                        help="servers to compare (reference is required)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.model is None:
        from rostra.embedded import embedded_model_path

        args.model = str(embedded_model_path())
    # Each rostra its own store directory (one process per SQLite store).
    args.rostra_flags = {kind: ["--data-dir", tempfile.mkdtemp(prefix=f"bench-{kind}-"), *flags] for kind, flags in
                         {"rostra": [], "rostra-on": ["--speculative", "on"], "rostra-off": ["--speculative", "off"]}.items()}
    started = datetime.datetime.now().astimezone()
    results = asyncio.run(bench(args))
    table = report_table(results, args.concurrency)
    print("\n" + table)
    command = " ".join(["python benchmarks/bench_edit.py", *sys.argv[1:]])
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(f"""# Edit benchmark: rostra (speculation auto / on) vs llama.cpp's server (its defaults)

- date: {started:%Y-%m-%d %H:%M %Z}
- machine: {machine_info()}
- rostra commit: {rostra_version()}
- model: `{Path(args.model).name}`
- requests: a file of this repository (300-600 tokens) asked back with a small change; at most {args.max_tokens}
  tokens, temperature 0, streamed; {args.rounds} paired rounds (order rotating)
- servers: {args.parallel} slots, {args.max_model_len} context per slot, threads: {args.threads or "llama.cpp default"}
- command: `{command}`

{table}
""")
    print(f"\nwritten to {args.output}")


if __name__ == "__main__":
    main()
