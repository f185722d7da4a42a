"""Where the gateway's CPU goes: rostra (--engine remote) in front of the fast upstream, under the
sustained load of bench_gateway.py, profiled with py-spy (a benchmark tool: `pip install py-spy`).

    python benchmarks/profile_gateway.py --kind plain --seconds 10 --output /tmp/gateway.txt

Prints the requests served and rostra's CPU seconds per request (from /proc, so without py-spy's
own overhead when --no-pyspy), and with py-spy writes its collapsed stacks (`--format raw`) to
--output; `--top` prints the packages and the functions with the most samples (self, cumulative).
`python benchmarks/profile_gateway.py --summarize RAW` prints that for an existing file. Coroutine
stacks start where the event loop resumed them, so cumulative figures undercount callers.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import multiprocessing
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_gateway import API_KEY, start, targets_for, wait_ready
from bench_serving import cpu_seconds, free_port
from load_client import sustained_in_process

HERE = Path(__file__).parent


def package(frame: str) -> str:
    """`name (path/to/file.py:12)` -> the top-level package (rostra's modules one by one)."""
    path = frame.rpartition("(")[2].partition(":")[0]
    parts = path.split("/")
    if parts[0] == "rostra":
        return "/".join(parts[:3])
    return parts[0] if len(parts) > 1 else f"stdlib {path}" if path.endswith(".py") else path or "(native)"


def top(raw: Path, count: int) -> str:
    """The functions with the most samples in py-spy's collapsed stacks: self, then cumulative."""
    own: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    packages: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        frames = stack.split(";")
        samples += int(n)
        own[frames[-1]] += int(n)
        packages[package(frames[-1])] += int(n)
        for frame in set(frames):
            total[frame] += int(n)
    lines = [f"{samples} samples", "self, by package (rostra by module):"]
    lines += [f"  {100 * n / samples:5.1f}%  {name}" for name, n in packages.most_common(count)]
    lines += ["self:"]
    lines += [f"  {100 * n / samples:5.1f}%  {name}" for name, n in own.most_common(count)]
    lines += ["cumulative:"]
    lines += [f"  {100 * n / samples:5.1f}%  {name}" for name, n in total.most_common(count)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kind", choices=("plain", "stream"), default="plain")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--no-pyspy", action="store_true", help="only the CPU per request, no profiler attached")
    parser.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    parser.add_argument("--output", type=Path, default=Path("/tmp/profile-gateway.txt"))
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--summarize", type=Path, help="only print the summary of an existing raw profile")
    parser.add_argument("rostra_args", nargs="*", help="more `rostra serve` arguments (after --)")
    args = parser.parse_args()
    if args.summarize:
        print(top(args.summarize, args.top))
        return

    workers = concurrent.futures.ProcessPoolExecutor(args.clients, mp_context=multiprocessing.get_context("fork"))
    workdir = Path(tempfile.mkdtemp(prefix="profile-gateway-"))
    upstream_port, port = free_port(), free_port()
    servers = [start("upstream", [sys.executable, str(HERE / "fast_upstream.py"), "--port", str(upstream_port)],
                     upstream_port, workdir, None)]
    servers.append(start("rostra", [
        sys.executable, "-m", "rostra.cli", "serve", "--engine", "remote",
        "--upstream", f"http://127.0.0.1:{upstream_port}/v1", "--port", str(port),
        "--data-dir", str(workdir / "rostra-data"), "--log-level", "warning", *args.rostra_args],
        port, workdir, None, env={"ROSTRA_API_KEY": API_KEY}))
    spy = None
    try:
        for server in servers:
            wait_ready(server)
        target = targets_for(port)[args.kind]
        sustained_in_process(target, 4, time.monotonic(), 2)  # warm up
        rostra = servers[1].process.pid
        if not args.no_pyspy:
            spy = subprocess.Popen(["py-spy", "record", "--pid", str(rostra), "--rate", str(args.rate),
                                    "--format", "raw", "--output", str(args.output), "--nonblocking",
                                    "--duration", str(int(args.seconds) + 1)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)
        per_worker = [args.concurrency // args.clients + (i < args.concurrency % args.clients)
                      for i in range(args.clients)]
        start_at = time.monotonic() + 0.3
        cpu_before = cpu_seconds(rostra)
        loads = [f.result() for f in [workers.submit(sustained_in_process, target, n, start_at, args.seconds)
                                      for n in per_worker if n]]
        cpu = cpu_seconds(rostra) - cpu_before
        done = sum(load.done for load in loads)
        failures = sum(load.failures for load in loads)
        print(f"{args.kind}: {done / args.seconds:.0f} req/s, {failures} failures, "
              f"rostra CPU {1000 * cpu / max(done, 1):.3f} ms per request ({cpu:.1f} s over {args.seconds:g} s)")
        if spy is not None:
            spy.wait(timeout=60)
            print(top(args.output, args.top))
    finally:
        if spy is not None and spy.poll() is None:
            spy.terminate()
        for server in reversed(servers):
            server.stop()
        workers.shutdown()


if __name__ == "__main__":
    main()
