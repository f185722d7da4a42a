"""Two models generating at once in one process: rostra's thread budget against two llama.cpp servers at their defaults.

Each side runs in its own process, one after the other, round after round (rostra, reference, rostra, reference):
- rostra: two llama.cpp engines (rostra/engines/llamacpp.py) on the same GGUF in one process, as `--models-dir`
  loads them, their threads on the cores the budget gives each (rostra/engines/thread_budget.py), OpenMP's spin
  bounded; the engines are driven directly (no HTTP: what is measured is how the two share the cores).
- reference: two llama.cpp servers (xllamacpp's, llama.cpp's own HTTP server) in one process at llama.cpp's defaults
  (every core each, libgomp's default spin), driven over their /completion endpoint.
Both generate `--max-tokens` tokens (temperature 0, `ignore_eos`) on each model at once; the figure is the tokens of
both over the wall time until both finished. `--busy-cores` processes spin meanwhile (scenario 1 on top of 2).

    python benchmarks/bench_shared_cores.py --rounds 2 --max-tokens 48
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PROMPT = "Write a long story about a lighthouse keeper."


def rostra_side(model: str, max_tokens: int) -> float:
    from rostra.core import Prompt, SamplingParams
    from rostra.engines.llamacpp import LlamaCppEngine

    async def run() -> float:
        engines = [LlamaCppEngine(model, name, max_model_len=1024, parallel=1) for name in "ab"]
        for engine in engines:
            await engine.start()
        try:
            prompt = Prompt(await engines[0].tokenize(PROMPT, add_special=False))

            async def generate(engine: LlamaCppEngine, request_id: str) -> int:
                count = 0
                async for output in engine.generate(request_id, prompt,
                                                    SamplingParams(max_tokens=max_tokens, ignore_eos=True)):
                    count += len(output.tokens)
                return count

            await asyncio.gather(*(generate(engine, f"warm{i}") for i, engine in enumerate(engines)))
            started = time.monotonic()
            counts = await asyncio.gather(*(generate(engine, f"r{i}") for i, engine in enumerate(engines)))
            return sum(counts) / (time.monotonic() - started)
        finally:
            for engine in engines:
                await engine.close()

    return asyncio.run(run())


def reference_side(model: str, max_tokens: int) -> float:
    from concurrent.futures import ThreadPoolExecutor

    import xllamacpp

    servers = []
    for _ in range(2):
        params = xllamacpp.CommonParams()
        params.model.path = model
        params.n_ctx, params.n_parallel = 1024, 1
        servers.append(xllamacpp.Server(params))

    def generate(server) -> int:
        body = json.dumps({"prompt": PROMPT, "n_predict": max_tokens, "ignore_eos": True, "temperature": 0}).encode()
        request = urllib.request.Request(server.listening_address + "/completion", body,
                                         {"Content-Type": "application/json"})
        return json.loads(urllib.request.urlopen(request).read())["tokens_predicted"]

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(generate, servers))  # warm-up
        started = time.monotonic()
        counts = list(pool.map(generate, servers))
    return sum(counts) / (time.monotonic() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="GGUF file (default: the embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--busy-cores", type=int, default=0)
    parser.add_argument("--side", choices=["rostra", "reference"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.model is None:
        from rostra.embedded import embedded_model_path

        args.model = str(embedded_model_path())
    if args.side:
        rate = (rostra_side if args.side == "rostra" else reference_side)(args.model, args.max_tokens)
        print(json.dumps({"tok_s": rate}))
        return
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy_cores)]
    try:
        for round_ in range(1, args.rounds + 1):
            for side in ("rostra", "reference"):
                load = os.getloadavg()[0]
                out = subprocess.run([sys.executable, __file__, "--side", side, "--model", args.model,
                                      "--max-tokens", str(args.max_tokens)], capture_output=True, text=True,
                                     check=True).stdout
                rate = json.loads(out.strip().splitlines()[-1])["tok_s"]
                print(f"| {round_} | {side} | {rate:.1f} | {load:.1f} |", flush=True)
    finally:
        for spinner in spinners:
            spinner.kill()


if __name__ == "__main__":
    main()
