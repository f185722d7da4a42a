"""A Claude Code-shaped session on the Messages API: rostra against llama.cpp's own server, same GGUF.

Claude Code starts its system prompt with an attribution line that changes from one request to the next
(`x-anthropic-billing-header: cc_version=2.1.330.572; ...`), then a long system prompt; each turn the
conversation grows by the model's tool call and the tool's result. A server whose prefix cache matches
prompts from their first token re-reads the whole prompt every turn; rostra drops the line before
templating (rostra/api/messages/history.py), so each turn after the first reads only what is new.

    python benchmarks/bench_claude_code.py       # embedded SmolLM2-135M, 6 turns, 3 paired rounds

Per turn: time to the first text delta (TTFT) and the turn's time; per session: the total. Each round runs
one whole session on each server, one after the other (order alternating), only one server working at a
time. Each session has its own id right after the attribution line, so its first turn finds nothing cached.
The assistant turns in the history are fixed (not the generated text), so both servers see the same
conversation. Writes benchmarks/results/claude_code.md.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import secrets
import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from bench_serving import machine_info, rostra_version, running_server  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "claude_code.md"
KINDS = ("rostra", "reference")


def system_prompt(paragraphs: int) -> str:
    """A long, Claude Code-like set of instructions (its real one is ~28k characters)."""
    topics = ["reading files", "editing code", "running shell commands", "writing tests", "using git",
              "answering questions", "planning work", "reporting progress"]
    return "\n\n".join(
        f"# {topics[n % len(topics)].capitalize()} ({n})\n"
        f"- When {topics[n % len(topics)]}, check the surrounding code first and follow its conventions.\n"
        f"- Prefer small, verifiable steps; say what you changed and why, in one or two sentences.\n"
        f"- Never guess file paths or command output: read the file or run the command (rule {n})."
        for n in range(paragraphs))


def file_content(turn: int) -> str:
    return "\n".join(f"{line + 1}\tdef step_{turn}_{line}(x):\n\treturn x * {line} + {turn}" for line in range(12))


def turn_request(model: str, session: str, turn: int, system: str, max_tokens: int) -> dict:
    """Turn `turn` (0-based): the task, then `turn` rounds of Read call + its result."""
    nonce = secrets.token_hex(2)[:3]  # as Claude Code's line changes: a new value on every request
    messages: list[dict] = [{"role": "user", "content": "Look through the step files and tell me what step_3 does."}]
    for earlier in range(turn):
        call_id = f"toolu_{session[:8]}{earlier:04d}"
        messages += [
            {"role": "assistant", "content": [
                {"type": "text", "text": f"I will read steps_{earlier}.py."},
                {"type": "tool_use", "id": call_id, "name": "Read", "input": {"file_path": f"/work/steps_{earlier}.py"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id,
                                          "content": file_content(earlier)}]}]
    return {"model": model, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "system": [{"type": "text", "text": f"x-anthropic-billing-header: cc_version=2.1.330.{nonce}; "
                                                "cc_entrypoint=cli;"},
                       {"type": "text", "text": f"Session {session}.\n\n{system}", "cache_control": {"type": "ephemeral"}}],
            "messages": messages}


async def one_turn(client: httpx.AsyncClient, body: dict) -> dict:
    started = time.perf_counter()
    first = None
    usage: dict = {}
    async with client.stream("POST", "/v1/messages", json=body,
                             headers={"x-api-key": "unused", "anthropic-version": "2023-06-01"}) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[6:])
            if event["type"] == "content_block_delta" and first is None:
                first = time.perf_counter()
            if event["type"] == "message_start":
                usage.update(event["message"]["usage"])
            if event["type"] == "message_delta":
                usage.update({k: v for k, v in event["usage"].items() if v is not None})
    end = time.perf_counter()
    prompt = usage.get("input_tokens", 0) + (usage.get("cache_read_input_tokens") or 0)
    return {"ttft": (first or end) - started, "time": end - started, "prompt": prompt,
            "cached": usage.get("cache_read_input_tokens") or 0}


async def session(client: httpx.AsyncClient, model: str, args: argparse.Namespace, system: str) -> list[dict]:
    session_id = secrets.token_hex(8)
    return [await one_turn(client, turn_request(model, session_id, turn, system, args.max_tokens))
            for turn in range(args.turns)]


async def bench(args: argparse.Namespace) -> dict[str, list[list[dict]]]:
    system = system_prompt(args.paragraphs)
    results: dict[str, list[list[dict]]] = {kind: [] for kind in KINDS}
    async with running_server("rostra", args) as (rostra, rostra_model), \
            running_server("reference", args) as (reference, reference_model):
        servers = {"rostra": (rostra, rostra_model), "reference": (reference, reference_model)}
        for kind in KINDS:  # warm-up: one short request each (a prompt no session shares)
            await one_turn(servers[kind][0], {"model": servers[kind][1], "max_tokens": 1, "stream": True,
                                              "messages": [{"role": "user", "content": "Hello"}]})
        for round_number in range(args.rounds):
            order = KINDS if round_number % 2 == 0 else KINDS[::-1]
            for kind in order:
                turns = await session(*servers[kind], args, system)
                results[kind].append(turns)
                print(f"round {round_number + 1} {kind}: " + " ".join(
                    f"{t['ttft'] * 1000:.0f}ms({t['cached']}/{t['prompt']})" for t in turns), flush=True)
    return results


def table(results: dict[str, list[list[dict]]], turns: int) -> str:
    def median(kind: str, turn: int, key: str) -> float:
        return statistics.median(run[turn][key] for run in results[kind])

    lines = ["| turn | prompt tokens (rostra / llama.cpp) | cache read (rostra / llama.cpp) | TTFT rostra | TTFT llama.cpp | "
             "speed-up (paired median) |", "|---|---|---|---|---|---|"]
    for turn in range(turns):
        paired = statistics.median(ref[turn]["ttft"] / ros[turn]["ttft"]
                                   for ros, ref in zip(results["rostra"], results["reference"]))
        lines.append(f"| {turn + 1} | {median('rostra', turn, 'prompt'):.0f} / {median('reference', turn, 'prompt'):.0f} | "
                     f"{median('rostra', turn, 'cached'):.0f} / {median('reference', turn, 'cached'):.0f} | "
                     f"{median('rostra', turn, 'ttft') * 1000:.0f} ms | {median('reference', turn, 'ttft') * 1000:.0f} ms | "
                     f"{paired:.2f}x |")
    session_times = {kind: [sum(t["time"] for t in run) for run in results[kind]] for kind in KINDS}
    later = {kind: [sum(t["ttft"] for t in run[1:]) / (turns - 1) for run in results[kind]] for kind in KINDS}
    paired_session = statistics.median(ref / ros for ros, ref in zip(session_times["rostra"], session_times["reference"]))
    paired_later = statistics.median(ref / ros for ros, ref in zip(later["rostra"], later["reference"]))
    lines += ["", f"Session time (median of rounds): rostra {statistics.median(session_times['rostra']):.2f} s, "
                  f"llama.cpp {statistics.median(session_times['reference']):.2f} s: **{paired_session:.2f}x** (paired median).",
              f"Mean TTFT of the turns after the first: rostra {statistics.median(later['rostra']) * 1000:.0f} ms, "
              f"llama.cpp {statistics.median(later['reference']) * 1000:.0f} ms: **{paired_later:.2f}x** (paired median)."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="GGUF file (default: the embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--paragraphs", type=int, default=60, help="system prompt size (60: ~4k tokens)")
    parser.add_argument("--max-tokens", type=int, default=16, help="tokens generated per turn")
    parser.add_argument("--max-model-len", type=int, default=8192, help="context, for both servers")
    parser.add_argument("--threads", type=int, help="CPU threads, for both servers (default: llama.cpp's choice)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.model is None:
        from rostra.embedded import embedded_model_path

        args.model = str(embedded_model_path())
    args.parallel, args.concurrency, args.measure = 1, [1], "rostra"  # one session: one slot on each server
    load_before = os.getloadavg()[1]
    results = asyncio.run(bench(args))
    load = f"load average (5 min) {load_before:.1f} before, {os.getloadavg()[1]:.1f} after: " + (
        "the machine was shared and loaded, absolute times are slow; the paired ratios are what compares"
        if max(load_before, os.getloadavg()[1]) > 1.5 else "quiet")
    report = f"""# Claude Code-shaped session: rostra vs llama.cpp's server (Messages API)

- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; machine: {machine_info()}
- rostra {rostra_version()}; model {Path(args.model).name}; both servers: 1 slot, context {args.max_model_len},
  threads {args.threads or "llama.cpp's choice"}; {load}
- {args.turns} turns per session, {args.rounds} paired rounds, {args.max_tokens} tokens generated per turn,
  system prompt of {args.paragraphs} paragraphs, a new attribution line on every request

{table(results, args.turns)}
"""
    print(report)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(report)


if __name__ == "__main__":
    main()
