"""rostra's own CPU per streamed token, the engine taken out of the measurement.

Why: on a 2-core machine every microsecond rostra's event loop spends per token is taken from
llama.cpp's compute threads, and the serving benchmark (bench_serving.py) cannot show a change of a
few percent in rostra's own work. (A byte relay in its place measured level with llama.cpp's server:
`bench_serving.py --measure relay`, so the extra hop itself costs nothing; see benchmarks/README.md.)
This measures rostra's own work per token, steadily.

How: rostra serves the embedded GGUF as usual (llama.cpp loads it, tokenizes prompts), but its
engine's token streams come from a fake llama.cpp listener in another process, which sends llama.cpp's
chunk format (/completion with return_tokens, as captured from xllamacpp, one chunk per token) at a
fixed pace: every --step-ms, one token to every open stream, as llama.cpp's batched decode steps do. The load is
bench_serving.py's streamed chat requests. The figure is the rostra process's CPU time (all threads,
and the event loop's alone, from /proc) per streamed token.

    python benchmarks/loop_cost.py                      # c=1 and c=8, 512 tokens per request
    python benchmarks/loop_cost.py --py-spy spy.txt     # and py-spy profiles (raw, native frames, by thread)

py-spy stops the process for each sample: its picture of where time goes is skewed toward system calls
(a write it catches looks long). Timing a suspect call with time.thread_time() around it is surer.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
import bench_serving  # noqa: E402
from bench_serving import cpu_seconds  # noqa: E402

# Four tokens as llama.cpp's /completion stream sends them to rostra (SmolLM2, ids real).
TOKENS = [(338, " that"), (3935, " goes"), (3070, " beyond"), (260, " the")]


def chunk(token_id: int, text: str, predicted: int) -> bytes:
    return json.dumps({"index": 0, "content": text, "tokens": [token_id], "stop": False, "id_slot": -1,
                                     "tokens_predicted": predicted, "tokens_evaluated": 50}).encode()


def last_chunk(tokens: int) -> bytes:
    return json.dumps({
        "index": 0, "content": "", "tokens": [], "id_slot": 1, "stop": True, "tokens_predicted": tokens,
        "tokens_evaluated": 50, "stop_type": "limit", "stopping_word": "", "tokens_cached": tokens + 50,
        "timings": {"cache_n": 0, "prompt_n": 50, "predicted_n": tokens}}).encode()


def http_chunk(event: bytes) -> bytes:
    frame = b"data: " + event + b"\n\n"
    return f"{len(frame):x}\r\n".encode() + frame + b"\r\n"


def run_fake_listener(port: int, step: float) -> None:
    """The fake llama.cpp: every `step` seconds, one token to each open stream, each its own write."""
    streams: dict[asyncio.StreamWriter, list[int]] = {}  # writer -> [tokens left, tokens sent]

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
        body = json.loads(await reader.readexactly(length))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        streams[writer] = [body["n_predict"], 0]
        await reader.read()  # until rostra closes the connection
        streams.pop(writer, None)
        writer.close()

    async def steps() -> None:
        while True:
            await asyncio.sleep(step)
            for writer, state in list(streams.items()):
                if state[0] == 0:
                    continue
                state[0] -= 1
                state[1] += 1
                writer.write(http_chunk(chunk(*TOKENS[state[1] % len(TOKENS)], state[1])))
                if state[0] == 0:
                    writer.write(http_chunk(last_chunk(state[1])) + b"0\r\n\r\n")

    async def main() -> None:
        server = await asyncio.start_server(serve, "127.0.0.1", port)
        async with server:
            await steps()

    asyncio.run(main())


def run_rostra(listener_port: int, rostra_args: list[str]) -> None:
    """rostra as `rostra serve` runs it, but with its engine's token streams read from the fake listener."""
    from rostra.cli import main
    from rostra.engines.llamacpp import LlamaCppEngine
    from rostra.engines.llamacpp_http import LoopbackClient

    start = LlamaCppEngine.start

    async def start_then_redirect(self: LlamaCppEngine) -> None:
        await start(self)
        assert self._loopback is not None
        self._loopback.stream = LoopbackClient(f"http://127.0.0.1:{listener_port}", "fake").stream  # type: ignore[method-assign]

    LlamaCppEngine.start = start_then_redirect  # type: ignore[method-assign]
    main(["serve", *rostra_args])


async def measure(args: argparse.Namespace, port: int, server: subprocess.Popen) -> None:
    limits = httpx.Limits(max_connections=max(args.concurrency) + 4, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=600, limits=limits) as client:
        model = await bench_serving.wait_ready(client, server)
        ids = itertools.count()
        await bench_serving.run_level(client, model, ids, 2, 2, args.max_tokens)  # warm-up
        for concurrency in args.concurrency:
            spy = None
            if args.py_spy:
                spy = subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(server.pid),
                                        "-o", f"{args.py_spy}.c{concurrency}", "-f", "raw", "-r", "200", "--native", "--threads"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                await asyncio.sleep(1)
            before, loop_before = cpu_seconds(server.pid), cpu_seconds(server.pid, server.pid)
            started = time.perf_counter()
            level = await bench_serving.run_level(client, model, ids, concurrency, args.requests or 2 * concurrency,
                                                  args.max_tokens)
            seconds = time.perf_counter() - started
            after, loop_after = cpu_seconds(server.pid), cpu_seconds(server.pid, server.pid)  # all; the loop
            if spy is not None:
                spy.send_signal(2)
                spy.wait()
            print(f"c={concurrency}: {level.tokens} tokens in {seconds:.1f} s ({level.tokens / seconds:.0f} tok/s); "
                  f"rostra CPU per token {(after - before) / level.tokens * 1e6:.0f} us, "
                  f"event loop {(loop_after - loop_before) / level.tokens * 1e6:.0f} us", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--requests", type=int, help="requests per level (default: 2 x concurrency)")
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--step-ms", type=float, default=5.0, help="the fake engine's pace: one token per stream per step")
    parser.add_argument("--py-spy", help="record py-spy profiles (raw, 200 Hz, native) to FILE.cN, one per level")
    parser.add_argument("--data-dir", help=argparse.SUPPRESS)
    parser.add_argument("--fake-listener", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--rostra", type=int, nargs=2, help=argparse.SUPPRESS)  # listener port, own port
    args = parser.parse_args()
    if args.fake_listener:
        return run_fake_listener(args.fake_listener, args.step_ms / 1000)
    from rostra.embedded import embedded_model_path

    if args.rostra:
        listener_port, port = args.rostra
        return run_rostra(listener_port, [str(embedded_model_path()), "--port", str(port), "--log-level", "warning",
                                          "--parallel", "8", "--data-dir", args.data_dir])
    listener_port, port = bench_serving.free_port(), bench_serving.free_port()
    listener = subprocess.Popen([sys.executable, __file__, "--fake-listener", str(listener_port),
                                 "--step-ms", str(args.step_ms)])
    data_dir = tempfile.TemporaryDirectory(prefix="loop-cost-")
    server = subprocess.Popen([sys.executable, __file__, "--rostra", str(listener_port), str(port),
                               "--data-dir", data_dir.name],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        asyncio.run(measure(args, port, server))
    finally:
        bench_serving.stop_process(server)
        bench_serving.stop_process(listener)


if __name__ == "__main__":
    main()
