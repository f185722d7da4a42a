"""The engines' thread count: the cores this process may use (affinity, cgroup quota), less those other work keeps busy."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from rostra.engines import cpu_budget
from rostra.engines.cpu_budget import CoreLimits, busy_elsewhere, cgroup_quota, choose_threads, core_limits
from servers import RunningServer


def test_cgroup_v2_quota(tmp_path):
    (tmp_path / "cpu.max").write_text("150000 100000\n")  # docker run --cpus 1.5
    assert cgroup_quota(tmp_path) == 1.5
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cgroup_quota(tmp_path) is None


def test_cgroup_v1_quota(tmp_path):
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("200000\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert cgroup_quota(tmp_path) == 2
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")  # unlimited
    assert cgroup_quota(tmp_path) is None


def test_no_cgroup_files_means_no_quota(tmp_path):
    assert cgroup_quota(tmp_path) is None
    assert core_limits(tmp_path).usable == len(os.sched_getaffinity(0))


def test_usable_cores_are_the_smaller_of_affinity_and_quota():
    assert CoreLimits(affinity=8, quota=None).usable == 8
    assert CoreLimits(affinity=8, quota=1.5).usable == 2  # a part of a core is a thread's worth of time
    assert CoreLimits(affinity=2, quota=4).usable == 2
    assert CoreLimits(affinity=4, quota=0.2).usable == 1


@pytest.mark.parametrize("busy, threads", [(0.0, 4), (0.4, 4), (0.5, 3), (1.2, 3), (1.6, 2), (3.9, 1), (9.0, 1)])
def test_threads_leave_the_cores_other_work_keeps_busy(busy, threads):
    choice = choose_threads(CoreLimits(affinity=4, quota=None), busy)
    assert choice.threads == threads
    assert "4 usable cores" in choice.reason and f"{busy:.1f} kept busy" in choice.reason


def test_asked_threads_win_without_sampling(monkeypatch):
    monkeypatch.setattr(cpu_budget, "busy_elsewhere", lambda: pytest.fail("sampled the machine"))
    assert cpu_budget.engine_threads(3, shared=False).threads == 3


def test_an_unreadable_proc_stat_counts_nothing_busy(tmp_path):
    assert busy_elsewhere(0.01, stat=tmp_path / "missing") == 0.0


def test_this_process_own_work_is_not_counted_but_another_process_is():
    def spin(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass

    # Measured against the machine's own counters: another process spinning on a core is seen, this one is not.
    other = subprocess.Popen([sys.executable, "-c", "import time\nend = time.monotonic() + 3\n"
                              "while time.monotonic() < end: pass"])
    try:
        time.sleep(0.3)
        seen_with_other = busy_elsewhere(1.0)
    finally:
        other.kill()
        other.wait()
    assert seen_with_other >= 0.7, seen_with_other
    before = busy_elsewhere(1.0)
    spinner = threading.Thread(target=spin, args=(1.2,))
    spinner.start()
    own = busy_elsewhere(1.0)  # a core of this process's own work: would add ~1.0 if it were counted
    spinner.join()
    after = busy_elsewhere(1.0)
    assert own <= max(before, after) + 0.5, (before, own, after)


def test_the_served_model_computes_on_the_cores_its_affinity_allows():
    """`taskset -c 0 rostra serve`: one core usable, so one compute thread (llama.cpp alone would take every core)."""
    first_core = min(os.sched_getaffinity(0))
    server = RunningServer(["--public-metrics"], log_level="info",
                           preexec=lambda: os.sched_setaffinity(0, {first_core}))
    try:
        metrics = httpx.get(f"{server.base_url}/metrics", timeout=10).text
        threads = {sample.labels["model_name"]: sample.value for family in text_string_to_metric_families(metrics)
                   if family.name == "rostra_engine_threads" for sample in family.samples}
        assert list(threads.values()) == [1.0], threads
        cores = {(sample.labels["model_name"], sample.labels["why"]): sample.value
                 for family in text_string_to_metric_families(metrics)
                 if family.name == "rostra_engine_cores" for sample in family.samples}
        # One model on a machine quiet at start: not shared, every usable core its own (busy at start: idle, shared).
        assert list(cores.values()) == [1.0] and next(iter(cores))[1] in ("not shared", "idle"), cores
        assert ": 1 compute threads (1 usable cores (affinity 1" in server.log_path.read_text()
    finally:
        server.stop()
