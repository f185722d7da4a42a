"""The speculation probe runs once per model file and settings (issue 33: it made every start take ~1 s, ~4
minutes on a busy machine): its calibration is kept in the data directory and reused while the file's path,
size and modification time and the settings stay the same."""

from __future__ import annotations

import asyncio

from rostra.engines.llamacpp_speculation import CalibrationCache, Speculation


class FakeServer:
    """llama.cpp's /completion timings, made up: a decode of 10 ms per token, a batch of n tokens n ms."""

    def __init__(self):
        self.calls = 0

    async def post(self, path: str, body: dict) -> dict:
        self.calls += 1
        n = len(body["prompt"]) - 64 or 1
        return {"timings": {"predicted_ms": 90.0, "predicted_n": 9, "prompt_ms": float(n), "prompt_n": n}}


def decide(cache: CalibrationCache, server: FakeServer, fingerprint: str) -> Speculation:
    speculation = Speculation("auto", None, cache)
    asyncio.run(speculation.decide(server.post, 50_000, "m", 2, fingerprint))
    return speculation


def test_a_calibration_is_measured_once_per_fingerprint(tmp_path):
    cache = CalibrationCache(tmp_path / "speculation")
    server = FakeServer()
    first = decide(cache, server, "model.gguf|100|1")
    measured = server.calls
    assert measured > 0
    again = decide(cache, server, "model.gguf|100|1")
    assert server.calls == measured  # kept: nothing measured
    assert again.calibration == first.calibration and again.draft == first.draft
    decide(cache, server, "model.gguf|100|2")  # the file changed (its modification time): measured again
    assert server.calls == 2 * measured


def test_an_unreadable_kept_calibration_is_measured_again(tmp_path):
    cache = CalibrationCache(tmp_path)
    server = FakeServer()
    decide(cache, server, "k")
    for kept in tmp_path.glob("*.json"):
        kept.write_text("{not json")
    measured = server.calls
    decide(cache, server, "k")
    assert server.calls == 2 * measured
