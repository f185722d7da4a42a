"""Serving benchmark: rostra against llama.cpp's own server, on the same GGUF file.

Both servers are started and warmed up; then, round after round, each concurrency level of
streamed chat completions runs on one server and right after on the other (only one works at a
time, the other idles, so they never compete for the CPU). Every request generates
exactly --max-tokens tokens (`ignore_eos`), so the servers do the same amount of work.

    python benchmarks/bench_serving.py            # embedded SmolLM2-135M, concurrency 1 4 8

Reports aggregate generated tokens/s and time-to-first-token (TTFT) per level, with the
ratio rostra / reference, and writes them to benchmarks/results/serving.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import itertools
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
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator, Sequence, TypeVar, cast

import httpx

RESULTS = Path(__file__).parent / "results" / "serving.md"
T = TypeVar("T")
KINDS = ("rostra", "reference")
PROMPT = "Write a long story about a lighthouse keeper who finds a message in a bottle. (request {i})"


def llama_server_params(args: argparse.Namespace, port: int):
    """llama.cpp's server configured as rostra's engine configures it, listening on loopback `port`."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.n_parallel = args.parallel
    # rostra gives each slot the whole context window, unshared: do the same here.
    params.n_ctx = args.max_model_len * args.parallel
    params.kv_unified = False
    if args.threads:
        params.cpuparams.n_threads = params.cpuparams_batch.n_threads = args.threads
    params.port, params.hostnames = port, ["127.0.0.1"]
    return params


def cpu_seconds(pid: int, thread: int | None = None) -> float:
    """User + system CPU of a process so far (its threads included), or of one of its threads."""
    stat = Path(f"/proc/{pid}/stat" if thread is None else f"/proc/{pid}/task/{thread}/stat").read_text()
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_reference_server(args: argparse.Namespace) -> None:
    """The reference: llama.cpp's HTTP server as xllamacpp embeds it, configured like rostra configures it."""
    import threading

    import xllamacpp

    server = xllamacpp.Server(llama_server_params(args, args.port))  # loads the model and starts listening
    print(f"reference server listening on {server.listening_address}", flush=True)
    threading.Event().wait()  # serve until the benchmark terminates this process


def run_relay_server(args: argparse.Namespace) -> None:
    """A control for rostra's own cost: llama.cpp's server in a Python process, as rostra runs it, behind a
    byte relay on the process's event loop (one read and one write per chunk, no Python per token beyond
    that). What it loses against the plain reference is what the extra hop costs; the rest of rostra's gap
    is rostra's own work per token."""
    import xllamacpp

    upstream = free_port()
    _server = xllamacpp.Server(llama_server_params(args, upstream))  # serves while referenced: until this process ends

    class Back(asyncio.Protocol):
        def __init__(self, front: "Front"):
            self.front = front

        def data_received(self, data: bytes) -> None:
            self.front.transport.write(data)

        def connection_lost(self, exc: Exception | None) -> None:
            self.front.transport.close()

    class Front(asyncio.Protocol):
        transport: asyncio.Transport
        back: asyncio.Transport | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = cast(asyncio.Transport, transport)  # a TCP connection (uvloop's: no subclass)
            self.early: list[bytes] = []  # what the client sent before the upstream connection was up
            asyncio.ensure_future(self.connect())

        async def connect(self) -> None:
            try:
                self.back, _ = await asyncio.get_running_loop().create_connection(lambda: Back(self), "127.0.0.1", upstream)
            except OSError:
                self.transport.close()
                return
            for data in self.early:
                self.back.write(data)

        def data_received(self, data: bytes) -> None:
            if self.back is None:
                self.early.append(data)
            else:
                self.back.write(data)

        def connection_lost(self, exc: Exception | None) -> None:
            if self.back is not None:
                self.back.close()

    async def relay() -> None:
        listener = await asyncio.get_running_loop().create_server(Front, "127.0.0.1", args.port)
        print(f"relay on {args.port} to llama.cpp's server on {upstream}", flush=True)
        await listener.serve_forever()

    import uvloop

    uvloop.run(relay())  # until the benchmark terminates this process


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
    if kind == "rostra" and getattr(args, "measure", "rostra") == "relay":  # (other scripts: no such option)
        return [sys.executable, __file__, "--relay-server", "--model", args.model, *common]
    if kind.startswith("rostra"):  # (bench_edit.py runs several: rostra-on, rostra-auto, with their own flags)
        return [sys.executable, "-m", "rostra.cli", "serve", args.model, "--log-level", "warning", *common,
                *getattr(args, "rostra_flags", {}).get(kind, [])]
    return [sys.executable, __file__, "--reference-server", "--model", args.model, *common]


