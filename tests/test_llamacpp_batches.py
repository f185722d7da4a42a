"""llama.cpp tokenization of many texts (rostra/engines/llamacpp_batches.py): few requests over a bounded pool,
the same tokens as one request per text, and 2,048 texts embedded with thread and descriptor counts bounded
(they once opened a connection per text: 1,045 threads, 4,121 sockets, a dead process; issue 33)."""

from __future__ import annotations

import asyncio
import os
import random
import threading

import pytest

from embedding_models import minilm_gguf
from rostra.embedded import embedded_model_path
from rostra.engines.llamacpp import LlamaCppEngine

ODD_TEXTS = ["", " ", "hello", " leading space", "trailing space ", "two\n\nlines", "<|im_end|> special",
             "[CLS] bracketed [SEP]", "émoji 🙂 ünïcode", "tab\tseparated", "a" * 300, "-1", "12345 numbers"]


def texts(count: int, seed: int = 5) -> list[str]:
    rng = random.Random(seed)
    words = ["alpha", "beta", " ", "\n", "gamma!", "Δ", "🙂", "[SEP]", "<|im_start|>", "x" * 20]
    return ODD_TEXTS + ["".join(rng.choice(words) for _ in range(rng.randrange(0, 30))) for _ in range(count)]


def open_counts() -> tuple[int, int]:
    return len(os.listdir("/proc/self/task")), len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("model", ["embedded", "bert"])
def test_batched_tokens_are_one_request_per_texts_own(model):
    path = embedded_model_path() if model == "embedded" else minilm_gguf("f32")

    async def scenario():
        engine = LlamaCppEngine(path, "m", max_model_len=512, parallel=1, speculative="off")
        await engine.start()
        try:
            sample = texts(300)
            result = {}
            for add_special in (False, True):
                batched = await engine.tokenize_texts(sample, add_special, None)
                alone = [await engine.tokenize(text, add_special) for text in sample]
                result[add_special] = (batched, alone)
            return result
        finally:
            await engine.close()

    for add_special, (batched, alone) in asyncio.run(scenario()).items():
        assert batched == alone, add_special


def test_two_thousand_texts_embed_with_bounded_threads_and_descriptors():
    async def scenario():
        engine = LlamaCppEngine(minilm_gguf("f32"), "m", max_model_len=64, parallel=8)
        await engine.start()
        try:
            before = open_counts()
            peak = list(before)
            done = threading.Event()

            def watch():
                while not done.is_set():
                    threads, fds = open_counts()
                    peak[0], peak[1] = max(peak[0], threads), max(peak[1], fds)
                    done.wait(0.005)

            watcher = threading.Thread(target=watch)
            watcher.start()
            try:
                sample = [f"passage {i}" for i in range(2048)]  # short: the embedding itself is not tested here
                ids = await engine.tokenize_texts(sample, True, 64)
                vectors = await engine.embed(ids)
            finally:
                done.set()
                watcher.join()
            return before, peak, len(vectors), len(vectors[0])
        finally:
            await engine.close()

    before, peak, count, width = asyncio.run(scenario())
    print(f"threads {before[0]} -> peak {peak[0]}, descriptors {before[1]} -> peak {peak[1]}")
    assert count == 2048 and width == 384
    assert peak[0] - before[0] <= 8, (before, peak)  # was one per text
    assert peak[1] - before[1] <= 16, (before, peak)
