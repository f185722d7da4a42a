"""The speculation probe in the background (rostra/engines/llamacpp_probe.py, issue 44): a first `rostra serve`
answers at once; the probe measures only while nothing else runs, and a request that comes meanwhile waits for at
most one of its requests and makes it measure again later. The probe's unit runs on the real slot router with a
made-up llama.cpp; the end-to-end test runs `rostra serve` with the embedded model on a fresh data directory."""

from __future__ import annotations

import asyncio
import time

import httpx
from openai import OpenAI

from rostra.engines import llamacpp_probe
from rostra.engines.llamacpp_probe import QuietProbe
from rostra.engines.llamacpp_slots import SlotRouter
from servers import RunningServer

MODEL = "SmolLM2-135M-Instruct"


def test_the_probe_waits_for_quiet_and_a_request_that_comes_makes_it_measure_again(monkeypatch):
    monkeypatch.setattr(llamacpp_probe, "QUIET_SECONDS", 0.2)

    async def run() -> tuple[list[str], int, float]:
        router = SlotRouter(2)
        seen: list[str] = []
        clients: list[asyncio.Task] = []
        request_waited = 0.0

        async def request() -> None:  # a client's request, arriving while the probe's first request runs
            nonlocal request_waited
            asked = time.monotonic()
            async with router.claim([1, 2, 3]):
                request_waited = time.monotonic() - asked
                await asyncio.sleep(0.1)

        async def post(path: str, body: dict) -> dict:
            assert router.free_count == 0  # every slot held while the probe's request runs
            seen.append(body["step"])
            if not clients:
                clients.append(asyncio.create_task(request()))
            await asyncio.sleep(0.05)
            return {}

        probe = QuietProbe(lambda: router.free_count < 2 or router.waiting > 0, router, post)

        async def work(probe_post) -> str:
            for step in ("a", "b", "c"):
                await probe_post("/completion", {"step": step})
            return "measured"

        started = time.monotonic()
        assert await probe.run(work) == "measured"
        await clients[0]
        assert time.monotonic() - started >= 0.2 + 0.1 + 0.2  # quiet, the request, quiet again
        return seen, probe.attempts, request_waited

    seen, attempts, waited = asyncio.run(run())
    assert attempts == 2 and seen == ["a", "a", "b", "c"]  # the first attempt dropped after the request came
    assert waited < 0.1  # it waited for one probe request at most, not the whole probe


def test_a_first_start_answers_before_the_probe_which_runs_after_and_is_kept(tmp_path):
    """On a fresh data directory: the first request is answered; the probe's decision is logged after the server
    is up, and its calibration is kept, so the next start takes it at load."""
    data = str(tmp_path / "data")
    started = time.monotonic()
    server = RunningServer(["--parallel", "2"], data_dir=data, log_level="info", probe_speculation=True)
    try:
        client = OpenAI(base_url=server.v1, api_key="unused", max_retries=0)
        reply = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Say hello."}],
                                               max_tokens=8, temperature=0)
        answered = time.monotonic() - started
        assert reply.choices[0].message.content
        deadline = time.monotonic() + 300
        while "speculative decoding off" not in server.log_path.read_text():
            assert time.monotonic() < deadline, server.log_path.read_text()[-3000:]
            time.sleep(0.2)
        assert httpx.get(f"{server.base_url}/health/ready", timeout=10).status_code == 200
    finally:
        server.stop()
    log = server.log_path.read_text()
    assert log.index("Application startup complete") < log.index("speculative decoding off"), log[-3000:]
    assert list((tmp_path / "data" / "speculation").glob("*.json")), "the calibration was not kept"
    print(f"first answer {answered:.1f} s after the start")
    again = RunningServer(["--parallel", "2"], data_dir=data, log_level="info", probe_speculation=True)
    again.stop()
    log = again.log_path.read_text()
    assert log.index("speculative decoding off") < log.index("Application startup complete"), log[-3000:]


def test_the_probe_holding_every_slot_is_not_a_lost_slot_for_readiness():
    """/health/ready says a slot held by no request is lost for good; the probe's hold is neither."""
    from rostra.embedded import embedded_model_path
    from rostra.engines.llamacpp import LlamaCppEngine

    async def run() -> tuple[str | None, str | None]:
        engine = LlamaCppEngine(embedded_model_path(), MODEL, max_model_len=256, parallel=2, speculative="off")
        await engine.start()
        try:
            with engine._slots.exclusive():  # as QuietProbe.post holds them
                during = await engine.readiness()
            return during, await engine.readiness()
        finally:
            await engine.close()

    assert asyncio.run(run()) == (None, None)