async def wait_healthy(client: httpx.AsyncClient, process: subprocess.Popen, timeout: float = 300) -> None:
    """Until /health answers 200 (the process exiting first, or the timeout, is an error)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with code {process.returncode}")
        try:
            if (await client.get("/health")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.5)
    raise RuntimeError("server did not become ready in time")


async def wait_ready(client: httpx.AsyncClient, process: subprocess.Popen, timeout: float = 300) -> str:
    """Wait for /health, then return the model name the server lists."""
    await wait_healthy(client, process, timeout)
    return (await client.get("/v1/models")).json()["data"][0]["id"]


async def chat_stream(client: httpx.AsyncClient, body: dict) -> AsyncIterator[dict]:
    """The events of one streamed chat completion, decoded, as they arrive (an HTTP error raises)."""
    async with client.stream("POST", "/v1/chat/completions", json=body) as reply:
        if reply.status_code != 200:
            raise RuntimeError(f"HTTP {reply.status_code}: {(await reply.aread())[:300]!r}")
        async for line in reply.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                yield json.loads(line[6:])


async def one_request(client: httpx.AsyncClient, model: str, request_id: int, max_tokens: int,
                      ignore_eos: bool = True) -> tuple[int, float, int]:
    """Stream one chat completion; return (generated tokens, seconds to the first content, prompt tokens).
    `ignore_eos=False` leaves the field out, for servers that reject it (`transformers serve`)."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": PROMPT.format(i=request_id)}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "seed": 1234,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if ignore_eos:
        body["ignore_eos"] = True  # always generate max_tokens, whatever the model would say
    sent = time.perf_counter()
    ttft = None
    chunks = 0
    usage = None
    async for event in chat_stream(client, body):
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


async def run_level(client: httpx.AsyncClient, model: str, ids: Iterator[int], concurrency: int, requests: int,
                    max_tokens: int, ignore_eos: bool = True) -> Level:
    """`requests` requests, at most `concurrency` in flight at once; throughput over the level's wall time."""
    pending = iter(range(requests))
    results: list[tuple[int, float, int]] = []

    async def worker() -> None:
        for _ in pending:  # workers share one iterator, so each request runs once
            results.append(await one_request(client, model, next(ids), max_tokens, ignore_eos))

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    seconds = time.perf_counter() - started
    return Level(concurrency, requests, sum(r[0] for r in results), seconds, [r[1] for r in results],
                 statistics.mean(r[2] for r in results))


async def measure_level(client: httpx.AsyncClient, model: str, kind: str, ids: Iterator[int], concurrency: int,
                        args: argparse.Namespace, ignore_eos: bool = True) -> Level:
    """One level on one server, printed as it ends."""
    requests = args.requests_per_level or max(4, 2 * concurrency)
    level = await run_level(client, model, ids, concurrency, requests, args.max_tokens, ignore_eos=ignore_eos)
    expected = requests * args.max_tokens
    if ignore_eos and level.tokens != expected:  # without ignore_eos a model may stop early
        print(f"[{kind}] warning: {level.tokens} tokens generated, expected {expected}", flush=True)
    print(f"[{kind}] c={concurrency}: {level.tokens_per_s:.1f} tok/s ({level.tokens} tokens), "
          f"TTFT mean {level.ttft_mean_ms:.0f} ms, p50 {level.ttft_p50_ms:.0f} ms, "
          f"{level.prompt_tokens:.0f} prompt tokens", flush=True)
    return level


