"""Many models in one server: cold loads, and the model router's cost on a loaded model.

1. Cold load: a server of several models (`--models-config`, nothing preloaded); each round unloads a model
   (POST /admin/models/unload) and times a streamed request naming it until its first token: the engine
   built, the model loaded, the prompt prefilled. For the GGUF (llama.cpp) and the same model as a
   transformers checkpoint. The reference: llama.cpp's own load of the same GGUF (xllamacpp's server
   constructed, as bench_serving.py's reference is) and its first token for the same request.
2. Router overhead: tok/s at c=1/4/8 of the single-model server (`rostra serve MODEL`) against a
   many-models server serving the same GGUF among others (preloaded), in paired rounds as bench_serving.py
   runs them (both servers up, each level on one right after the other, order alternating by round).

Run it on a quiet machine for figures to report. Results: benchmarks/results/models.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import itertools
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import AsyncIterator

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from bench_serving import (Level, free_port, llama_server_params, machine_info, measure_level,  # noqa: E402
                           rostra_version, rounds_table, stop_process, table, wait_ready, warm_up, PROMPT)

RESULTS = Path(__file__).parent / "results" / "models.md"
ADMIN_KEY = "bench-admin"


def models_config(args: argparse.Namespace, directory: Path) -> Path:
    config = directory / "models.yaml"
    config.write_text(f"""models:
  - name: gguf
    model: {args.model}
    parallel: {args.parallel}
    max_model_len: {args.max_model_len}
  - name: other
    model: {args.model}
    parallel: 1
    max_model_len: 1024
  - name: checkpoint
    model: {args.checkpoint}
    engine: transformers
    parallel: 1
    max_model_len: 1024
