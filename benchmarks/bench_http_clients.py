"""The gateway's HTTP client on its own: httpx vs aiohttp, each making the request the remote engine
makes (a streamed chat completion POSTed to the fast upstream, its SSE lines read to the body's end)
on kept-alive connections.

    python benchmarks/bench_http_clients.py            # writes benchmarks/results/http-clients.md

Per client and round: at concurrency 1, the wall time per request (p50) and this process's CPU per
request; at --concurrency, requests/s and CPU per request. Clients interleaved round by round, order
rotating; medians over rounds. The upstream (fast_upstream.py) runs in its own process and answers in
~50 us, so what is left is the client's own cost.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import statistics
import sys
import time
from pathlib import Path
from typing import Awaitable, Callable

import aiohttp
import httpx
import orjson

from bench_gateway import start, wait_ready
from bench_serving import free_port, machine_info, rostra_version
from fast_upstream import MODEL, PIECES

HERE = Path(__file__).parent
BODY = {"model": MODEL, "messages": [{"role": "user", "content": "Say something short."}], "max_tokens": 16,
        "stream": True, "stream_options": {"include_usage": True}}
EXPECTED_LINES = len(PIECES) + 4  # role, pieces, finish, usage, [DONE]

Request = Callable[[], Awaitable[int]]  # one request; returns the number of `data:` lines read


class HttpxClient:
    """What rostra/engines/remote/pool.py does today: build_request(json=...), send(stream=True), aiter_lines."""

    def __init__(self, url: str):
        self.url = url
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(600, connect=5),
                                        limits=httpx.Limits(max_connections=None, max_keepalive_connections=256,
                                                            keepalive_expiry=30))

    async def request(self) -> int:
        request = self.client.build_request("POST", self.url, json=BODY, headers={"Authorization": "Bearer k"})
        response = await self.client.send(request, stream=True)
        lines = 0
        try:
            async for line in response.aiter_lines():
                lines += line.startswith("data:")
        finally:
            await response.aclose()
        return lines

    async def close(self) -> None:
        await self.client.aclose()


class AiohttpClient:
    """aiohttp: the body encoded with orjson, the stream read line by line from its StreamReader."""

    def __init__(self, url: str):
        self.url = url
        self.session: aiohttp.ClientSession | None = None

    async def request(self) -> int:
        if self.session is None:  # made inside the running loop
            self.session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=30),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=5, sock_read=600))
        lines = 0
        async with self.session.post(self.url, data=orjson.dumps(BODY),
                                     headers={"Authorization": "Bearer k",
                                              "Content-Type": "application/json"}) as response:
            async for line in response.content:
                lines += line.startswith(b"data:")
        return lines

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()


CLIENTS = {"httpx": HttpxClient, "aiohttp": AiohttpClient}


async def measure(make, url: str, requests: int, concurrency: int, seconds: float) -> dict[str, float]:
    client = make(url)
    try:
        for _ in range(50):  # warm: connections, lazy imports
            assert await client.request() == EXPECTED_LINES
        times = []
        cpu = time.process_time()
        for _ in range(requests):
            started = time.perf_counter()
            await client.request()
            times.append(time.perf_counter() - started)
        cpu1 = (time.process_time() - cpu) / requests
        done = 0
        end = time.monotonic() + seconds

        async def loop() -> None:
            nonlocal done
            while time.monotonic() < end:
                await client.request()
                done += 1

        cpu = time.process_time()
        wall = time.monotonic()
        await asyncio.gather(*(loop() for _ in range(concurrency)))
        wall = time.monotonic() - wall
        return {"p50": statistics.median(times) * 1e6, "cpu1": cpu1 * 1e6, "rate": done / wall,
                "cpuN": (time.process_time() - cpu) / done * 1e6}
    finally:
        await client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--output", type=Path, default=HERE / "results" / "http-clients.md")
    args = parser.parse_args()
    import uvloop

    started = datetime.datetime.now().astimezone()
    workdir = Path("/tmp")
    port = free_port()
    upstream = start("upstream-clients", [sys.executable, str(HERE / "fast_upstream.py"), "--port", str(port)],
                     port, workdir, None)
    names = list(CLIENTS)
    results: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    try:
        wait_ready(upstream)
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        for n in range(args.rounds):
            for name in names[n % len(names):] + names[:n % len(names)]:
                r = uvloop.run(measure(CLIENTS[name], url, args.requests, args.concurrency, args.seconds))
                results[name].append(r)
                print(f"round {n + 1} {name}: p50 {r['p50']:.0f} us, CPU {r['cpu1']:.0f} us/request at 1; "
                      f"{r['rate']:.0f} req/s, CPU {r['cpuN']:.0f} us/request at {args.concurrency}", flush=True)
    finally:
        upstream.stop()

    rows = [f"| client | p50 us (c=1) | CPU us/request (c=1) | req/s (c={args.concurrency}) "
            f"| CPU us/request (c={args.concurrency}) |", "|---|---:|---:|---:|---:|"]
    for name, rounds in results.items():
        cells = [f"{statistics.median(r[key] for r in rounds):.0f}" for key in ("p50", "cpu1", "rate", "cpuN")]
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    every = ["| round | client | p50 us | CPU us (c=1) | req/s | CPU us (c=N) |", "|---:|---|---:|---:|---:|---:|"]
    for n in range(args.rounds):
        for name in names:
            r = results[name][n]
            every.append(f"| {n + 1} | {name} | {r['p50']:.0f} | {r['cpu1']:.0f} | {r['rate']:.0f} | {r['cpuN']:.0f} |")
    table = "\n".join(rows)
    print("\n" + table)
    command = " ".join(["python benchmarks/bench_http_clients.py", *sys.argv[1:]])
    args.output.write_text(f"""# The gateway's HTTP client: httpx {httpx.__version__} vs aiohttp {aiohttp.__version__}

- date: {started:%Y-%m-%d %H:%M %Z}
- machine: {machine_info()}
- rostra commit: {rostra_version()}
- request: a streamed chat completion POSTed to benchmarks/fast_upstream.py, its {EXPECTED_LINES} SSE lines read
  to the body's end; kept-alive connections; uvloop
- {args.requests} requests at concurrency 1, then {args.seconds:g} s at concurrency {args.concurrency}; {args.rounds} rounds,
  clients interleaved, medians over rounds
- command: `{command}`

{table}

## Every round

{chr(10).join(every)}
""")
    print(f"\nwritten to {args.output}")


if __name__ == "__main__":
    main()
