"""The process's thread budget: which cores each engine's threads may run on as engines start and stop generating."""

from __future__ import annotations

import itertools
import os
import threading
import time

import pytest

from rostra.engines import thread_budget
from rostra.engines.cpu_budget import CoreLimits, core_limits
from rostra.engines.thread_budget import (Claim, MachineSample, Share, ThreadBudget, cores_taken, new_threads,
                                          pin_threads, share_cores, usable_cores)


def test_a_model_alone_gets_every_usable_core():
    shares = share_cores([0, 1, 2, 3], 0, [Claim("chat")])
    assert shares["chat"].cores == {0, 1, 2, 3} and shares["chat"].why == "alone"


def test_two_generating_models_split_the_cores_evenly_and_disjointly():
    shares = share_cores([0, 1, 2, 3, 4], 0, [Claim("chat"), Claim("embed")])
    assert shares["chat"].cores == {0, 1, 2} and shares["embed"].cores == {3, 4}
    assert shares["chat"].why == shares["embed"].why == "split"


def test_more_generating_models_than_cores_take_turns_one_core_each():
    shares = share_cores([0, 1], 0, [Claim("a"), Claim("b"), Claim("c")])
    assert [shares[key].cores for key in "abc"] == [{0}, {1}, {0}]


def test_cores_other_processes_keep_busy_are_left_to_them_but_one_stays():
    assert share_cores([0, 1, 2, 3], 1, [Claim("chat")])["chat"].cores == {0, 1, 2}
    assert share_cores([0, 1], 5, [Claim("chat")])["chat"].cores == {0}
    assert "1 kept busy" in share_cores([0, 1, 2, 3], 1, [Claim("chat")])["chat"].reason


def test_engines_keep_a_core_each_before_cores_are_left_to_other_processes():
    shares = share_cores([0, 1], 1, [Claim("chat"), Claim("embed")])
    assert shares["chat"].cores == {0} and shares["embed"].cores == {1}
    shares = share_cores([0, 1, 2, 3], 3, [Claim("a"), Claim("b"), Claim("c")])
    assert [shares[key].cores for key in "abc"] == [{0}, {1}, {2}]


def test_a_batch_yields_to_online_requests():
    shares = share_cores([0, 1, 2, 3], 0, [Claim("batch", online=False), Claim("chat")])
    assert shares["chat"].cores == {0, 1, 2, 3}
    assert shares["batch"].cores == {3} and shares["batch"].why == "yields to online"
    alone = share_cores([0, 1, 2, 3], 0, [Claim("batch", online=False)])
    assert alone["batch"].cores == {0, 1, 2, 3}  # no online work: the batch gets everything


def test_usable_cores_follow_the_affinity_and_the_quota():
    assert usable_cores(CoreLimits(affinity=4, quota=None), [2, 3, 5, 7]) == [2, 3, 5, 7]
    assert usable_cores(CoreLimits(affinity=4, quota=1.5), [2, 3, 5, 7]) == [2, 3]  # docker --cpus 1.5


def test_quota_from_a_fake_cgroup_bounds_the_budget(tmp_path):
    (tmp_path / "cpu.max").write_text("100000 100000\n")  # docker run --cpus 1
    limits = core_limits(tmp_path)
    budget = ThreadBudget(usable_cores(limits, sorted(os.sched_getaffinity(0))), limits)
    seen: list[Share] = []
    member = budget.join("chat", seen.append)
    with budget.generating(member):
        assert len(seen[-1].cores) == 1 and seen[-1].why == "alone"


def _budget(cores: list[int]) -> tuple[ThreadBudget, dict[str, list[Share]]]:
    return ThreadBudget(cores, CoreLimits(affinity=len(cores), quota=None)), {}


def test_engines_starting_and_stopping_generation_move_the_shares():
    budget, applied = _budget([0, 1, 2, 3])
    chat = budget.join("chat", lambda share: applied.setdefault("chat", []).append(share))
    embed = budget.join("embed", lambda share: applied.setdefault("embed", []).append(share))
    assert applied["chat"][-1].why == applied["embed"][-1].why == "idle"
    with budget.generating(chat):
        assert applied["chat"][-1].cores == {0, 1, 2, 3}
        with budget.generating(embed), budget.generating(embed):  # two requests on one engine: one claim
            assert applied["chat"][-1].cores == {0, 1} and applied["embed"][-1].cores == {2, 3}
        assert applied["chat"][-1].cores == {0, 1, 2, 3}  # the other stopped: all of them again
        assert applied["embed"][-1].why == "idle"
    budget.set_taken(2)  # another process took two cores
    with budget.generating(embed):
        assert applied["embed"][-1].cores == {0, 1}
    budget.leave(chat)
    assert [member.name for member in budget.members.values()] == ["embed"]


