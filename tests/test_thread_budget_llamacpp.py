"""Two llama.cpp models generating at once in one process share the cores: their compute threads run only on the
cores the thread budget gives each (disjoint while both generate), and a model alone gets them all again."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from rostra.core import Prompt, SamplingParams
from rostra.embedded import embedded_model_path
from rostra.engines import cpu_budget, thread_budget
from rostra.engines.llamacpp import LlamaCppEngine
from rostra.engines.thread_budget import MachineSample

pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to split")


def _cpu_and_time(thread_id: int) -> tuple[int, int] | None:
    """The CPU a thread of this process last ran on and its CPU time in ticks, None once it has ended."""
    try:
        fields = open(f"/proc/self/task/{thread_id}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[36]), int(fields[11]) + int(fields[12])  # processor, utime + stime (fields 39, 14, 15)


def _where_busy_threads_ran(engines: list[LlamaCppEngine], seconds: float) -> list[set[int]]:
    """For each engine, the CPUs on which its threads that worked during the sample last ran."""
    def snapshot() -> list[dict[int, tuple[int, int]]]:
        return [{tid: seen for tid in engine.cores.threads if (seen := _cpu_and_time(tid))} for engine in engines]
    cpus: list[set[int]] = [set() for _ in engines]
    before, end = snapshot(), time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.02)
        now = snapshot()
        for index, threads in enumerate(now):
            cpus[index] |= {cpu for tid, (cpu, ticks) in threads.items() if ticks > before[index].get(tid, (0, 0))[1]}
        before = now
    return cpus


def test_two_models_generating_at_once_never_run_more_busy_threads_than_the_budget(monkeypatch):
    # Other processes' load is left out: the machine this runs on is shared, and the split is what is tested here.
    monkeypatch.setattr(cpu_budget, "busy_elsewhere", lambda *args, **kwargs: 0.0)
    monkeypatch.setattr(thread_budget, "sample_machine", lambda: MachineSample(0.0, 0.0, time.monotonic()))
    monkeypatch.setattr(thread_budget, "_process_budget", None)
    monkeypatch.setattr(thread_budget, "_sharing", True)  # as `rostra serve` decides for several models
    cores = thread_budget.process_budget().cores

    async def scenario() -> None:
        engines = [LlamaCppEngine(embedded_model_path(), name, max_model_len=512, parallel=1) for name in "ab"]
        for engine in engines:
            await engine.start()
        try:
            assert [engine.compute_threads for engine in engines] == [len(cores)] * 2  # each made with every core
            prompt = Prompt(await engines[0].tokenize("Tell me a long story.", add_special=False))
            params = SamplingParams(max_tokens=2000, ignore_eos=True)
            first = engines[0].generate("a", prompt, params)
            await anext(first)
            alone = engines[0].cores.share
            assert alone is not None and alone.cores == set(cores) and alone.why == "alone"
            second = engines[1].generate("b", prompt, params)
            await anext(second)
            shares = [engine.cores.share.cores for engine in engines]
            assert not shares[0] & shares[1] and shares[0] | shares[1] == set(cores)
            for engine, share in zip(engines, shares):
                assert all(os.sched_getaffinity(tid) == share for tid in engine.cores.threads)
            keep_going = [asyncio.ensure_future(_drain(stream)) for stream in (first, second)]
            ran_on = await asyncio.to_thread(_where_busy_threads_ran, engines, 1.0)
            for task in keep_going:
                task.cancel()
            await asyncio.gather(*keep_going, return_exceptions=True)
            await second.aclose()
            assert ran_on[0] and ran_on[1], ran_on  # both generated meanwhile
            assert ran_on[0] <= shares[0] and ran_on[1] <= shares[1], (ran_on, shares)
            assert engines[0].cores.share.cores == set(cores)  # alone again: every core
            await first.aclose()
        finally:
            for engine in engines:
                await engine.close()
        assert not thread_budget.process_budget().members

    asyncio.run(scenario())


async def _drain(stream) -> None:
    async for _ in stream:
        pass
