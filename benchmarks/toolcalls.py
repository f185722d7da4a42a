"""Tool-calling benchmark: BFCL v4 cases against rostra and llama.cpp's own server, same GGUF.

    pip install --no-deps bfcl-eval==2026.3.23     # the cases, their ground truth and the AST checker
    python benchmarks/toolcalls.py --model qwen2.5-coder-0.5b-instruct-q4_k_m.gguf

The cases come from the installed `bfcl-eval` package (Apache-2.0), never from this repository.
Each server is started alone, with no tool-calling flags (zero configuration), and gets every case
as /v1/chat/completions with `tools`, at temperature 0, streamed and not streamed, with
tool_choice "auto" and "required" (irrelevance cases: "auto" only). Measured:

- surfaced: expected calls that reached `message.tool_calls` (up to the number expected per case);
- AST-correct: cases whose calls BFCL's own checker accepts (names and argument values);
- irrelevance: cases where no tool fits and the answer made no call;
- agreement: cases whose streamed calls (folded from the deltas) equal the non-streamed ones.

`--servers` may add `rostra-json`: rostra with `--tool-call-parser json`, the parser pinned to the way
this model writes calls (the configuration the issue compared with). Its irrelevance figure is what any
parser that reads the model's calls gets: the model's own decisions, not the parser's.

`--raw FILE` also writes what the model wrote for each case (rostra, tool_choice "none": the same
prompt, no parsing), which is where the recorded test samples in tests/data come from.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import sys
import types
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from bench_serving import free_port, machine_info, run_reference_server, stop_process, wait_ready  # noqa: E402

CATEGORIES = {"simple": "simple_python", "multiple": "multiple", "parallel": "parallel",
              "irrelevance": "irrelevance"}
RESULTS = Path(__file__).parent / "results" / "toolcalls.md"
SERVERS = ("rostra", "rostra-json", "llama.cpp")


def load_checker():
    """BFCL's AST checker without the package's model registry (which imports every vendor SDK):
    the one thing the checker asks of it is whether "." in names became "_", as it does here."""
    stub = types.ModuleType("bfcl_eval.constants.model_config")

    class AnyModel(dict):
        def __getitem__(self, name):
            return types.SimpleNamespace(underscore_to_dot=True)

    stub.MODEL_CONFIG_MAPPING = AnyModel()
    sys.modules["bfcl_eval.constants.model_config"] = stub
    from bfcl_eval.constants.enums import Language
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
    return lambda functions, calls, answer, category: ast_checker(
        functions, calls, answer, Language.PYTHON, category, "rostra")["valid"]


def bfcl_lines(name: str) -> list[dict]:
    data = resources.files("bfcl_eval") / "data" / name
    return [json.loads(line) for line in data.read_text().splitlines() if line.strip()]


@dataclass
class Case:
    id: str
    category: str
    messages: list[dict]
    functions: list[dict]
    answer: list[dict] = field(default_factory=list)  # [{name: {param: [accepted values]}}]


def load_cases(per_category: int) -> list[Case]:
    cases = []
    for category, stem in CATEGORIES.items():
        questions = bfcl_lines(f"BFCL_v4_{stem}.json")[:per_category]
        answers = {} if category == "irrelevance" else {
            a["id"]: a["ground_truth"] for a in bfcl_lines(f"possible_answer/BFCL_v4_{stem}.json")}
        for q in questions:
            cases.append(Case(q["id"], category, q["question"][0], q["function"], answers.get(q["id"], [])))
    return cases


def json_schema(bfcl: dict) -> dict:
    """BFCL's Python-flavoured parameter types as JSON Schema ("dict" -> object, "float" -> number...)."""
    kinds = {"dict": "object", "float": "number", "tuple": "array", "any": None}
    out = {}
    for key, value in bfcl.items():
        if key == "type" and value in kinds:
            if kinds[value]:
                out[key] = kinds[value]
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: json_schema(prop) for name, prop in value.items()}
        elif key == "items" and isinstance(value, dict):
            out[key] = json_schema(value)
        elif key not in ("optional",):
            out[key] = value
    return out


def tools_of(case: Case) -> list[dict]:
    return [{"type": "function", "function": {"name": f["name"].replace(".", "_"), "description": f["description"],
                                              "parameters": json_schema(f["parameters"])}}
            for f in case.functions]


@dataclass
class Outcome:
    calls: list[tuple[str, dict]]  # (name, arguments); arguments that are not JSON: {"<invalid>": text}
    content: str


