"""Gateway overhead: rostra in remote mode and the LiteLLM proxy, each in front of the same fast
upstream, against that upstream called directly.

    python benchmarks/bench_gateway.py      # needs LiteLLM in /work/venv-litellm (--litellm)

The upstream (fast_upstream.py) answers at once, so what a gateway adds is its own cost. Per
target, per round: latency at concurrency 1 (p50/p99 of whole non-streamed requests and of
streams to their last byte) and sustained requests/s at --concurrency for --seconds, streamed
and not. Targets are interleaved round by round; medians over the rounds are reported and
written, with every round, to benchmarks/results/gateway.md.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

# Siblings in benchmarks/ (the script's own directory is on sys.path).
from bench_serving import free_port, machine_info, rostra_version, stop_process
from fast_upstream import MODEL, PIECES, TEXT
from load_client import Load, Target, build_request, latencies, run, sustained_in_process

HERE = Path(__file__).parent
RESULTS = HERE / "results" / "gateway.md"
API_KEY = "sk-bench-0123456789abcdef0123456789abcdef"  # both gateways require a key, as deployed
MESSAGES = [{"role": "user", "content": "Say something short."}]
TARGETS = ("direct", "rostra", "litellm")


@dataclass
class Server:
    name: str
    port: int
    process: subprocess.Popen
    log: Path

    def stop(self) -> None:
        stop_process(self.process, grace=20)


def start(name: str, command: list[str], port: int, workdir: Path, cpus: set[int] | None,
          env: dict | None = None) -> Server:
    """Start a server process; `env` adds variables (None: removes one)."""
    log = workdir / f"{name}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=workdir,
                                   env={k: v for k, v in {**os.environ, **(env or {})}.items() if v is not None})
    if cpus:  # set on the running process: its threads are started later and inherit it
        os.sched_setaffinity(process.pid, cpus)
    return Server(name, port, process, log)


def wait_ready(server: Server, timeout: float = 120) -> None:
    """Until the server lists the fast model on GET /v1/models."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"{server.name} exited with code {server.process.returncode}:\n"
                               + server.log.read_text(errors="replace")[-3000:])
        try:
            reply = httpx.get(f"http://127.0.0.1:{server.port}/v1/models",
                              headers={"Authorization": f"Bearer {API_KEY}"}, timeout=5)
            if reply.status_code == 200 and MODEL in [m["id"] for m in reply.json()["data"]]:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{server.name} was not ready in {timeout:.0f} s; log {server.log}")


def litellm_config(upstream_port: int) -> str:
    # JSON is YAML: no YAML writer needed.
    return json.dumps({
        "model_list": [{"model_name": MODEL, "litellm_params": {
            "model": f"openai/{MODEL}", "api_base": f"http://127.0.0.1:{upstream_port}/v1", "api_key": "dummy"}}],
        "general_settings": {"master_key": API_KEY},
    }, indent=2)


