"""Embeddings benchmark: texts per second, rostra over HTTP against sentence-transformers in-process (and
infinity-emb's server, when its own virtual environment is given), all-MiniLM-L6-v2 on the CPU.

    python benchmarks/bench_embeddings.py [--threads 2] [--rounds 3] [--infinity-bin /path/to/infinity_emb]
    python benchmarks/bench_embeddings.py --gguf [--threads 2] [--parallel 4]

With --gguf, the model is its GGUF (llama.cpp's BERT layout, F32, made by tests/bert_gguf.py) and rostra's
llama.cpp engine serves it, against llama.cpp's own server (the one xllamacpp embeds, the build rostra runs on)
configured as rostra configures it, on its OpenAI-compatible /v1/embeddings; st stays the in-process ceiling.

Contenders, each with the same number of torch threads (--threads):

- st: `SentenceTransformer.encode(texts, batch_size=32)` in a process of its own (the ceiling: no HTTP, no
  queueing, the whole corpus sorted and batched at once);
- rostra: `rostra serve --engine transformers CHECKPOINT --threads N`, driven by an aiohttp client in this
  process at 1, 8 and 32 concurrent clients, sending 1 or 32 texts per request (float encoding);
- infinity: `infinity_emb v2 --model-id CHECKPOINT --engine torch --device cpu`, the same client (optional:
  infinity-emb needs its own environment, see benchmarks/README.md).

Every level embeds the same corpus (sentences of 4 to 60 words, fixed seed). Rounds interleave the contenders
level by level (rostra then infinity, swapped in odd rounds; st once per round), so a drift of the load on a
shared machine hits them alike; the report gives per-round figures and the medians. Memory: each contender
process's peak resident set (VmHWM), after its last level.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from embedding_models import minilm_checkpoint, minilm_gguf  # noqa: E402  (tests/ holds the one unpacker)

LEVELS = [(1, 1), (8, 1), (32, 1), (1, 32), (8, 32), (32, 32)]  # (concurrent clients, texts per request)
WORDS = ("the model maps every sentence to a vector so that similar meanings land close together while "
         "unrelated text ends up far apart which is what retrieval search clustering and deduplication all "
         "rely on when a user asks a question about documents stored in an index").split()


def corpus(count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 60))).capitalize() + "."
            for _ in range(count)]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# -- sentence-transformers in-process (run as a child: its own threads and memory) ---------------------------

def st_child(checkpoint: str, threads: int, count: int) -> None:
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(threads)
    model = SentenceTransformer(checkpoint, device="cpu")
    texts = corpus(count)
    model.encode(texts[:64], batch_size=32)  # warm-up
    started = time.perf_counter()
    model.encode(texts, batch_size=32)
    elapsed = time.perf_counter() - started
    print(json.dumps({"texts_per_s": count / elapsed, "peak_rss_mb": peak_rss_mb(os.getpid())}))


def run_st(checkpoint: Path, threads: int, count: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--st-child", str(checkpoint), "--threads", str(threads),
                          "--texts", str(count)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def llamacpp_child(gguf: str, threads: int, parallel: int, port: int) -> None:
    """llama.cpp's server on the GGUF, configured as rostra's llama.cpp engine configures it for embeddings
    (rostra/engines/llamacpp.py): the pooling the file declares, one micro-batch per input, unified KV."""
    import threading

    import xllamacpp

    sys.path.insert(0, str(ROOT))
    from rostra.gguf_metadata import context_length, read_gguf_metadata

    context = context_length(read_gguf_metadata(Path(gguf))) or 512
    params = xllamacpp.CommonParams()
    params.model.path = gguf
    params.n_parallel = parallel
    params.n_ctx = context * parallel
    params.embedding, params.kv_unified = True, True
    params.pooling_type = xllamacpp.llama_pooling_type.LLAMA_POOLING_TYPE_MEAN
    params.n_batch = params.n_ubatch = context
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = threads
    params.port, params.hostnames = port, ["127.0.0.1"]
    _server = xllamacpp.Server(params)  # serves while referenced
    threading.Event().wait()  # until the benchmark terminates this process


# -- servers over HTTP -----------------------------------------------------------------------------------------

class Server:
    def __init__(self, kind: str, args: argparse.Namespace, checkpoint: Path):
        self.kind, self.port = kind, free_port()
        self.model = "minilm"
        if kind == "rostra":
            model = ["--engine", "transformers", str(checkpoint)] if not args.gguf else [
                str(minilm_gguf()), "--parallel", str(args.parallel)]
            command = [sys.executable, "-m", "rostra.cli", "serve", *model,
                       "--served-model-name", self.model, "--threads", str(args.threads), "--port", str(self.port),
                       "--log-level", "warning", "--data-dir", tempfile.mkdtemp(prefix="bench-embed-")]
            env = os.environ
        elif kind == "llamacpp":
            command = [sys.executable, __file__, "--llamacpp-child", str(minilm_gguf()), "--threads", str(args.threads),
                       "--parallel", str(args.parallel), "--port", str(self.port)]
            env = os.environ
        else:
            command = [args.infinity_bin, "v2", "--model-id", str(checkpoint), "--served-model-name", self.model,
                       "--engine", "torch", "--device", "cpu", "--port", str(self.port), "--batch-size", "32",
                       "--no-bettertransformer", "--log-level", "warning"]
            env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads),
                   "INFINITY_ANONYMOUS_USAGE_STATS": "0", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1"}
        self.process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.base = f"http://127.0.0.1:{self.port}"
        self.path = {"rostra": "/v1/embeddings", "llamacpp": "/v1/embeddings", "infinity": "/embeddings"}[kind]

    async def ready(self, session: aiohttp.ClientSession, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.kind} exited: {self.process.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
            try:
                async with session.post(self.base + self.path, json={"model": self.model, "input": ["warm"]}) as r:
                    if r.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.5)
        raise RuntimeError(f"{self.kind} did not become ready")

    def stop(self) -> float:
        rss = peak_rss_mb(self.process.pid)
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:  # still embedding what a run cut short had queued
            self.process.kill()
            self.process.wait()
        return rss


async def drive(session: aiohttp.ClientSession, server: Server, texts: list[str], clients: int, per_request: int) -> float:
    """All `texts`, `per_request` at a time, by `clients` concurrent clients: texts per second."""
    requests = [texts[i:i + per_request] for i in range(0, len(texts), per_request)]
    queue = iter(requests)

    async def client() -> None:
        for batch in queue:
            async with session.post(server.base + server.path, json={"model": server.model, "input": batch,
                                                                      "encoding_format": "float"}) as response:
                body = await response.json()
                assert response.status == 200 and len(body["data"]) == len(batch), body

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return len(texts) / (time.perf_counter() - started)


async def bench(args: argparse.Namespace) -> dict:
    checkpoint = minilm_checkpoint()
    kinds = contenders(args)
    texts = corpus(args.texts)
    results: dict = {"rounds": [], "rss": {}}
    connector = aiohttp.TCPConnector(limit=64)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=600)) as session:
        servers = {kind: Server(kind, args, checkpoint) for kind in kinds}
        try:
            for server in servers.values():
                await server.ready(session)
                await drive(session, server, texts[:256], 8, 8)  # warm-up
            for number in range(args.rounds):
                figures: dict = {"st": run_st(checkpoint, args.threads, args.texts)}
                order = kinds if number % 2 == 0 else kinds[::-1]
                for clients, per_request in LEVELS:
                    for kind in order:
                        rate = await drive(session, servers[kind], texts, clients, per_request)
                        figures[f"{kind} c={clients} x{per_request}"] = rate
                        print(f"round {number + 1} {kind} c={clients} x{per_request}: {rate:.1f} texts/s", flush=True)
                print(f"round {number + 1} st: {figures['st']['texts_per_s']:.1f} texts/s", flush=True)
                results["rounds"].append(figures)
                # Peak memory so far, and the report of the rounds done: a run cut short still leaves them.
                results["rss"] = {kind: peak_rss_mb(server.process.pid) for kind, server in servers.items()}
                results["rss"]["st"] = statistics.median(r["st"]["peak_rss_mb"] for r in results["rounds"])
                args.output.write_text(report(results, args))
        finally:
            for kind, server in servers.items():
                results["rss"][kind] = server.stop()
    return results


def contenders(args: argparse.Namespace) -> list[str]:
    return ["rostra", "llamacpp"] if args.gguf else ["rostra"] + (["infinity"] if args.infinity_bin else [])


def report(results: dict, args: argparse.Namespace) -> str:
    rounds = results["rounds"]
    st = statistics.median(r["st"]["texts_per_s"] for r in rounds)
    kinds = contenders(args)
    model = (f"all-MiniLM-L6-v2 GGUF F32 on llama.cpp ({args.parallel} slots, {args.threads} threads)" if args.gguf
             else f"all-MiniLM-L6-v2, {args.threads} torch threads")
    lines = [f"{model}, CPU, {args.texts} texts per level, {len(rounds)} rounds "
             f"({datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores)", "",
             "| clients x texts/request | " + " | ".join(f"{k} texts/s" for k in kinds) +
             " | st encode() texts/s | rostra / st (paired) |" + (f" rostra / {kinds[1]} (paired) |" if len(kinds) > 1 else ""),
             "|---" * (3 + len(kinds) + (len(kinds) > 1)) + "|"]
    for clients, per_request in LEVELS:
        key = f"c={clients} x{per_request}"
        medians = [statistics.median(r[f"{k} {key}"] for r in rounds) for k in kinds]
        paired = statistics.median(r[f"rostra {key}"] / r["st"]["texts_per_s"] for r in rounds)
        row = f"| {clients} x {per_request} | " + " | ".join(f"{m:.1f}" for m in medians) + f" | {st:.1f} | {paired:.2f}x |"
        if len(kinds) > 1:
            row += f" {statistics.median(r[f'rostra {key}'] / r[f'{kinds[1]} {key}'] for r in rounds):.2f}x |"
        lines.append(row)
    lines += ["", "Peak resident memory (VmHWM): " + ", ".join(f"{k} {v:.0f} MB" for k, v in results["rss"].items()),
              "", "Per round (texts/s):", ""]
    for number, figures in enumerate(rounds, 1):
        lines.append(f"- round {number}: st {figures['st']['texts_per_s']:.1f}; " + "; ".join(
            f"{key} {value:.1f}" for key, value in figures.items() if key != "st"))
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--texts", type=int, default=1024, help="texts embedded per level")
    parser.add_argument("--infinity-bin", help="the infinity_emb command of its own virtual environment")
    parser.add_argument("--gguf", action="store_true", help="rostra's llama.cpp engine on the model's GGUF, against "
                        "llama.cpp's own server")
    parser.add_argument("--parallel", type=int, default=4, help="llama.cpp slots, for both servers (--gguf)")
    parser.add_argument("--output", type=Path, default=Path(__file__).parent / "results" / "embeddings.md")
    parser.add_argument("--st-child", help=argparse.SUPPRESS)
    parser.add_argument("--llamacpp-child", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.st_child:
        st_child(args.st_child, args.threads, args.texts)
        return
    if args.llamacpp_child:
        llamacpp_child(args.llamacpp_child, args.threads, args.parallel, args.port)
        return
    results = asyncio.run(bench(args))
    text = report(results, args)
    print(text)
    args.output.write_text(text)


if __name__ == "__main__":
    main()
