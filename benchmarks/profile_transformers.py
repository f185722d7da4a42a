"""Engine only, no HTTP: rostra's batched decode loop against transformers' continuous batching.

    python benchmarks/profile_transformers.py --concurrency 1 4 --rounds 3 [--py-spy DIR]

Both run in this process on the same checkpoint (the embedded SmolLM2 converted into
.cache/smollm2-hf), the same prompts (bench_serving.py's, through the chat template) and greedy
decoding of --max-tokens tokens:

- rostra: a `BatchDecoder` (rostra/engines/transformers_batch.py) fed `concurrency` requests at a
  time, a new one submitted as soon as one finishes, as the serving benchmark's clients do;
- transformers-cb: transformers' continuous batching manager (the
  engine behind `transformers serve --continuous-batching`), fed the same way through its manager
  (`init_continuous_batching`, `add_request`, `get_result`).

What is left between the two servers once this gap is known is the server around the engine.
With --py-spy DIR, each rostra level is also recorded by py-spy (speedscope format) into DIR.
"""

from __future__ import annotations

import argparse
import os
import queue
import subprocess
import sys
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

sys.path.insert(0, str(Path(__file__).parent))
from bench_serving import PROMPT  # noqa: E402

from rostra.core import SamplingParams  # noqa: E402
from rostra.engines.transformers_batch import BatchDecoder, Sequence  # noqa: E402
from rostra.engines.transformers_sampling import RequestSampler  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def prompts(tokenizer, count: int, start: int) -> list[list[int]]:
    return [tokenizer.apply_chat_template([{"role": "user", "content": PROMPT.format(i=start + i)}],
                                          add_generation_prompt=True, tokenize=True, return_dict=False)
            for i in range(count)]


def run_rostra(model, tokenizer, eos: set[int], batch: list[list[int]], concurrency: int, max_tokens: int) -> int:
    """Generated tokens; at most `concurrency` requests in flight, each replaced as soon as it ends."""
    decoder = BatchDecoder(model, concurrency, eos, lambda token_id: b"")
    finished: queue.Queue[str] = queue.Queue()
    tokens = 0

    def submit(index: int) -> None:
        params = SamplingParams(max_tokens=max_tokens, temperature=0)
        sampler = RequestSampler(params, batch[index], model.config.vocab_size, len(tokenizer), sorted(eos), None,
                                 model.device)

        def deliver(output) -> None:
            nonlocal tokens
            if isinstance(output, BaseException):
                raise output
            tokens += len(output.tokens)
            if output.finish_reason:
                finished.put(str(index))

        decoder.submit(Sequence(str(index), batch[index], max_tokens, sampler, deliver))

    decoder.start()
    try:
        for index in range(min(concurrency, len(batch))):
            submit(index)
        for index in range(concurrency, len(batch) + concurrency):
            finished.get(timeout=600)
            if index < len(batch):
                submit(index)
    finally:
        decoder.stop()
    return tokens


def run_transformers_cb(manager, batch: list[list[int]], concurrency: int, max_tokens: int, eos: set[int]) -> int:
    """The same schedule through transformers' manager (started once, kept between levels)."""
    tokens = 0
    for index in range(min(concurrency, len(batch))):
        manager.add_request(batch[index], request_id=f"{id(batch)}-{index}", max_new_tokens=max_tokens,
                            eos_token_id=sorted(eos))
    for index in range(concurrency, len(batch) + concurrency):
        result = manager.get_result(timeout=600)
        if result is None:
            raise RuntimeError("transformers' manager returned no result")
        tokens += len([t for t in result.generated_tokens if t not in eos])
        if index < len(batch):
            manager.add_request(batch[index], request_id=f"{id(batch)}-{index}", max_new_tokens=max_tokens,
                                eos_token_id=sorted(eos))
    return tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--requests-per-level", type=int, help="default: max(4, 2 x concurrency)")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--engines", nargs="+", default=["rostra", "transformers-cb"])
    parser.add_argument("--py-spy", type=Path, help="folder for py-spy profiles of the rostra levels")
    args = parser.parse_args()
    from rostra.embedded import embedded_model_path
    from rostra.engines.transformers_checkpoint import checkpoint_from_gguf

    checkpoint = checkpoint_from_gguf(embedded_model_path(), ROOT / ".cache" / "smollm2-hf")
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    eos = {tokenizer.eos_token_id, *tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])}
    models = {"rostra": AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32).eval()}
    if "transformers-cb" in args.engines:
        # A model of its own: the manager switches the attention implementation to its paged one.
        reference = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32).eval()
        manager = reference.init_continuous_batching(generation_config=GenerationConfig(
            max_new_tokens=args.max_tokens, do_sample=False, eos_token_id=sorted(eos)))
        manager.start()
    with torch.inference_mode():  # warm-up: first passes pay for allocations that steady serving does not
        run_rostra(models["rostra"], tokenizer, eos, prompts(tokenizer, 2, 10_000), 2, 8)
        if "transformers-cb" in args.engines:
            run_transformers_cb(manager, prompts(tokenizer, 2, 10_000), 2, 8, eos)
    print(f"torch threads {torch.get_num_threads()}, load {os.getloadavg()[0]:.2f}", flush=True)
    results: dict[tuple[str, int], list[float]] = {}
    counter = 0
    for round_number in range(args.rounds):
        for concurrency in args.concurrency:
            count = args.requests_per_level or max(4, 2 * concurrency)
            for engine in args.engines:
                batch = prompts(tokenizer, count, counter)
                counter += count
                spy = None
                if args.py_spy and engine == "rostra":
                    args.py_spy.mkdir(parents=True, exist_ok=True)
                    spy = subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(os.getpid()),
                                            "-o", str(args.py_spy / f"rostra-c{concurrency}-r{round_number + 1}.json"),
                                            "-f", "speedscope", "--threads", "-r", "50", "--nonblocking"],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    time.sleep(1)
                load = os.getloadavg()[0]
                started = time.perf_counter()
                with torch.inference_mode():
                    if engine == "rostra":
                        tokens = run_rostra(models[engine], tokenizer, eos, batch, concurrency, args.max_tokens)
                    else:
                        tokens = run_transformers_cb(manager, batch, concurrency, args.max_tokens, eos)
                elapsed = time.perf_counter() - started
                if spy is not None:
                    spy.send_signal(2)  # SIGINT: py-spy writes its profile and exits
                    spy.wait()
                results.setdefault((engine, concurrency), []).append(tokens / elapsed)
                print(f"round {round_number + 1} {engine} c={concurrency}: {tokens} tokens, {tokens / elapsed:.1f} tok/s"
                      f" (load {load:.2f})", flush=True)
    if "transformers-cb" in args.engines:
        manager.stop(block=True)
    print("\n| engine | concurrency | tok/s (median) | every round |\n|---|---:|---:|---|")
    for (engine, concurrency), rates in sorted(results.items(), key=lambda item: (item[0][1], item[0][0])):
        print(f"| {engine} | {concurrency} | {sorted(rates)[len(rates) // 2]:.1f} | "
              f"{', '.join(f'{r:.1f}' for r in rates)} |")


if __name__ == "__main__":
    main()
