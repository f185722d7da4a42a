"""Many agent sessions over few slots: rostra against llama.cpp's own server, same GGUF.

12 sessions share a 1,600-token system prompt; each brings 2-4k tokens of history of its own (a resumed
agent conversation: earlier tool results) and then runs 6 turns, each adding the previous answer (a fixed
text, so both servers see the same conversation) and a short user message. All sessions run at once
over 4 slots: a turn usually finds its slot taken by another session since its last turn, so what
decides its time to first token is whether the server finds that session's prefix again (in a slot or
in the host-memory prompt cache) or re-reads thousands of tokens.

    python benchmarks/bench_sessions.py               # embedded SmolLM2-135M, 12 sessions, 4 slots, 6 turns

Each round runs all sessions on one server, then on the other (order alternating by round; only one
works at a time). Reported: TTFT p50 of the turns after the first, total time of the round, and the
cached tokens each server reported. Writes benchmarks/results/sessions.md.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import random
import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from bench_claude_code import system_prompt  # noqa: E402
from bench_serving import chat_stream, machine_info, rostra_version, running_server  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "sessions.md"
KINDS = ("rostra", "reference")
WORDS = ("build test file line error value branch commit module parser token request stream slot cache prompt "
         "server client engine model batch thread config option result check update review patch merge "
         "function class method return import loop index list table query field record").split()


def history(session: int, tokens: int) -> list[dict]:
    """~`tokens` tokens of earlier conversation, different for every session (seeded, so the same on both servers)."""
    rng = random.Random(session)
    messages: list[dict] = []
    words_left = int(tokens * 0.75)  # SmolLM2's tokenizer: about 1.3 tokens per word of this text
    step = 0
    while words_left > 0:
        size = min(words_left, rng.randint(150, 300))
        text = " ".join(rng.choice(WORDS) for _ in range(size))
        messages += [{"role": "user", "content": f"Step {step} of session {session}: run the check and show me."},
                     {"role": "assistant", "content": f"Output of step {step}:\n{text}"}]
        words_left -= size
        step += 1
    return messages


def turn_messages(system: str, session: int, past: list[dict], turn: int) -> list[dict]:
    messages = [{"role": "system", "content": system}, *past]
    for earlier in range(turn):
        messages += [{"role": "user", "content": f"Turn {earlier}: what next for session {session}?"},
                     {"role": "assistant", "content": f"For turn {earlier} I would update the parser and run the "
                                                      f"tests of module {earlier * 7 + session} again."}]
    return messages + [{"role": "user", "content": f"Turn {turn}: what next for session {session}?"}]


async def one_turn(client: httpx.AsyncClient, model: str, session: int, messages: list[dict],
                   max_tokens: int) -> dict:
    body = {"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "ignore_eos": True, "stream_options": {"include_usage": True}, "prompt_cache_key": f"session-{session}"}
    started = time.perf_counter()
    first = None
    usage: dict = {}
    async for event in chat_stream(client, body):
        usage = event.get("usage") or usage
        if first is None and any((c.get("delta") or {}).get("content") for c in event.get("choices") or []):
            first = time.perf_counter()
    end = time.perf_counter()
    cached = ((usage.get("prompt_tokens_details") or {}).get("cached_tokens")) or 0
    return {"ttft": (first or end) - started, "time": end - started, "prompt": usage.get("prompt_tokens", 0),
            "cached": cached}


async def run_sessions(client: httpx.AsyncClient, model: str, args: argparse.Namespace, system: str,
                       round_number: int) -> tuple[float, list[list[dict]]]:
    """All sessions at once; each its turns one after the other. (Wall time, per session its turns.)"""
    async def session(index: int) -> list[dict]:
        number = round_number * 1000 + index  # new sessions every round: none finds the last round's cache
        rng = random.Random(number)
        past = history(number, rng.randint(args.history_min, args.history_max))
        turns = []
        for turn in range(args.turns):
            turns.append(await one_turn(client, model, number, turn_messages(system, number, past, turn),
                                        args.max_tokens))
            if args.verbose:
                print(f"  session {index} turn {turn}: {turns[-1]}", flush=True)
        return turns

    started = time.perf_counter()
    sessions = await asyncio.gather(*(session(i) for i in range(args.sessions)))
    return time.perf_counter() - started, list(sessions)


async def bench(args: argparse.Namespace) -> dict[str, list[tuple[float, list[list[dict]]]]]:
    system = system_prompt(args.paragraphs)
    results: dict[str, list[tuple[float, list[list[dict]]]]] = {kind: [] for kind in KINDS}
    async with running_server("rostra", args) as (rostra, rostra_model), \
            running_server("reference", args) as (reference, reference_model):
        servers = {"rostra": (rostra, rostra_model), "reference": (reference, reference_model)}
        for kind in KINDS:  # warm-up: a short request each (nothing a session shares)
            await one_turn(*servers[kind], -1, [{"role": "user", "content": "Hello"}], 4)
        for round_number in range(args.rounds):
            for kind in (KINDS if round_number % 2 == 0 else KINDS[::-1]):
                seconds, sessions = await run_sessions(*servers[kind], args, system, round_number)
                results[kind].append((seconds, sessions))
                later = [t for s in sessions for t in s[1:]]
                print(f"round {round_number + 1} {kind}: {seconds:.1f} s, later-turn TTFT p50 "
                      f"{statistics.median(t['ttft'] for t in later) * 1000:.0f} ms, cached "
                      f"{sum(t['cached'] for t in later)}/{sum(t['prompt'] for t in later)} prompt tokens of later "
                      f"turns", flush=True)
    return results


def table(results: dict[str, list[tuple[float, list[list[dict]]]]]) -> str:
    def later(run: tuple[float, list[list[dict]]]) -> list[dict]:
        return [t for s in run[1] for t in s[1:]]

    def first(run: tuple[float, list[list[dict]]]) -> list[dict]:
        return [s[0] for s in run[1]]

    lines = ["| round | server | total s | first-turn TTFT p50 ms | later-turn TTFT p50 ms | later-turn TTFT p90 ms | "
             "later turns: cached / prompt tokens |", "|---:|---|---:|---:|---:|---:|---:|"]
    for kind in KINDS:
        for n, run in enumerate(results[kind], 1):
            ttfts = sorted(t["ttft"] for t in later(run))
            lines.append(f"| {n} | {kind} | {run[0]:.1f} | {statistics.median(t['ttft'] for t in first(run)) * 1000:.0f} | "
                         f"{statistics.median(ttfts) * 1000:.0f} | {ttfts[int(0.9 * (len(ttfts) - 1))] * 1000:.0f} | "
                         f"{sum(t['cached'] for t in later(run))} / {sum(t['prompt'] for t in later(run))} |")
    pairs = list(zip(results["rostra"], results["reference"]))
    ttft_ratio = statistics.median(statistics.median(t["ttft"] for t in later(r)) /
                                   statistics.median(t["ttft"] for t in later(ref)) for r, ref in pairs)
    time_ratio = statistics.median(r[0] / ref[0] for r, ref in pairs)
    lines += ["", f"Paired medians over {len(pairs)} rounds, rostra / llama.cpp's server: later-turn TTFT p50 "
                  f"**{ttft_ratio:.2f}x**, total time **{time_ratio:.2f}x** (lower is better)."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="GGUF file (default: the embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--sessions", type=int, default=12)
    parser.add_argument("--parallel", type=int, default=4, help="slots, for both servers")
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--paragraphs", type=int, default=24, help="system prompt size (24: ~1,600 tokens)")
    parser.add_argument("--history-min", type=int, default=2000, help="per-session history, tokens (at least)")
    parser.add_argument("--history-max", type=int, default=4000, help="per-session history, tokens (at most)")
    parser.add_argument("--max-tokens", type=int, default=32, help="tokens generated per turn")
    parser.add_argument("--max-model-len", type=int, default=8192, help="context per slot, for both servers")
    parser.add_argument("--threads", type=int, help="CPU threads, for both servers (default: llama.cpp's choice)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--verbose", action="store_true", help="print every turn as it ends")
    parser.add_argument("--rostra-flags", default="", help="extra flags for rostra serve, one string "
                                                           "(e.g. \"--flash-attn off\")")
    args = parser.parse_args()
    if args.model is None:
        from rostra.embedded import embedded_model_path

        args.model = str(embedded_model_path())
    args.concurrency, args.measure = [args.sessions], "rostra"
    args.rostra_flags = {"rostra": args.rostra_flags.split()}
    load_before = os.getloadavg()[1]
    results = asyncio.run(bench(args))
    load = f"load average (5 min) {load_before:.1f} before, {os.getloadavg()[1]:.1f} after"
    report = f"""# Sessions over slots: rostra vs llama.cpp's server (Chat Completions)

- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; machine: {machine_info()}
- rostra {rostra_version()}{" (" + " ".join(args.rostra_flags["rostra"]) + ")" if args.rostra_flags["rostra"] else ""}; model {Path(args.model).name}; both servers: {args.parallel} slots, context
  {args.max_model_len} per slot, threads {args.threads or "llama.cpp's choice"}; {load}
- {args.sessions} sessions at once, {args.turns} turns each, {args.max_tokens} tokens generated per turn; system prompt
  of {args.paragraphs} paragraphs, {args.history_min}-{args.history_max} tokens of history per session;
  `prompt_cache_key` = the session

{table(results)}
"""
    print(report)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(report)


if __name__ == "__main__":
    main()