async def warm_up(client: httpx.AsyncClient, model: str, ids: Iterator[int], args: argparse.Namespace,
                  ignore_eos: bool = True) -> None:
    """First requests pay for allocations and cache faults that steady serving does not."""
    await run_level(client, model, ids, 2, 2, args.max_tokens, ignore_eos=ignore_eos)


async def measure_levels(client: httpx.AsyncClient, model: str, kind: str, args: argparse.Namespace,
                         ignore_eos: bool = True) -> dict[int, Level]:
    """A warm-up, then every level of `args.concurrency` on one server."""
    # Every request gets its own number, so no prompt exactly repeats an earlier one (the servers
    # still reuse the shared prefix from their prompt cache, as in real use); every server gets
    # the same sequence of prompts.
    ids = itertools.count()
    await warm_up(client, model, ids, args, ignore_eos)
    return {c: await measure_level(client, model, kind, ids, c, args, ignore_eos) for c in args.concurrency}


@contextlib.asynccontextmanager
async def launched(kind: str, command: Callable[[int, str], list[str]],
                   ready: Callable[[httpx.AsyncClient, subprocess.Popen], Awaitable[Any]],
                   limits: httpx.Limits | None = None, env: dict[str, str] | None = None, timeout: float = 600,
                   ) -> AsyncIterator[tuple[httpx.AsyncClient, subprocess.Popen, Any]]:
    """A server process (any benchmark's): `command(port, data_dir)` started on a free port with a fresh data
    directory, its output to a temporary log; once `ready(client, process)` has answered, a client for it, the
    process and that answer. A failure prints the log's tail; the process is stopped on leaving."""
    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix=f"bench-{kind}-", suffix=".log", delete=False)
    with tempfile.TemporaryDirectory(prefix="bench-data-") as data_dir:
        process = subprocess.Popen(command(port, data_dir), stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=timeout,
                                         limits=limits or httpx.Limits()) as client:
                answer = await ready(client, process)
                print(f"[{kind}] ready on port {port}", flush=True)
                yield client, process, answer
        except Exception:
            print(f"[{kind}] failed; server exit code {process.poll()}; log tail ({log.name}):\n"
                  + Path(log.name).read_text()[-3000:], file=sys.stderr)
            raise
        finally:
            stop_process(process)
            log.close()
    os.unlink(log.name)


@contextlib.asynccontextmanager
async def running_server(kind: str, args: argparse.Namespace) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    """A started server of `kind`, ready: a client for it and the model name it lists. Stopped on leaving."""
    # One connection per request, no keep-alive: llama.cpp's HTTP server may close an idle kept-alive
    # connection just as the client reuses it ("Server disconnected"). A local connect costs well under 1 ms.
    limits = httpx.Limits(max_connections=max(args.concurrency) + 4, max_keepalive_connections=0)
    async with launched(kind, lambda port, _: server_command(kind, args, port), wait_ready, limits) as (
            client, _, model):
        print(f"[{kind}] model {model!r}", flush=True)
        yield client, model


async def bench_server(kind: str, args: argparse.Namespace) -> dict[int, Level]:
    async with running_server(kind, args) as (client, model):
        return await measure_levels(client, model, kind, args)


