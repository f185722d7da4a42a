"""A busy machine: rostra against llama.cpp's own server at its defaults while other processes keep cores busy.

Other work keeps `--busy-cores` cores busy (processes spinning, started before either server loads, as a laptop's
other work is there before the model is), then bench_serving.py's paired rounds run: both servers on the same
GGUF, each level on one right after the other. Neither server is given `--threads`: llama.cpp's server takes its
default (every core), rostra chooses at load (rostra/engines/cpu_budget.py).

    python benchmarks/bench_busy.py                   # embedded SmolLM2-135M, one core busy, concurrency 1 4
    python benchmarks/bench_busy.py --busy-cores 0    # the quiet machine, for comparison

Writes benchmarks/results/busy.md.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench_serving  # noqa: E402  (a sibling script, not a package)

RESULTS = Path(__file__).parent / "results" / "busy.md"
SPIN = "while True: pass"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="GGUF file (default: the embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--busy-cores", type=int, default=1, help="cores other processes keep busy meanwhile")
    parser.add_argument("--max-tokens", type=int, default=64, help="tokens generated per request")
    parser.add_argument("--requests-per-level", type=int, help="requests per level (default: max(4, 2 x concurrency))")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--parallel", type=int, default=4, help="server slots, for both servers")
    parser.add_argument("--max-model-len", type=int, default=4096, help="context per slot, for both servers")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    args.threads, args.measure = None, "rostra"  # both servers choose their own thread count
    if args.model is None:
        from rostra.embedded import embedded_model_path

        args.model = str(embedded_model_path())
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(args.busy_cores)]
    started = datetime.datetime.now().astimezone()
    try:
        results = asyncio.run(bench_serving.bench_paired(args))
    finally:
        for spinner in spinners:
            spinner.kill()
    result = bench_serving.table(results["rostra"], results["reference"])
    print("\n" + result)
    command = " ".join(["python benchmarks/bench_busy.py", *sys.argv[1:]])
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(f"""# A busy machine: rostra vs llama.cpp's server at its defaults

- date: {started:%Y-%m-%d %H:%M %Z}
- machine: {bench_serving.machine_info()}
- rostra commit: {bench_serving.rostra_version()}
- model: `{Path(args.model).name}`; {args.max_tokens} generated tokens per request, streamed, `ignore_eos`
- other processes spinning meanwhile: {args.busy_cores}; {args.rounds} paired rounds, medians reported
- both servers: {args.parallel} slots, {args.max_model_len} context per slot, no `--threads`
- command: `{command}`

{result}

## Every round

{bench_serving.rounds_table(results)}
""")
    print(f"\nwritten to {args.output}")


if __name__ == "__main__":
    main()
