"""What reading a GGUF into memory (rostra's choice: no SIGBUS when the file is overwritten in place) costs
against memory-mapping it: load time and the process's resident memory after the load, paired rounds in
fresh processes, alternating the order.

    python benchmarks/bench_load_mode.py [MODEL.gguf] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time
import xllamacpp
path, mode = sys.argv[1], sys.argv[2]
params = xllamacpp.CommonParams()
params.model.path = path
params.n_ctx = 512
params.n_parallel = 1
params.load_mode = getattr(xllamacpp.llama_load_mode, mode)
started = time.perf_counter()
server = xllamacpp.Server(params)
seconds = time.perf_counter() - started
status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
print(json.dumps({"seconds": seconds, "rss_kib": int(status["VmRSS"].split()[0]),
                  "file_kib": int(status.get("RssFile", "0 kB").split()[0]),
                  "anon_kib": int(status.get("RssAnon", "0 kB").split()[0])}), flush=True)
import os
os._exit(0)  # not llama.cpp's server shutdown: only the load is measured
"""


def one(path: str, mode: str) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, path, mode], capture_output=True, text=True, check=True,
                          timeout=300)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", nargs="?")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.model is None:
        from rostra.embedded import embedded_model_path

        args.model = str(embedded_model_path())
    results: dict[str, list[dict]] = {"LLAMA_LOAD_MODE_MMAP": [], "LLAMA_LOAD_MODE_NONE": []}
    for round_ in range(args.rounds):
        order = list(results) if round_ % 2 == 0 else list(reversed(results))
        for mode in order:
            results[mode].append(one(args.model, mode))
    for mode, runs in results.items():
        print(f"{mode}: load {statistics.median(r['seconds'] for r in runs):.2f} s (median of {len(runs)}), "
              f"RSS {statistics.median(r['rss_kib'] for r in runs) / 1024:.0f} MiB "
              f"(file-backed {statistics.median(r['file_kib'] for r in runs) / 1024:.0f}, "
              f"anonymous {statistics.median(r['anon_kib'] for r in runs) / 1024:.0f})")


if __name__ == "__main__":
    main()