""")
    return config


def rostra_command(args: argparse.Namespace, port: int, many: Path | None, preload: bool) -> list[str]:
    command = [sys.executable, "-m", "rostra.cli", "serve", "--port", str(port), "--log-level", "warning",
               "--admin-key", ADMIN_KEY, "--data-dir", tempfile.mkdtemp(prefix="bench-models-data-")]
    if args.threads:
        command += ["--threads", str(args.threads)]
    if many is None:
        return command + [args.model, "--parallel", str(args.parallel), "--max-model-len", str(args.max_model_len)]
    return command + ["--models-config", str(many), *(["--preload", "gguf"] if preload else [])]


@contextlib.asynccontextmanager
async def server(command: list[str], port: int, concurrency: int) -> AsyncIterator[httpx.AsyncClient]:
    log = tempfile.NamedTemporaryFile(prefix="bench-models-", suffix=".log", delete=False)
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    limits = httpx.Limits(max_connections=concurrency + 4, max_keepalive_connections=0)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=600, limits=limits) as client:
            await wait_ready(client, process)
            yield client
    except Exception:
        print(f"server failed; log tail ({log.name}):\n" + Path(log.name).read_text()[-3000:], file=sys.stderr)
        raise
    finally:
        stop_process(process)
        log.close()


async def first_token(client: httpx.AsyncClient, model: str) -> float:
    """Seconds from sending a streamed chat request to its first streamed token."""
    body = {"model": model, "messages": [{"role": "user", "content": PROMPT.format(i=0)}], "max_tokens": 4,
            "temperature": 0, "stream": True}
    sent = time.perf_counter()
    elapsed = None
    async with client.stream("POST", "/v1/chat/completions", json=body) as reply:
        if reply.status_code != 200:
            raise RuntimeError(f"HTTP {reply.status_code}: {(await reply.aread())[:300]!r}")
        async for line in reply.aiter_lines():  # read to the end: the next step unloads the model
            if elapsed is None and line.startswith("data: ") and '"content":"' in line.replace(" ", ""):
                elapsed = time.perf_counter() - sent
    if elapsed is None:
        raise RuntimeError("no token streamed")
    return elapsed


async def unloaded(client: httpx.AsyncClient, model: str) -> None:
    """Unload `model`. Right after a stream's last event its lease may still be held for a moment (the server
    returns it when the response has closed): the admin route says 409 then, and is asked again."""
    for _ in range(100):
        reply = await client.post("/admin/models/unload", json={"model": model},
                                  headers={"Authorization": f"Bearer {ADMIN_KEY}"})
        if reply.status_code != 409:
            reply.raise_for_status()
            return
        await asyncio.sleep(0.05)
    raise RuntimeError(f"{model} stayed busy")


async def cold_loads(args: argparse.Namespace, config: Path) -> dict[str, list[float]]:
    port = free_port()
    times: dict[str, list[float]] = {"gguf": [], "checkpoint": []}
    async with server(rostra_command(args, port, config, preload=False), port, 2) as client:
        for n in range(args.load_rounds):
            for model in times:
                await unloaded(client, model)
                times[model].append(await first_token(client, model))
                print(f"[cold load {n + 1}] {model}: {times[model][-1]:.2f} s to the first token", flush=True)
                await unloaded(client, model)
    return times


async def reference_loads(args: argparse.Namespace) -> list[tuple[float, float]]:
    """llama.cpp alone: (its server constructed: the load, then the first token of the same request)."""
    import xllamacpp

    results = []
    for n in range(args.load_rounds):
        port = free_port()
        started = time.perf_counter()
        reference = await asyncio.to_thread(xllamacpp.Server, llama_server_params(args, port))
        loaded = time.perf_counter() - started
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=600) as client:
            while (await client.get("/health")).status_code != 200:
                await asyncio.sleep(0.01)
            model = (await client.get("/v1/models")).json()["data"][0]["id"]
            token = await first_token(client, model)
        results.append((loaded, loaded + token))
        print(f"[cold load {n + 1}] llama.cpp: loaded in {loaded:.2f} s, first token at {loaded + token:.2f} s",
              flush=True)
        del reference
    return results


async def router_overhead(args: argparse.Namespace, config: Path) -> dict[str, list[dict[int, Level]]]:
    """Paired rounds: `rostra` the many-models server (model `gguf`), `reference` the single-model server."""
    results: dict[str, list[dict[int, Level]]] = {"rostra": [], "reference": []}
    async with contextlib.AsyncExitStack() as stack:
        ports = {"rostra": free_port(), "reference": free_port()}
        commands = {"rostra": rostra_command(args, ports["rostra"], config, preload=True),
                    "reference": rostra_command(args, ports["reference"], None, preload=True)}
        clients = {kind: await stack.enter_async_context(server(commands[kind], ports[kind], max(args.concurrency)))
                   for kind in results}
        models = {"rostra": "gguf", "reference": (await clients["reference"].get("/v1/models")).json()["data"][0]["id"]}
        ids = {kind: itertools.count() for kind in results}
        for kind in results:
            await warm_up(clients[kind], models[kind], ids[kind], args)
        for n in range(args.rounds):
            print(f"--- round {n + 1}/{args.rounds}", flush=True)
            for kind in results:
                results[kind].append({})
            for c in args.concurrency:
                for kind in (("rostra", "reference") if n % 2 == 0 else ("reference", "rostra")):
                    results[kind][n][c] = await measure_level(clients[kind], models[kind], kind, ids[kind], c, args)
    return results


def load_table(loads: dict[str, list[float]], reference: list[tuple[float, float]]) -> str:
    rows = ["| model | rostra: request to first token, median s (rounds) | llama.cpp alone: load s | "
            "llama.cpp alone: load + first token s |", "|---|---:|---:|---:|"]
    for model, times in loads.items():
        ref = (f"{statistics.median(r[0] for r in reference):.2f} | {statistics.median(r[1] for r in reference):.2f}"
               if model == "gguf" else "n/a | n/a")
        rows.append(f"| {model} | {statistics.median(times):.2f} ({', '.join(f'{t:.2f}' for t in times)}) | {ref} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="GGUF file (default: the embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--checkpoint", type=Path,
                        help="transformers checkpoint (default: the GGUF converted into .cache/smollm2-hf)")
    parser.add_argument("--part", choices=["loads", "overhead", "both"], default="both")
    parser.add_argument("--load-rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=64, help="tokens generated per request (overhead)")
    parser.add_argument("--requests-per-level", type=int, help="default: max(4, 2 x concurrency)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--max-model-len", type=int, default=2048)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    from rostra.embedded import embedded_model_path

    args.model = args.model or str(embedded_model_path())
    if args.checkpoint is None:
        from rostra.engines.transformers_checkpoint import checkpoint_from_gguf

        args.checkpoint = checkpoint_from_gguf(Path(args.model), Path(__file__).resolve().parents[1] / ".cache"
                                               / "smollm2-hf")
    started = datetime.datetime.now().astimezone()
    sections = []
    with tempfile.TemporaryDirectory() as directory:
        config = models_config(args, Path(directory))
        if args.part in ("loads", "both"):
            loads = asyncio.run(cold_loads(args, config))
            reference = asyncio.run(reference_loads(args))
            sections.append(f"## Cold load\n\nA streamed chat request naming an unloaded model, to its first token "
                            f"({args.load_rounds} rounds; the model unloaded before each).\n\n"
                            + load_table(loads, reference))
        if args.part in ("overhead", "both"):
            results = asyncio.run(router_overhead(args, config))
            sections.append("## Router overhead on a loaded model\n\n`rostra` = the many-models server (3 models, "
                            "the one measured preloaded), `reference` = the single-model server `rostra serve "
                            f"MODEL`; {args.max_tokens} tokens per request, `ignore_eos`, paired rounds.\n\n"
                            + table(results["rostra"], results["reference"]).replace("reference", "single")
                            + "\n\n### Every round\n\n" + rounds_table(results))
    command = " ".join(["python benchmarks/bench_models.py", *sys.argv[1:]])
    report = f"""# Many models: cold loads and router overhead

- date: {started:%Y-%m-%d %H:%M %Z}
- machine: {machine_info()}
- rostra commit: {rostra_version()}
- model: `{Path(args.model).name}` ({Path(args.model).stat().st_size / 1e6:.0f} MB); checkpoint: the same model
  converted to a transformers checkpoint
- servers: {args.parallel} slots, {args.max_model_len} context per slot, threads: {args.threads or "default"}
- command: `{command}`

""" + "\n\n".join(sections) + "\n"
    args.output.parent.mkdir(parents=True, exist_ok=True)
    if args.output.exists() and args.part != "both":
        report = args.output.read_text() + "\n" + report
    args.output.write_text(report)
    print(report)


if __name__ == "__main__":
    main()