async def bench_paired(args: argparse.Namespace) -> dict[str, list[dict[int, Level]]]:
    """Both servers started once, then every round runs each level on one server right after the other
    (the other idles meanwhile: llama.cpp's threads sleep, rostra's loop waits), rostra first in even
    rounds and second in odd ones. Load from elsewhere on the machine changes over minutes; two runs
    seconds apart see nearly the same, so the ratio of each pair is far steadier than that of rounds
    minutes apart."""
    async with contextlib.AsyncExitStack() as stack:
        servers = {kind: await stack.enter_async_context(running_server(kind, args)) for kind in KINDS}
        ids = {kind: itertools.count() for kind in KINDS}  # the same prompts for both, in the same order
        for kind, (client, model) in servers.items():
            await warm_up(client, model, ids[kind], args)
        return await paired_rounds(KINDS, args, lambda kind, c: measure_level(*servers[kind], kind, ids[kind], c,
                                                                               args))


async def paired_rounds(kinds: Sequence[str], args: argparse.Namespace, measure: Callable[[str, int], Awaitable[T]],
                        loads: list[str] | None = None) -> dict[str, list[dict[int, T]]]:
    """`args.rounds` rounds, each running every level (`args.concurrency`) on each server in turn, seconds
    apart, the order rotating by round: `measure(kind, c)` per level; each round's machine load printed (and
    added to `loads`)."""
    results: dict[str, list[dict[int, T]]] = {kind: [] for kind in kinds}
    for n in range(args.rounds):
        load = f"round {n + 1}: {os.getloadavg()[0]:.2f}"
        print(f"--- round {n + 1}/{args.rounds} (load {load.split(': ')[1]})", flush=True)
        if loads is not None:
            loads.append(load)
        order = [*kinds[n % len(kinds):], *kinds[:n % len(kinds)]]
        for kind in kinds:
            results[kind].append({})
        for c in args.concurrency:
            for kind in order:
                results[kind][n][c] = await measure(kind, c)
    return results


def median_of_rounds(rounds: list[dict[int, Level]], c: int) -> tuple[float, float, float]:
    """(tok/s, TTFT mean ms, TTFT p50 ms) of one level, each the median over the rounds."""
    levels = [r[c] for r in rounds]
    return (statistics.median(lv.tokens_per_s for lv in levels), statistics.median(lv.ttft_mean_ms for lv in levels),
            statistics.median(lv.ttft_p50_ms for lv in levels))