async def ask(client: httpx.AsyncClient, model: str, case: Case, choice: str, stream: bool,
              max_tokens: int) -> Outcome:
    body = {"model": model, "messages": case.messages, "tools": tools_of(case), "tool_choice": choice,
            "temperature": 0, "seed": 1, "max_tokens": max_tokens, "stream": stream}
    if not stream:
        reply = await client.post("/v1/chat/completions", json=body)
        reply.raise_for_status()
        message = reply.json()["choices"][0]["message"]
        calls = [(c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls") or []]
        return Outcome([(name, parse_arguments(args)) for name, args in calls], message.get("content") or "")
    names: dict[int, str] = {}
    arguments: dict[int, str] = {}
    content = []
    async with client.stream("POST", "/v1/chat/completions", json=body) as reply:
        reply.raise_for_status()
        async for line in reply.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            for chunk_choice in json.loads(line[6:]).get("choices") or []:
                delta = chunk_choice.get("delta") or {}
                content.append(delta.get("content") or "")
                for call in delta.get("tool_calls") or []:
                    index = call.get("index", 0)
                    function = call.get("function") or {}
                    if function.get("name"):
                        names[index] = names.get(index, "") + function["name"]
                    arguments[index] = arguments.get(index, "") + (function.get("arguments") or "")
    return Outcome([(names.get(i, ""), parse_arguments(arguments.get(i, ""))) for i in sorted(names)],
                   "".join(content))


def parse_arguments(text: str) -> dict:
    try:
        value = json.loads(text)
        return value if isinstance(value, dict) else {"<invalid>": text}
    except ValueError:
        return {"<invalid>": text}


@dataclass
class Tally:
    expected: int = 0  # calls the ground truth expects, in the one-call cases (simple, multiple)
    surfaced: int = 0
    expected_parallel: int = 0  # ... in the parallel cases (2-4 calls each)
    surfaced_parallel: int = 0
    ast_ok: int = 0
    ast_cases: int = 0
    irrelevance_ok: int = 0
    irrelevance_cases: int = 0
    agree: int = 0
    pairs: int = 0


def score(check, case: Case, outcome: Outcome, tally: Tally) -> None:
    if case.category == "irrelevance":
        tally.irrelevance_cases += 1
        tally.irrelevance_ok += not outcome.calls
        return
    surfaced = min(len(outcome.calls), len(case.answer))
    if case.category == "parallel":
        tally.expected_parallel += len(case.answer)
        tally.surfaced_parallel += surfaced
    else:
        tally.expected += len(case.answer)
        tally.surfaced += surfaced
    tally.ast_cases += 1
    calls = [{name: args} for name, args in outcome.calls]
    try:
        tally.ast_ok += bool(calls) and check(case.functions, calls, case.answer, case.category)
    except Exception:  # the checker rejects some malformed outputs by raising
        pass


async def bench_server(kind: str, args, cases: list[Case], check) -> tuple[dict, list[dict]]:
    port = free_port()
    log_path = Path(f"/tmp/toolcalls-{kind}-{port}.log")
    with log_path.open("w") as log:
        process = await asyncio.to_thread(__import__("subprocess").Popen, server_command(kind, args, port),
                                          stdout=log, stderr=log)
    tallies: dict[tuple[str, bool], Tally] = {}
    raw: list[dict] = []
    try:
        # No keep-alive: llama.cpp's server may close an idle kept-alive connection as it is reused.
        limits = httpx.Limits(max_keepalive_connections=0)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=600, limits=limits) as client:
            model = await wait_ready(client, process)
            for case in cases:
                choices = ["auto"] if case.category == "irrelevance" else args.choices
                for choice in choices:
                    results = {}
                    for stream in (False, True):
                        outcome = await ask(client, model, case, choice, stream, args.max_tokens)
                        score(check, case, outcome, tallies.setdefault((choice, stream), Tally()))
                        results[stream] = outcome
                    agreement = tallies.setdefault((choice, "agree"), Tally())
                    agreement.pairs += 1
                    agreement.agree += results[False].calls == results[True].calls
                    if results[False].calls != results[True].calls:
                        print(f"[{kind}] {case.id} {choice}: stream and non-stream differ: "
                              f"{results[False]!r:.300} / {results[True]!r:.300}", flush=True)
                if args.raw and kind == "rostra":
                    plain = await ask_raw(client, model, case, args.max_tokens)
                    raw.append({"id": case.id, "tools": [t["function"]["name"] for t in tools_of(case)],
                                "output": plain})
                print(f"[{kind}] {case.id}: {results[False].calls!r:.160}", flush=True)
    except Exception:
        print(f"[{kind}] failed; log tail ({log_path}):\n{log_path.read_text()[-3000:]}", file=sys.stderr)
        raise
    finally:
        stop_process(process)
    return tallies, raw


async def ask_raw(client: httpx.AsyncClient, model: str, case: Case, max_tokens: int) -> str:
    """The model's own words for the same prompt: tool_choice "none" keeps the tools in the
    prompt and leaves the output unparsed."""
    body = {"model": model, "messages": case.messages, "tools": tools_of(case), "tool_choice": "none",
            "temperature": 0, "seed": 1, "max_tokens": max_tokens}
    reply = await client.post("/v1/chat/completions", json=body)
    reply.raise_for_status()
    return reply.json()["choices"][0]["message"]["content"] or ""


def saved_path(args, kind: str) -> Path:
    return Path(args.output).with_name(f"toolcalls-{kind}.json")


def server_command(kind: str, args, port: int) -> list[str]:
    common = ["--port", str(port), "--parallel", "1", "--max-model-len", str(args.max_model_len)]
    if args.threads:
        common += ["--threads", str(args.threads)]
    if kind.startswith("rostra"):
        pinned = ["--tool-call-parser", "json"] if kind == "rostra-json" else []
        return [sys.executable, "-m", "rostra.cli", "serve", args.model, "--log-level", "warning", *pinned, *common]
    return [sys.executable, __file__, "--reference-server", "--model", args.model, *common]


def percent(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.0f}%)" if whole else "-"