def start_servers(args: argparse.Namespace, workdir: Path) -> dict[str, Server]:
    """The upstream, then the gateways in front of it; {target: server it is measured on}."""
    gateway_cpus, other_cpus = ({0}, {1}) if args.pin else (None, None)
    upstream_port = free_port()
    upstream = start("upstream", [sys.executable, str(HERE / "fast_upstream.py"), "--port", str(upstream_port)],
                     upstream_port, workdir, other_cpus)
    servers = {"direct": upstream}
    if "rostra" in args.targets:
        port = free_port()
        servers["rostra"] = start("rostra", [
            sys.executable, "-m", "rostra.cli", "serve", "--engine", "remote",
            "--upstream", f"http://127.0.0.1:{upstream_port}/v1", "--port", str(port),
            "--data-dir", str(workdir / "rostra-data"), "--log-level", "warning"],
            port, workdir, gateway_cpus, env={"ROSTRA_API_KEY": API_KEY})
    if args.baseline:  # another rostra (a checkout's package directory) beside this one, same flags
        port = free_port()
        servers["baseline"] = start("baseline", [
            sys.executable, "-m", "rostra.cli", "serve", "--engine", "remote",
            "--upstream", f"http://127.0.0.1:{upstream_port}/v1", "--port", str(port),
            "--data-dir", str(workdir / "baseline-data"), "--log-level", "warning"],
            port, workdir, gateway_cpus, env={"ROSTRA_API_KEY": API_KEY, "PYTHONPATH": str(args.baseline)})
    if "litellm" in args.targets:
        config = workdir / "litellm.yaml"
        config.write_text(litellm_config(upstream_port))
        port = free_port()
        servers["litellm"] = start("litellm", [
            str(args.litellm / "bin" / "litellm"), "--config", str(config), "--port", str(port),
            "--host", "127.0.0.1", "--num_workers", "1"], port, workdir, gateway_cpus, env={
            "LITELLM_LOG": "ERROR",  # no per-request logging
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # don't fetch the price list from the internet at start
            "LITELLM_TELEMETRY_DISABLED": "true",
            "DATABASE_URL": None,  # no database: no spend logs, keys checked against the master key only
        })
    for server in servers.values():
        wait_ready(server)
    return servers


def check_with_sdk(port: int) -> None:
    """The openai SDK must read both answers: a gateway that mangles them would be measured for nothing."""
    from openai import OpenAI

    client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=API_KEY, max_retries=0)
    reply = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=16)
    assert reply.choices[0].message.content == TEXT, reply
    text, usage = "", None
    for chunk in client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=16, stream=True,
                                                stream_options={"include_usage": True}):
        text += "".join(choice.delta.content or "" for choice in chunk.choices)
        usage = chunk.usage or usage
    assert text == TEXT and usage and usage.completion_tokens == len(PIECES), (text, usage)
    client.close()


def targets_for(port: int) -> dict[str, Target]:
    """The two request kinds measured on a server, prebuilt."""
    bodies = {
        "plain": {"model": MODEL, "messages": MESSAGES, "max_tokens": 16},
        "stream": {"model": MODEL, "messages": MESSAGES, "max_tokens": 16, "stream": True,
                   "stream_options": {"include_usage": True}},
    }
    expect = {"plain": (TEXT.encode(),), "stream": (*(p.encode() for p in PIECES), b"[DONE]")}
    return {kind: Target("127.0.0.1", port, build_request("127.0.0.1", port, "/v1/chat/completions",
                                                          json.dumps(body).encode(), API_KEY), expect[kind])
            for kind, body in bodies.items()}


@dataclass
class Round:
    """One target's figures in one round."""
    latency: dict[str, list[float]] = field(default_factory=dict)  # kind -> seconds, concurrency 1
    rate: dict[str, float] = field(default_factory=dict)  # kind -> requests/s at --concurrency
    failures: int = 0

    def p(self, kind: str, q: float) -> float:
        """Percentile q (0-100) of a latency list, in ms."""
        values = sorted(self.latency[kind])
        return values[min(len(values) - 1, round(q / 100 * (len(values) - 1)))] * 1000


def measure(targets: dict[str, Target], args: argparse.Namespace, workers) -> Round:
    result = Round()
    for kind, target in targets.items():
        run(latencies(target, args.warmup))  # warm: connections, caches, lazy imports
        times, failures = run(latencies(target, args.requests))
        result.latency[kind], result.failures = times, result.failures + failures
    for kind, target in targets.items():
        # Split the connections over the client processes; all start together a moment from now.
        per_worker = [args.concurrency // args.clients + (i < args.concurrency % args.clients)
                      for i in range(args.clients)]
        start_at = time.monotonic() + 0.5
        loads: list[Load] = [f.result() for f in [workers.submit(sustained_in_process, target, n, start_at, args.seconds)
                                                  for n in per_worker if n]]
        result.rate[kind] = sum(load.done for load in loads) / args.seconds
        result.failures += sum(load.failures for load in loads)
    return result


def median(values) -> float:
    return statistics.median(list(values))


