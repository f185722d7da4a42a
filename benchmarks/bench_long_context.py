"""Two llama.cpp settings that decide how a CPU serves long prompts and long contexts, measured on llama.cpp's
own server (xllamacpp, the build rostra runs), without rostra in between:

- `decode`: ms per decoded token after a short and after a long context, one stream and every slot busy, with
  flash attention auto (llama.cpp's default), off and on (rostra: `--flash-attn`);
- `stall`: one stream decoding while another request's long prompt is read: the stream's gaps between tokens
  and the prompt's time, with n_batch 2048 (llama.cpp's default) and 512 (= n_ubatch, rostra's choice).

    python benchmarks/bench_long_context.py                    # both, embedded SmolLM2-135M
    python benchmarks/bench_long_context.py decode --contexts 100 4500

Prompts are random ordinary tokens (no chat template): what is measured is the arithmetic, not the answer.
Prints one line per setting; nothing is written.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import xllamacpp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_serving import free_port, llama_server_params  # noqa: E402
from rostra.engines.llamacpp_http import LoopbackClient  # noqa: E402

FLASH_ATTN = {"auto": -1, "off": 0, "on": 1}


async def started(model: str, parallel: int, context: int, **settings: Any) -> tuple[Any, LoopbackClient]:
    """llama.cpp's server as bench_serving.py's reference runs it (as rostra's engine does), with `settings` on top."""
    layout = argparse.Namespace(model=model, parallel=parallel, max_model_len=context, threads=None)
    params = llama_server_params(layout, free_port())
    for name, value in settings.items():
        setattr(params, name, value)
    server = await asyncio.to_thread(xllamacpp.Server, params)
    return server, LoopbackClient(server.listening_address, "")  # (no API key: loopback only)


def random_prompt(rng: random.Random, length: int) -> list[int]:
    return [rng.randrange(1000, 40000) for _ in range(length)]


async def decode(args: argparse.Namespace) -> None:
    for flash_attn in args.flash_attn:
        server, client = await started(args.model, args.parallel, max(args.contexts) + 512,
                                       flash_attn_type=FLASH_ATTN[flash_attn])
        rng = random.Random(1)
        figures = []
        for context in args.contexts:
            prompts = [random_prompt(rng, context) for _ in range(args.parallel)]
            await asyncio.gather(*(client.post("/completion", {"prompt": prompt, "n_predict": 1, "id_slot": slot})
                                   for slot, prompt in enumerate(prompts)))  # every slot holds its context
            for streams in sorted({1, args.parallel}):
                replies = await asyncio.gather(*(client.post("/completion", {
                    "prompt": prompts[slot], "n_predict": args.tokens, "ignore_eos": True, "temperature": 0,
                    "id_slot": slot}) for slot in range(streams)))
                per_token = statistics.median(reply["timings"]["predicted_per_token_ms"] for reply in replies)
                figures.append(f"context {context}, {streams} stream(s): {per_token:.1f} ms/token")
        print(f"flash attention {flash_attn}: " + "; ".join(figures), flush=True)
        del server


async def stall(args: argparse.Namespace) -> None:
    for n_batch in args.n_batch:
        server, client = await started(args.model, 2, args.prompt + 512, n_batch=n_batch)
        rng = random.Random(2)
        for _ in range(args.repeats):
            stream = await client.stream("/completion", {"prompt": random_prompt(rng, 40), "n_predict": 2000,
                                                         "ignore_eos": True, "stream": True, "id_slot": 0})
            arrivals: list[float] = []

            async def read() -> None:
                while batch := await stream.next_batch():
                    arrivals.extend([time.perf_counter()] * len(batch))

            reader = asyncio.create_task(read())
            await asyncio.sleep(0.5)
            started_at = time.perf_counter()
            await client.post("/completion", {"prompt": random_prompt(rng, args.prompt), "n_predict": 1, "id_slot": 1})
            ended_at = time.perf_counter()
            stream.close()
            reader.cancel()
            gaps = [b - a for a, b in zip(arrivals, arrivals[1:]) if started_at <= a and b <= ended_at]
            print(f"n_batch {n_batch}: a {args.prompt}-token prompt read in {ended_at - started_at:.1f} s; the other "
                  f"stream meanwhile: {len(gaps) + 1} tokens, gaps median {statistics.median(gaps or [0]):.2f} s, "
                  f"max {max(gaps or [0]):.2f} s", flush=True)
        del server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("measure", nargs="?", choices=["decode", "stall", "both"], default="both")
    parser.add_argument("--model", help="GGUF file (default: the embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--contexts", type=int, nargs="+", default=[100, 4500], help="decode: context lengths")
    parser.add_argument("--parallel", type=int, default=4, help="decode: slots (all busy in the second figure)")
    parser.add_argument("--tokens", type=int, default=48, help="decode: tokens per measurement")
    parser.add_argument("--flash-attn", nargs="+", choices=list(FLASH_ATTN), default=list(FLASH_ATTN))
    parser.add_argument("--prompt", type=int, default=4000, help="stall: the long prompt's tokens")
    parser.add_argument("--n-batch", type=int, nargs="+", default=[2048, 512])
    parser.add_argument("--repeats", type=int, default=2, help="stall: long prompts per setting")
    args = parser.parse_args()
    if args.model is None:
        from rostra.embedded import embedded_model_path

        args.model = str(embedded_model_path())
    if args.measure in ("decode", "both"):
        asyncio.run(decode(args))
    if args.measure in ("stall", "both"):
        asyncio.run(stall(args))


if __name__ == "__main__":
    main()
