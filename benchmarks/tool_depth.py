"""Tool calls at depth: a 12-turn tool session that grows toward the model's context, with tool_choice "auto" and
"required", counting the calls that reach the client on every turn (issue 43).

    python benchmarks/tool_depth.py                              # the embedded SmolLM2-135M GGUF
    python benchmarks/tool_depth.py --model some-model.gguf --max-model-len 32768

The peers' trackers report agents that stop getting calls deep into a session ("no tool calls despite
tool_choice=required" twelve turns in). Here one `rostra serve` (zero configuration: no parser flag) runs a
session per tool choice: a system prompt, a task, then every turn the conversation so far with three tools. Each
call the model makes is answered with a tool result, long enough that the prompt reaches about `--fill` of the
context by the last turn; a turn without a call gets the model's answer and a user message asking it to go on
(carrying the same amount of text). Every turn is asked twice, streamed and not, at temperature 0; the stream's
calls are folded from its deltas and must equal the whole answer's.

Reported per turn: the prompt's tokens, the calls surfaced (`message.tool_calls`), how many of them name an
offered tool with arguments that are a JSON object, the finish reason, and whether stream and non-stream agree.
Under "required" a call is forced by the grammar: every turn must surface at least one. Writes
benchmarks/results/tool_depth.md (appended: one section per run).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import random
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from bench_serving import chat_stream, launched, machine_info, rostra_version, wait_ready  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "tool_depth.md"
TOOLS = [
    {"type": "function", "function": {
        "name": "read_file", "description": "Read a file of the repository.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "search_code", "description": "Search the repository for a pattern.",
        "parameters": {"type": "object", "properties": {"pattern": {"type": "string"},
                                                        "max_results": {"type": "integer"}},
                       "required": ["pattern"]}}},
    {"type": "function", "function": {
        "name": "run_tests", "description": "Run the tests whose names match a pattern.",
        "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]}}},
]
NAMES = {tool["function"]["name"] for tool in TOOLS}
SYSTEM = ("You are a coding agent working in a Python repository. Use the tools to look at the code and run the "
          "tests; call one tool at a time and read its result before the next step.")
TASK = "The test test_parser_splits fails with a KeyError in rostra/parsing/tools/hermes.py. Find out why and fix it."
WORDS = ("def return import class self value parser token delta stream call index name arguments text event "
         "split buffer state error assert test case expected result marker open close feed finish json").split()


def filler(seed: int, tokens: int) -> str:
    """About `tokens` tokens of code-like text (SmolLM2's tokenizer: about 1.3 tokens per word of this text)."""
    rng = random.Random(seed)
    lines, words = [], int(tokens / 1.3)
    while words > 0:
        size = min(words, rng.randint(6, 14))
        lines.append("    " + " ".join(rng.choice(WORDS) for _ in range(size)))
        words -= size
    return "\n".join(lines)


@dataclass
class Turn:
    number: int
    prompt_tokens: int
    calls: int
    valid: int
    finish: str
    agree: bool


def surfaced(message: dict) -> tuple[int, int]:
    """The calls that reached the client, and those naming an offered tool with a JSON object as arguments."""
    calls = message.get("tool_calls") or []
    valid = 0
    for call in calls:
        try:
            arguments = json.loads(call["function"]["arguments"])
        except (ValueError, KeyError, TypeError):
            continue
        valid += call["function"].get("name") in NAMES and isinstance(arguments, dict)
    return len(calls), valid


async def streamed_calls(client: httpx.AsyncClient, body: dict) -> list[tuple[str, str]]:
    calls: dict[int, list[str]] = {}
    async for chunk in chat_stream(client, {**body, "stream": True}):
        for choice in chunk.get("choices") or []:
            for delta in choice.get("delta", {}).get("tool_calls") or []:
                entry = calls.setdefault(delta["index"], ["", ""])
                entry[0] += (delta.get("function") or {}).get("name") or ""
                entry[1] += (delta.get("function") or {}).get("arguments") or ""
    return [(name, arguments) for name, arguments in (calls[i] for i in sorted(calls))]


async def run_session(client: httpx.AsyncClient, model: str, choice: str, args: argparse.Namespace) -> list[Turn]:
    messages: list[dict] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
    growth = int(args.max_model_len * args.fill / args.turns)  # tokens added per turn
    turns = []
    for number in range(1, args.turns + 1):
        body = {"model": model, "messages": messages, "tools": TOOLS, "tool_choice": choice, "temperature": 0,
                "max_tokens": args.max_tokens}
        reply = await client.post("/v1/chat/completions", json=body)
        reply.raise_for_status()
        answer = reply.json()
        message, finish = answer["choices"][0]["message"], answer["choices"][0]["finish_reason"]
        whole = [(c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls") or []]
        agree = (await streamed_calls(client, body)) == whole if args.stream else True
        calls, valid = surfaced(message)
        usage = answer["usage"]
        turns.append(Turn(number, usage["prompt_tokens"], calls, valid, finish, agree))
        # What this turn adds, within the context: the next prompt and its answer must still fit.
        room = args.max_model_len - args.max_tokens - usage["prompt_tokens"] - usage["completion_tokens"] - 64
        size = max(0, min(growth, int(room / 1.15)))
        print(f"[{choice}] turn {number:2}: prompt {turns[-1].prompt_tokens:5} tokens, {calls} call(s), {valid} valid, "
              f"{finish}{'' if agree else ', stream differs'}", flush=True)
        messages.append({"role": "assistant", "content": message.get("content") or "",
                         **({"tool_calls": message["tool_calls"]} if message.get("tool_calls") else {})})
        for index, call in enumerate(message.get("tool_calls") or []):
            result = f"{call['function']['name']} result:\n" + filler(number * 10 + index, size // max(1, calls))
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        if not message.get("tool_calls"):
            messages.append({"role": "user", "content": "Go on with the next step. Notes so far:\n"
                                                        + filler(number, size)})
    return turns


def table(choice: str, turns: list[Turn]) -> str:
    rows = [f"| {t.number} | {t.prompt_tokens} | {t.calls} | {t.valid} | {t.finish} | {'yes' if t.agree else 'NO'} |"
            for t in turns]
    with_calls = sum(1 for t in turns if t.calls)
    head = (f"\n**tool_choice {choice}**: calls on {with_calls} of {len(turns)} turns, "
            f"{sum(t.calls for t in turns)} calls, {sum(t.valid for t in turns)} valid\n\n"
            "| turn | prompt tokens | calls | valid | finish | stream = whole |\n|---|---|---|---|---|---|\n")
    return head + "\n".join(rows) + "\n"


async def main_async(args: argparse.Namespace) -> None:
    def command(port: int, data_dir: str) -> list[str]:
        flags = ["--port", str(port), "--max-model-len", str(args.max_model_len), "--log-level", "warning",
                 "--data-dir", data_dir]
        flags += ["--threads", str(args.threads)] if args.threads else []
        return [sys.executable, "-m", "rostra.cli", "serve", *([args.model] if args.model else []), *flags]

    sections = []
    async with launched("rostra", command, wait_ready) as (client, _, model):
        for choice in args.choices:
            sections.append(table(choice, await run_session(client, model, choice, args)))
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    report = (f"\n## {when}: {args.model or 'embedded SmolLM2-135M'}, context {args.max_model_len}, "
              f"{args.turns} turns to {args.fill:.0%} of it, max_tokens {args.max_tokens}\n\n"
              f"rostra {rostra_version()}; {machine_info()}; load {os.getloadavg()[0]:.2f} at the end\n"
              + "".join(sections))
    print(report)
    RESULTS.parent.mkdir(exist_ok=True)
    with RESULTS.open("a") as out:
        out.write(report)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="a GGUF file (default: the embedded model)")
    parser.add_argument("--max-model-len", type=int, default=8192, help="the context the session grows toward")
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--fill", type=float, default=0.85, help="share of the context the last turn's prompt reaches")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--choices", nargs="+", default=["required", "auto"])
    parser.add_argument("--no-stream", dest="stream", action="store_false", help="skip the streamed comparison")
    parser.add_argument("--threads", type=int, default=None)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