def summary(results: dict[str, list[Round]]) -> str:
    """The main table: medians over rounds; added latency is per round target - direct, then the median."""
    direct = results["direct"]
    rows = [("| target | plain p50 / p99 ms | stream p50 / p99 ms | added plain p50 / p99 ms "
             "| added stream p50 / p99 ms | plain req/s | stream req/s |"),
            "|---|---:|---:|---:|---:|---:|---:|"]
    added: dict[str, dict[str, float]] = {}
    for name, rounds in results.items():
        cells = []
        for kind in ("plain", "stream"):
            cells.append(f"{median(r.p(kind, 50) for r in rounds):.2f} / {median(r.p(kind, 99) for r in rounds):.2f}")
        for kind in ("plain", "stream"):
            if name == "direct":
                cells.append("-")
                continue
            for q in (50, 99):
                added.setdefault(name, {})[f"{kind} p{q}"] = median(
                    r.p(kind, q) - d.p(kind, q) for r, d in zip(rounds, direct))
            cells.append(f"{added[name][f'{kind} p50']:.2f} / {added[name][f'{kind} p99']:.2f}")
        for kind in ("plain", "stream"):
            cells.append(f"{median(r.rate[kind] for r in rounds):.0f}")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    text = "\n".join(rows)
    for other, label in (("litellm", "LiteLLM"), ("baseline", "baseline")):
        if "rostra" in results and other in results:
            text += "\n\n" + ratios(results, added, other, label)
    return text


def ratios(results: dict[str, list[Round]], added: dict[str, dict[str, float]], other: str, label: str) -> str:
    """rostra / another gateway: below 1x means rostra adds less latency; above 1x means it serves more."""
    rows = [f"| rostra / {label} | plain | stream |", "|---|---:|---:|"]
    for q in (50, 99):
        rows.append(f"| added latency p{q} | " + " | ".join(
            f"{added['rostra'][f'{kind} p{q}'] / added[other][f'{kind} p{q}']:.2f}x"
            for kind in ("plain", "stream")) + " |")
    rows.append("| sustained req/s | " + " | ".join(
        f"{median(r.rate[kind] for r in results['rostra']) / median(r.rate[kind] for r in results[other]):.2f}x"
        for kind in ("plain", "stream")) + " |")
    return "\n".join(rows)


def rounds_table(results: dict[str, list[Round]]) -> str:
    rows = ["| round | target | plain p50 / p99 ms | stream p50 / p99 ms | plain req/s | stream req/s | failures |",
            "|---:|---|---:|---:|---:|---:|---:|"]
    for n in range(len(results["direct"])):
        for name, rounds in results.items():
            r = rounds[n]
            rows.append(f"| {n + 1} | {name} | {r.p('plain', 50):.2f} / {r.p('plain', 99):.2f} "
                        f"| {r.p('stream', 50):.2f} / {r.p('stream', 99):.2f} | {r.rate['plain']:.0f} "
                        f"| {r.rate['stream']:.0f} | {r.failures} |")
    return "\n".join(rows)


