"""Where an image request's time to first token goes: the same kind of request through rostra's whole road
(in-process app, streamed: data URL decoded, PNG re-encoded, template, /tokenize, slot, loopback /completion)
against the same multimodal prompt sent straight to llama.cpp's loopback /completion in the same engine,
alternating; a different image each time (none is cached). The difference is rostra's own cost. The first pair
warms both up and is left out of the medians.

    python benchmarks/profile_images.py [--pairs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "benchmarks")]

from bench_images import image_url  # noqa: E402
from harness import Exchange, InProcessServer  # noqa: E402
from mmproj_gguf import mmproj_path  # noqa: E402

from rostra.embedded import embedded_model_path  # noqa: E402
from rostra.engines.llamacpp import MEDIA_MARKER  # noqa: E402


def first_token_seen(exchange: Exchange) -> bool:
    return any((choice.get("delta") or {}).get("content") or choice.get("finish_reason")
               for event in exchange.events() for choice in event.get("choices") or [])


async def through_rostra(server: InProcessServer, model: str, n: int) -> float:
    body = {"model": model, "max_tokens": 1, "stream": True, "temperature": 0, "messages": [{"role": "user", "content": [
        {"type": "text", "text": f"Describe picture {n}."}, {"type": "image_url", "image_url": {"url": image_url(n, 256)}}]}]}
    started = time.perf_counter()
    exchange = server.call("POST", "/v1/chat/completions", body)
    await exchange.wait_until(first_token_seen, timeout=120)
    elapsed = time.perf_counter() - started
    await exchange.finished()
    return elapsed


async def straight_to_llamacpp(engine, n: int) -> float:
    text = f"<|im_start|>user\nDescribe picture {n}.{MEDIA_MARKER}<|im_end|>\n<|im_start|>assistant\n"
    body = {"prompt": {"prompt_string": text, "multimodal_data": [image_url(n, 256).split(",", 1)[1]]},
            "n_predict": 1, "stream": True, "temperature": 0}
    started = time.perf_counter()
    stream = await engine._loopback.stream("/completion", body)
    await stream.next_batch()
    elapsed = time.perf_counter() - started
    stream.close()
    return elapsed


async def main(pairs: int) -> None:
    directory = ROOT / ".cache" / "profile-images"
    directory.mkdir(parents=True, exist_ok=True)
    async with InProcessServer(directory, [], engine="llamacpp", model=str(embedded_model_path()), parallel=1,
                               threads=1, mmproj=str(mmproj_path(ROOT / ".cache")), max_model_len=2048,
                               speculative="off") as server:
        slot = server.app.state.rostra.models.slots[0]
        ours, theirs = [], []
        for n in range(pairs):
            ours.append(await through_rostra(server, slot.spec.name, 1000 + n))
            theirs.append(await straight_to_llamacpp(slot.bundle.engine, 2000 + n))
    for name, times in (("through rostra", ours), ("straight to llama.cpp", theirs)):
        print(f"{name}: TTFT ms {[round(t * 1000) for t in times]}, median after the first (warm-up) "
              f"{statistics.median(times[1:]) * 1000:.0f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=8)
    asyncio.run(main(parser.parse_args().pairs))
