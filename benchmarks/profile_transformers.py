"""Engine only, no HTTP: rostra's batched decode loop against transformers' continuous batching.

    python benchmarks/profile_transformers.py --concurrency 1 4 --rounds 3 [--py-spy DIR]

Both run in this process on the same checkpoint (the embedded SmolLM2 converted into
.cache/smollm2-hf), the same prompts (bench_serving.py's, through the chat template) and greedy
decoding of --max-tokens tokens:

- rostra: a `BatchDecoder` (rostra/engines/transformers_batch.py) fed `concurrency` requests at a
  time, a new one submitted as soon as one finishes, as the serving benchmark's clients do;
- rostra-prefill-alone: the same loop, each new request prefilled by itself (rostra before batched
  prefill), for the difference batched prefill makes;
- transformers-cb: transformers' continuous batching manager (the
  engine behind `transformers serve --continuous-batching`), fed the same way through its manager
  (`init_continuous_batching`, `add_request`, `get_result`).

What is left between the two servers once this gap is known is the server around the engine.
With --py-spy DIR, each rostra level is also recorded by py-spy (speedscope format) into DIR.
"""

from __future__ import annotations

import argparse
import datetime
import os
import queue
import subprocess
import sys
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

sys.path.insert(0, str(Path(__file__).parent))
from bench_serving import PROMPT, machine_info, rostra_version  # noqa: E402

from rostra.core import SamplingParams  # noqa: E402
from rostra.engines.transformers_batch import BatchDecoder, Sequence  # noqa: E402
from rostra.engines.transformers_sampling import RequestSampler  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def prompts(tokenizer, count: int, start: int) -> list[list[int]]:
    return [tokenizer.apply_chat_template([{"role": "user", "content": PROMPT.format(i=start + i)}],
                                          add_generation_prompt=True, tokenize=True, return_dict=False)
            for i in range(count)]


def run_rostra(model, tokenizer, eos: set[int], batch: list[list[int]], concurrency: int, max_tokens: int,
               prefill_alone: bool = False) -> int:
    """Generated tokens; at most `concurrency` requests in flight, each replaced as soon as it ends.
    `prefill_alone`: every waiting request is prefilled by itself, as before batched prefill."""
    decoder = BatchDecoder(model, concurrency, eos, lambda token_id: b"")
    if prefill_alone:
        prefill = decoder._prefill
        decoder._prefill = lambda group: [prefill([sequence]) for sequence in group]  # type: ignore[method-assign]
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
    parser.add_argument("--engines", nargs="+", choices=["rostra", "rostra-prefill-alone", "transformers-cb"],
                        default=["rostra", "rostra-prefill-alone", "transformers-cb"])
    parser.add_argument("--output", type=Path, help="also write the figures to this markdown file")
    parser.add_argument("--py-spy", type=Path, help="folder for py-spy profiles of the rostra levels")
    args = parser.parse_args()
    from rostra.embedded import embedded_model_path
    from rostra.engines.transformers_checkpoint import checkpoint_from_gguf

    checkpoint = checkpoint_from_gguf(embedded_model_path(), ROOT / ".cache" / "smollm2-hf")
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    eos = {tokenizer.eos_token_id, *tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])}
    rostra_model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32).eval()
    if "transformers-cb" in args.engines:
        # A model of its own: the manager switches the attention implementation to its paged one.
        reference = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32).eval()
        manager = reference.init_continuous_batching(generation_config=GenerationConfig(
            max_new_tokens=args.max_tokens, do_sample=False, eos_token_id=sorted(eos)))
        manager.start()
    with torch.inference_mode():  # warm-up: first passes pay for allocations that steady serving does not
        run_rostra(rostra_model, tokenizer, eos, prompts(tokenizer, 2, 10_000), 2, 8)
        if "transformers-cb" in args.engines:
            run_transformers_cb(manager, prompts(tokenizer, 2, 10_000), 2, 8, eos)
    print(f"torch threads {torch.get_num_threads()}, load {os.getloadavg()[0]:.2f}", flush=True)
    results: dict[tuple[str, int], list[float]] = {}
    counter = 0
    log: list[str] = []
    started = datetime.datetime.now().astimezone()
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
                level_started = time.perf_counter()
                with torch.inference_mode():
                    if engine.startswith("rostra"):
                        tokens = run_rostra(rostra_model, tokenizer, eos, batch, concurrency, args.max_tokens,
                                            prefill_alone=engine == "rostra-prefill-alone")
                    else:
                        tokens = run_transformers_cb(manager, batch, concurrency, args.max_tokens, eos)
                elapsed = time.perf_counter() - level_started
                if spy is not None:
                    spy.send_signal(2)  # SIGINT: py-spy writes its profile and exits
                    spy.wait()
                results.setdefault((engine, concurrency), []).append(tokens / elapsed)
                log.append(f"round {round_number + 1} {engine} c={concurrency}: {tokens} tokens, "
                           f"{tokens / elapsed:.1f} tok/s (load {load:.2f})")
                print(log[-1], flush=True)
        report(args, results, log, started, rounds_done=round_number + 1)
    if "transformers-cb" in args.engines:
        manager.stop(block=True)
    print("\n" + report(args, results, log, started, rounds_done=args.rounds))


def report(args: argparse.Namespace, results: dict[tuple[str, int], list[float]], log: list[str],
           started: datetime.datetime, rounds_done: int) -> str:
    """The medians table; also written to --output (after every round, so a run cut short keeps its rounds)."""
    lines = ["| engine | concurrency | tok/s (median) | every round |", "|---|---:|---:|---|"]
    for (engine, concurrency), rates in sorted(results.items(), key=lambda item: (item[0][1], item[0][0])):
        lines.append(f"| {engine} | {concurrency} | {sorted(rates)[len(rates) // 2]:.1f} | "
                     f"{', '.join(f'{r:.1f}' for r in rates)} |")
    if args.output:
        command = " ".join(["python benchmarks/profile_transformers.py", *sys.argv[1:]])
        args.output.write_text(f"""# Engine only: rostra's decode loop vs transformers' continuous batching (in process)

- date: {started:%Y-%m-%d %H:%M %Z}; machine: {machine_info()}; rostra commit: {rostra_version()}
- {args.max_tokens} greedy tokens per request, requests per level {args.requests_per_level or 'max(4, 2 x concurrency)'}, {rounds_done} of {args.rounds} rounds
- command: `{command}`

{chr(10).join(lines)}

Every level, in the order run, with the 1-minute load average before it (2 cores):

{chr(10).join("- " + line for line in log)}
""")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