def litellm_version(venv: Path) -> str:
    try:
        return subprocess.run([str(venv / "bin" / "python"), "-c",
                               "import importlib.metadata as m; print(m.version('litellm'))"],
                              check=False, capture_output=True, text=True).stdout.strip()
    except OSError:
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", nargs="+", choices=TARGETS[1:], default=list(TARGETS[1:]),
                        help="gateways to measure (the direct upstream always is)")
    parser.add_argument("--litellm", type=Path, default=Path("/work/venv-litellm"),
                        help="virtual environment with litellm[proxy] installed")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=300, help="requests per latency measurement")
    parser.add_argument("--warmup", type=int, default=50, help="requests before each latency measurement")
    parser.add_argument("--concurrency", type=int, default=16, help="connections for the sustained rate")
    parser.add_argument("--seconds", type=float, default=8, help="length of each sustained-rate measurement")
    parser.add_argument("--clients", type=int, default=2, help="client processes for the sustained rate")
    parser.add_argument("--pin", action="store_true",
                        help="gateways on CPU 0, upstream and clients on CPU 1 (needs 2+ CPUs)")
    parser.add_argument("--baseline", type=Path,
                        help="also measure the rostra package found in this directory (e.g. an exported older "
                             "commit: `git archive COMMIT rostra | tar -x -C DIR`), run with this environment")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    if "litellm" in args.targets:
        if not (args.litellm / "bin" / "litellm").exists():
            raise SystemExit(f"no LiteLLM in {args.litellm}: see benchmarks/README.md, or --targets rostra")
        # Without it LiteLLM retries a failing import on every request: its cost, but an install accident.
        if subprocess.run([str(args.litellm / "bin" / "python"), "-c", "import opentelemetry.sdk"],
                          check=False, capture_output=True).returncode:
            print(f"warning: no opentelemetry-sdk in {args.litellm}: LiteLLM will be slower than it should "
                  "(see benchmarks/README.md)", file=sys.stderr)
    if args.pin:
        os.sched_setaffinity(0, {1})  # this process and the client workers it forks

    started = datetime.datetime.now().astimezone()
    # Workers forked now, before any event loop exists, and reused for every sustained measurement.
    workers = concurrent.futures.ProcessPoolExecutor(args.clients, mp_context=multiprocessing.get_context("fork"))
    workdir = Path(tempfile.mkdtemp(prefix="bench-gateway-"))
    servers: dict[str, Server] = {}
    try:
        servers = start_servers(args, workdir)
        for name, server in servers.items():
            check_with_sdk(server.port)
            print(f"[{name}] ready on port {server.port}; the openai SDK reads its answers", flush=True)
        names = list(servers)
        results: dict[str, list[Round]] = {name: [] for name in names}
        for n in range(args.rounds):
            # Rotate the order too, so no target always runs right after the same other one.
            for name in names[n % len(names):] + names[:n % len(names)]:
                r = measure(targets_for(servers[name].port), args, workers)
                results[name].append(r)
                print(f"round {n + 1}/{args.rounds} {name}: plain p50 {r.p('plain', 50):.2f} ms, "
                      f"stream p50 {r.p('stream', 50):.2f} ms, {r.rate['plain']:.0f} / {r.rate['stream']:.0f} req/s"
                      + (f", {r.failures} FAILED" if r.failures else ""), flush=True)
    finally:
        for server in reversed(list(servers.values())):
            server.stop()
        workers.shutdown()
    shutil.rmtree(workdir, ignore_errors=True)

    table = summary(results)
    print("\n" + table)
    command = " ".join(["python benchmarks/bench_gateway.py", *sys.argv[1:]])
    report = f"""# Gateway overhead: rostra (remote engine) vs LiteLLM proxy, in front of a fast upstream

- date: {started:%Y-%m-%d %H:%M %Z}
- machine: {machine_info()}
- rostra commit: {rostra_version()}{f"; baseline: the rostra package in {args.baseline}" if args.baseline else ""}; LiteLLM {litellm_version(args.litellm) if "litellm" in args.targets else "-"}
- upstream: benchmarks/fast_upstream.py (answers at once: {len(PIECES)} content chunks streamed)
- latency: concurrency 1, {args.requests} requests per kind after {args.warmup} warm-up, one kept-alive connection
- sustained: {args.concurrency} kept-alive connections over {args.clients} client processes, {args.seconds:g} s per kind
- {args.rounds} rounds, targets interleaved, medians over rounds; pinned: {"gateways CPU 0, upstream and clients CPU 1" if args.pin else "no"}
- command: `{command}`

plain: a non-streamed chat completion, time to its whole answer. stream: `stream: true` with usage,
time to the stream's last byte. added: target - direct in the same round (median over rounds).

{table}

## Every round

{rounds_table(results)}
"""
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(report)
    print(f"\nwritten to {args.output}")


if __name__ == "__main__":
    main()
