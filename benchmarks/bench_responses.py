"""Responses API streaming vs Chat Completions streaming, on one rostra server and one model.

The same prompts, streamed through `POST /v1/chat/completions` and through `POST /v1/responses`
(with `store: true`, the default, which logs every event for replay, and with `store: false`),
at each concurrency level. The APIs take turns level by level inside one server process, in an
order that rotates every round, so load from elsewhere on the machine hits all of them alike; a
fresh server (and a fresh SQLite store) per round.

    python benchmarks/bench_responses.py            # embedded SmolLM2-135M, concurrency 1 4 8, 3 rounds

Reports aggregate generated tokens/s and TTFT per level and API (medians over rounds), with the
ratio Responses / Chat, and writes them to benchmarks/results/responses.md. The Responses API has
no `ignore_eos`, so neither API is given it: the prompts ask for a long story, which runs to the
token limit, and tokens are counted from each API's reported usage. Each API sends prompts of its
own, so none finds another's whole prompt in llama.cpp's prompt cache.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Awaitable, Callable, Iterator

import httpx

sys.path.insert(0, str(Path(__file__).parent))
import bench_serving  # noqa: E402
from bench_serving import PROMPT, Level  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "responses.md"
APIS = ("chat", "responses", "responses-nostore")

Request = Callable[[httpx.AsyncClient, str, int, int], Awaitable[tuple[int, float, int]]]


async def chat_request(client: httpx.AsyncClient, model: str, request_id: int, max_tokens: int) -> tuple[int, float, int]:
    return await bench_serving.one_request(client, model, request_id, max_tokens, ignore_eos=False)


def responses_request(store: bool) -> Request:
    async def one(client: httpx.AsyncClient, model: str, request_id: int, max_tokens: int) -> tuple[int, float, int]:
        """Stream one response; (output tokens, seconds to the first text delta, input tokens)."""
        body = {"model": model, "input": PROMPT.format(i=request_id), "max_output_tokens": max_tokens,
                "temperature": 0, "stream": True, "store": store}
        sent = time.perf_counter()
        ttft = None
        usage = None
        async with client.stream("POST", "/v1/responses", json=body) as reply:
            if reply.status_code != 200:
                raise RuntimeError(f"HTTP {reply.status_code}: {(await reply.aread())[:300]!r}")
            async for line in reply.aiter_lines():
                if not line.startswith("data: "):
                    continue
                event = json.loads(line[6:])  # every event parsed, as the chat client parses every chunk
                kind = event["type"]
                if kind == "response.output_text.delta" and ttft is None and event["delta"]:
                    ttft = time.perf_counter() - sent
                elif kind in ("response.completed", "response.incomplete", "response.failed"):
                    usage = event["response"].get("usage")
        if not usage:
            raise RuntimeError("the stream ended without usage")
        return usage["output_tokens"], ttft if ttft is not None else time.perf_counter() - sent, usage["input_tokens"]
    return one


REQUESTS: dict[str, Request] = {"chat": chat_request, "responses": responses_request(True),
                                "responses-nostore": responses_request(False)}


async def run_level(client: httpx.AsyncClient, model: str, request: Request, ids: Iterator[int], concurrency: int,
                    requests: int, max_tokens: int) -> Level:
    """As bench_serving.run_level, for any API: at most `concurrency` in flight, tok/s over the level's wall time."""
    pending = iter(range(requests))
    results: list[tuple[int, float, int]] = []

    async def worker() -> None:
        for _ in pending:
            results.append(await request(client, model, next(ids), max_tokens))

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    seconds = time.perf_counter() - started
    return Level(concurrency, requests, sum(r[0] for r in results), seconds, [r[1] for r in results],
                 statistics.mean(r[2] for r in results))


async def one_round(args: argparse.Namespace, number: int) -> dict[str, dict[int, Level]]:
    """A fresh server; every level, each API in turn (the order rotates with the round)."""
    port = bench_serving.free_port()
    data_dir = tempfile.TemporaryDirectory(prefix="bench-responses-")
    command = bench_serving.server_command("rostra", args, port) + ["--data-dir", data_dir.name]
    if args.store:
        command += ["--store", args.store]
    log = tempfile.NamedTemporaryFile(prefix="bench-responses-", suffix=".log", delete=False)
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    shift = number % len(args.apis)
    order = args.apis[shift:] + args.apis[:shift]
    results: dict[str, dict[int, Level]] = {api: {} for api in args.apis}
    limits = httpx.Limits(max_connections=max(args.concurrency) + 4, max_keepalive_connections=0)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=600, limits=limits) as client:
            model = await bench_serving.wait_ready(client, process)
            # Each API gets prompts of its own (numbers no other API sends): the APIs share one server, and
            # an API sending a prompt another just sent would find it whole in llama.cpp's prompt cache
            # (before 2026-11-23 they shared one sequence, and whichever API ran first at a level paid 3-7x
            # the TTFT of the others). The prompts ask for a long story: every request still runs to
            # max_tokens (the token counts printed show it).
            ids = {api: itertools.count(index * 1_000_000) for index, api in enumerate(args.apis)}
            # Warm-up, as many at once as the busiest level: first requests pay for allocations and cache faults.
            widest = max(args.concurrency)
            for api in order:
                await run_level(client, model, REQUESTS[api], ids[api], widest, widest, args.max_tokens)
            for concurrency in args.concurrency:
                requests = args.requests_per_level or max(4, 2 * concurrency)
                for api in order:
                    level = await run_level(client, model, REQUESTS[api], ids[api], concurrency, requests,
                                            args.max_tokens)
                    print(f"[{api}] c={concurrency}: {level.tokens_per_s:.1f} tok/s ({level.tokens} tokens), "
                          f"TTFT mean {level.ttft_mean_ms:.0f} ms, p50 {level.ttft_p50_ms:.0f} ms", flush=True)
                    results[api][concurrency] = level
    except Exception:
        print(f"failed; server exit code {process.poll()}; log tail ({log.name}):\n"
              + Path(log.name).read_text()[-3000:], file=sys.stderr)
        raise
    finally:
        bench_serving.stop_process(process)
        log.close()
        data_dir.cleanup()
    Path(log.name).unlink()
    return results