def table(rostra: list[dict[int, Level]], reference: list[dict[int, Level]]) -> str:
    """Medians over the rounds; the paired columns are the median of each round's own ratio (tok/s) or
    difference (TTFT p50): the steadier figures when the rounds ran the two servers back to back (bench_paired)."""
    rows = [
        "| concurrency | rostra tok/s | reference tok/s | ratio | paired ratio | rostra TTFT mean / p50 ms "
        "| reference TTFT mean / p50 ms | TTFT ratio (mean) | TTFT p50 paired difference |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in rostra[0]:
        tps, mean, p50 = median_of_rounds(rostra, c)
        ref_tps, ref_mean, ref_p50 = median_of_rounds(reference, c)
        pairs = list(zip(rostra, reference))
        paired = statistics.median(r[c].tokens_per_s / ref[c].tokens_per_s for r, ref in pairs)
        ttft_difference = statistics.median(r[c].ttft_p50_ms - ref[c].ttft_p50_ms for r, ref in pairs)
        rows.append(f"| {c} | {tps:.1f} | {ref_tps:.1f} | {tps / ref_tps:.2f}x | {paired:.2f}x | {mean:.0f} / {p50:.0f} "
                    f"| {ref_mean:.0f} / {ref_p50:.0f} | {mean / ref_mean:.2f}x | {ttft_difference:+.0f} ms |")
    return "\n".join(rows)


def rounds_table(results: dict[str, list[dict[int, Level]]]) -> str:
    """Every round's figures, so the spread behind the medians is visible."""
    rows = ["| round | server | concurrency | tok/s | TTFT mean / p50 ms |", "|---:|---|---:|---:|---:|"]
    for kind, rounds in results.items():
        for n, levels in enumerate(rounds, 1):
            for c, lv in levels.items():
                rows.append(f"| {n} | {kind} | {c} | {lv.tokens_per_s:.1f} | {lv.ttft_mean_ms:.0f} / {lv.ttft_p50_ms:.0f} |")
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


def rostra_version() -> str:
    """The commit measured, so results can be matched to code (`-dirty`: uncommitted changes under rostra/)."""
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "rostra"], cwd=root, capture_output=True,
                               text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("-dirty" if dirty else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="GGUF file (default: the embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--max-tokens", type=int, default=128, help="tokens generated per request")
    parser.add_argument("--requests-per-level", type=int, help="requests per level (default: max(4, 2 x concurrency))")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--rounds", type=int, default=3, help="runs of every level per server; medians reported")
    parser.add_argument("--parallel", type=int, default=8, help="server slots, for both servers")
    parser.add_argument("--max-model-len", type=int, default=8192, help="context per slot, for both servers")
    parser.add_argument("--threads", type=int, help="CPU threads, for both servers (default: llama.cpp's choice)")
    parser.add_argument("--one-at-a-time", action="store_true",
                        help="run each round on a freshly started server, one server at a time (the method before "
                             "2026-11-23's paired rounds)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--measure", choices=["rostra", "relay"], default="rostra",
                        help="the server measured against the reference: rostra, or (a control) llama.cpp's server "
                             "behind a byte relay in the same process")
    parser.add_argument("--reference-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--relay-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.model is None:
        from rostra.embedded import embedded_model_path

        args.model = str(embedded_model_path())
    if args.reference_server:
        return run_reference_server(args)
    if args.relay_server:
        return run_relay_server(args)

    started = datetime.datetime.now().astimezone()
    version = rostra_version()
    if args.one_at_a_time:
        results: dict[str, list[dict[int, Level]]] = {kind: [] for kind in KINDS}
        # Alternate the servers round by round, so a burst of load from elsewhere on the machine
        # hits both rather than one; the medians over rounds then shrug off a single bad round.
        for n in range(args.rounds):
            for kind in KINDS:
                print(f"--- round {n + 1}/{args.rounds}: {kind}", flush=True)
                results[kind].append(asyncio.run(bench_server(kind, args)))
    else:
        results = asyncio.run(bench_paired(args))
    result = table(results["rostra"], results["reference"])
    print("\n" + result)

    command = " ".join(["python benchmarks/bench_serving.py", *sys.argv[1:]])
    method = ("servers alternating round by round, each started afresh" if args.one_at_a_time else
              "both servers up, each level run on one right after the other (order alternating by round)")
    per_level = ", ".join(f"c={c}: {level.requests}" for c, level in results["rostra"][0].items())
    report = f"""# Serving benchmark: rostra vs llama.cpp server

- date: {started:%Y-%m-%d %H:%M %Z}
- machine: {machine_info()}
- rostra commit: {version}{" (measured: the byte relay, not rostra)" if args.measure == "relay" else ""}
- model: `{Path(args.model).name}` ({Path(args.model).stat().st_size / 1e6:.0f} MB)
- {args.max_tokens} generated tokens per request (streamed chat completions, temperature 0, `ignore_eos`)
- requests per level: {per_level}; {args.rounds} rounds, {method}, medians reported
- both servers: {args.parallel} slots, {args.max_model_len} context per slot, threads: {args.threads or "llama.cpp default"}
- command: `{command}`

tok/s: generated tokens / wall time of the level (higher is better; ratio = rostra / reference).
TTFT: request sent to first content received (lower is better; ratio = rostra / reference).

{result}

## Every round

{rounds_table(results)}
"""
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(report)
    print(f"\nwritten to {args.output}")


def stop_process(process: subprocess.Popen, grace: float = 30) -> None:
    """SIGTERM, then SIGKILL if it has not exited within `grace` seconds."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


if __name__ == "__main__":
    main()