def table(results: dict[str, dict]) -> str:
    lines = ["| server | tool_choice | stream | calls surfaced: one-call cases | calls surfaced: parallel cases "
             "| AST-correct cases | irrelevance (no call) |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for kind, tallies in results.items():
        for (choice, stream), t in tallies.items():
            if stream == "agree":
                continue
            lines.append(f"| {kind} | {choice} | {'yes' if stream else 'no'} | {percent(t.surfaced, t.expected)} | "
                         f"{percent(t.surfaced_parallel, t.expected_parallel)} | "
                         f"{percent(t.ast_ok, t.ast_cases)} | {percent(t.irrelevance_ok, t.irrelevance_cases)} |")
    lines += ["", "| server | tool_choice | stream == non-stream (calls) |", "| --- | --- | --- |"]
    for kind, tallies in results.items():
        for (choice, stream), t in tallies.items():
            if stream == "agree":
                lines.append(f"| {kind} | {choice} | {percent(t.agree, t.pairs)} |")
    return "\n".join(lines)


def reference_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reference-server", action="store_true")
    parser.add_argument("--model")
    parser.add_argument("--port", type=int)
    parser.add_argument("--parallel", type=int, default=1)
    parser.add_argument("--max-model-len", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args(argv)
    import xllamacpp  # the chat template's tool calling needs llama.cpp's jinja mode
    original = xllamacpp.CommonParams

    def with_jinja():
        params = original()
        params.use_jinja = True
        return params

    xllamacpp.CommonParams = with_jinja
    run_reference_server(args)


async def main_async(args) -> None:
    check = load_checker()
    cases = load_cases(args.per_category)
    raw: list[dict] = []
    for kind in args.servers:
        tallies, samples = await bench_server(kind, args, cases, check)
        raw += samples
        saved = [{"choice": c, "stream": s, **t.__dict__} for (c, s), t in tallies.items()]
        saved_path(args, kind).write_text(json.dumps({"per_category": args.per_category, "tallies": saved}))
    # Each server's figures are kept beside the table, so one server can be re-run alone.
    results: dict[str, dict] = {}
    for kind in SERVERS:
        if saved_path(args, kind).exists():
            data = json.loads(saved_path(args, kind).read_text())
            if data["per_category"] == args.per_category:
                results[kind] = {(t.pop("choice"), t.pop("stream")): Tally(**t) for t in data["tallies"]}
    report = table(results)
    print(report)
    categories = ", ".join(f"{c} ({CATEGORIES[c]} first {args.per_category})" for c in CATEGORIES)
    header = (f"# Tool calling: rostra vs llama.cpp server\n\n{datetime.date.today()}, {machine_info()}\n\n"
              f"Model `{Path(args.model).name}`, BFCL v4 cases: {categories}; temperature 0, "
              f"max_tokens {args.max_tokens}; rostra and llama.cpp at zero configuration"
              f" (rostra-json: `--tool-call-parser json`).\n\n")
    Path(args.output).write_text(header + report + "\n")
    if args.raw:
        Path(args.raw).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in raw))


def main() -> None:
    if "--reference-server" in sys.argv:
        reference_main(sys.argv[1:])
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="GGUF file")
    parser.add_argument("--per-category", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--max-model-len", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--servers", nargs="+", default=["rostra", "llama.cpp"], choices=SERVERS)
    parser.add_argument("--choices", nargs="+", default=["auto", "required"], choices=["auto", "required"],
                        help="tool_choice values for the relevant cases (irrelevance cases: auto only)")
    parser.add_argument("--raw", help="write the model's unparsed outputs (JSON lines) here")
    parser.add_argument("--output", default=str(RESULTS))
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