def table(results: dict[str, list[dict[int, Level]]]) -> str:
    """Medians over the rounds; "paired": the median of each round's own ratio to Chat (the APIs of a round
    ran seconds apart on one server, so their ratio is steadier than that of the medians)."""
    apis = [api for api in results if api != "chat"]
    head = "| concurrency | chat tok/s | " + " | ".join(f"{api} tok/s | ratio | paired" for api in apis) + \
           " | chat TTFT p50 ms | " + " | ".join(f"{api} TTFT p50 ms" for api in apis) + " |"
    rows = [head, "|" + "---:|" * (2 + 3 * len(apis) + 1 + len(apis))]
    for c in results["chat"][0]:
        tps, _, p50 = bench_serving.median_of_rounds(results["chat"], c)
        cells = [f"{c}", f"{tps:.1f}"]
        ttfts = [f"{p50:.0f}"]
        for api in apis:
            api_tps, _, api_p50 = bench_serving.median_of_rounds(results[api], c)
            paired = statistics.median(r[c].tokens_per_s / chat[c].tokens_per_s
                                       for r, chat in zip(results[api], results["chat"]))
            cells += [f"{api_tps:.1f}", f"{api_tps / tps:.2f}x", f"{paired:.2f}x"]
            ttfts.append(f"{api_p50:.0f}")
        rows.append("| " + " | ".join(cells + ttfts) + " |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="GGUF file (default: the embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--apis", nargs="+", choices=APIS, default=list(APIS),
                        help="what to compare (chat is always measured: the ratios are to it)")
    parser.add_argument("--max-tokens", type=int, default=128, help="tokens generated per request (at most)")
    parser.add_argument("--requests-per-level", type=int, help="requests per level (default: max(4, 2 x concurrency))")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--rounds", type=int, default=3, help="fresh servers; medians reported")
    parser.add_argument("--parallel", type=int, default=8, help="server slots")
    parser.add_argument("--max-model-len", type=int, default=8192, help="context per slot")
    parser.add_argument("--threads", type=int, help="llama.cpp threads (default: llama.cpp's choice)")
    parser.add_argument("--store", metavar="URL", help="the server's --store (default: SQLite in a fresh directory)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    if "chat" not in args.apis:
        args.apis.insert(0, "chat")
    if args.model is None:
        from rostra.embedded import embedded_model_path

        args.model = str(embedded_model_path())

    started = datetime.datetime.now().astimezone()
    version = bench_serving.rostra_version()
    results: dict[str, list[dict[int, Level]]] = {api: [] for api in args.apis}
    for n in range(args.rounds):
        print(f"--- round {n + 1}/{args.rounds}", flush=True)
        for api, levels in asyncio.run(one_round(args, n)).items():
            results[api].append(levels)
    result = table(results)
    print("\n" + result)

    command = " ".join(["python benchmarks/bench_responses.py", *sys.argv[1:]])
    per_level = ", ".join(f"c={c}: {level.requests}" for c, level in results["chat"][0].items())
    report = f"""# Responses API streaming vs Chat Completions streaming (one rostra server)

- date: {started:%Y-%m-%d %H:%M %Z}
- machine: {bench_serving.machine_info()}
- rostra commit: {version}
- model: `{Path(args.model).name}` ({Path(args.model).stat().st_size / 1e6:.0f} MB)
- at most {args.max_tokens} generated tokens per request (streamed, temperature 0, no `ignore_eos`)
- requests per level: {per_level}; {args.rounds} rounds (a fresh server each), APIs taking turns, medians reported
- server: {args.parallel} slots, {args.max_model_len} context per slot, threads: {args.threads or "llama.cpp default"},
  store: {args.store or "SQLite (default)"}
- command: `{command}`

tok/s: generated tokens / wall time of the level (ratio = API / chat; the goal is >= 0.95x).
TTFT: request sent to first text received.

{result}

## Every round

{bench_serving.rounds_table(results)}
"""
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(report)
    print(f"\nwritten to {args.output}")


if __name__ == "__main__":
    main()