def test_a_pinned_engine_is_left_alone_and_counts_for_nothing():
    budget, applied = _budget([0, 1])
    pinned = budget.join("pinned", lambda share: applied.setdefault("pinned", []).append(share), pinned=True)
    chat = budget.join("chat", lambda share: applied.setdefault("chat", []).append(share))
    with budget.generating(pinned), budget.generating(chat):
        assert applied["pinned"] == [Share(frozenset({0, 1}), "pinned", applied["pinned"][0].reason)]
        assert applied["chat"][-1].cores == {0, 1}


def test_a_share_that_cannot_be_applied_leaves_the_engine_serving():
    budget, _ = _budget([0, 1])

    def refuse(share: Share) -> None:
        raise OSError("no such thread")

    member = budget.join("chat", refuse)
    with budget.generating(member):
        assert member.share is None


def test_cores_taken_leave_out_this_process_own_work():
    before = MachineSample(busy=100.0, own=10.0, at=0.0)
    assert cores_taken(before, MachineSample(busy=102.0, own=11.0, at=1.0), usable=4) == 1  # 2 busy, 1 our own
    assert cores_taken(before, MachineSample(busy=100.4, own=10.0, at=1.0), usable=4) == 0
    assert cores_taken(before, MachineSample(busy=110.0, own=10.0, at=1.0), usable=4) == 3  # all but one
    assert cores_taken(MachineSample(None, 0, 0), MachineSample(None, 0, 1), usable=4) == 0


def test_the_threads_started_in_a_block_are_found_and_pinned():
    stop = threading.Event()
    with new_threads() as started:
        worker = threading.Thread(target=stop.wait)
        worker.start()
    try:
        assert worker.native_id in started and threading.get_native_id() not in started
        first = min(os.sched_getaffinity(0))
        pin_threads(started, frozenset({first}))
        assert os.sched_getaffinity(worker.native_id) == {first}
    finally:
        stop.set()
        worker.join()
    deadline = time.monotonic() + 5  # join() returns as the thread finishes; the kernel ends it a moment later
    while os.path.exists(f"/proc/self/task/{worker.native_id}") and time.monotonic() < deadline:
        time.sleep(0.01)
    pin_threads(started, frozenset({first}))  # an ended thread is skipped and forgotten
    assert worker.native_id not in started


def test_the_watcher_moves_shares_when_another_process_takes_a_core(monkeypatch):
    budget, applied = _budget([0, 1])
    seconds = itertools.count()  # each sample a second after the last, one core busy elsewhere meanwhile
    monkeypatch.setattr(thread_budget, "sample_machine", lambda: MachineSample(float(n := next(seconds)), 0.0, n))
    monkeypatch.setattr(thread_budget, "_SAMPLE_SECONDS", 0.01)
    chat = budget.join("chat", lambda share: applied.setdefault("chat", []).append(share))
    with budget.generating(chat):
        deadline = time.monotonic() + 20
        while applied["chat"][-1].cores != {0} and time.monotonic() < deadline:
            time.sleep(0.01)
        assert applied["chat"][-1].cores == {0}, applied["chat"]  # one core busy elsewhere, seen twice
    assert budget.taken == 1


@pytest.fixture(autouse=True)
def _no_watcher_left(monkeypatch):
    monkeypatch.setattr(thread_budget, "_SAMPLE_SECONDS", 0.02)  # a watcher ends within one sample once idle
    # A quiet machine, whatever else runs on this one (the watcher's own test says otherwise).
    monkeypatch.setattr(thread_budget, "sample_machine", lambda: MachineSample(0.0, 0.0, time.monotonic()))
    yield
    for thread in threading.enumerate():
        if thread.name == "rostra-thread-budget":
            thread.join(timeout=3)
