"""How many CPU threads an engine should compute with: the cores this process may use, less those other work keeps busy.

Why: llama.cpp's compute threads meet at a barrier after every operation, so one thread that the kernel parks behind
another process's work stalls all the others. On the 2-core machine, with one core kept busy by another process, the
embedded model decoded 48 tokens/s with one thread and 18-23 with two (llama.cpp's default: every core); with the
machine quiet, two threads gave 76-92 and one 47-53 (benchmarks/README.md, "A busy machine"). So the count is chosen
when the engine loads, from what the machine is doing then, and from the cores the process may really use: its CPU
affinity (taskset, a container's cpuset) and its cgroup's CPU quota (a container's `--cpus`), not the machine's core
count, which counts cores the process will never get.
"""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("rostra.engines")

# A core counts as taken when other processes keep it this busy over the sample (a share of one core).
_TAKEN = 0.5
_SAMPLE_SECONDS = 0.3


@dataclass(frozen=True)
class CoreLimits:
    """The cores this process may run on, and why that many."""
    affinity: int  # CPUs in the process's affinity mask
    quota: float | None  # the cgroup's CPU quota in cores (cpu.max / cfs_quota), None when unlimited

    @property
    def usable(self) -> int:
        cores = self.affinity if self.quota is None else min(self.affinity, math.ceil(self.quota))
        return max(1, cores)


def core_limits(cgroup_root: Path = Path("/sys/fs/cgroup")) -> CoreLimits:
    return CoreLimits(affinity=len(os.sched_getaffinity(0)), quota=cgroup_quota(cgroup_root))


def cgroup_quota(root: Path) -> float | None:
    """The CPU quota of this process's cgroup in cores (v2 `cpu.max`, else v1 `cpu.cfs_quota_us`), None if none."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]  # v2: "max 100000" or "150000 100000"
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota_us = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return None if quota_us <= 0 else quota_us / period_us
    except (OSError, ValueError):
        return None


def machine_busy_seconds(stat: Path) -> float | None:
    """CPU seconds all processes have spent working since boot (the `cpu` line of /proc/stat), None if unreadable."""
    try:
        fields = [int(value) for value in stat.read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def busy_elsewhere(seconds: float = _SAMPLE_SECONDS, stat: Path = Path("/proc/stat")) -> float:
    """How many cores other processes kept busy over a short sample (this process's own work left out)."""
    before, own_before, start = machine_busy_seconds(stat), time.process_time(), time.monotonic()
    time.sleep(seconds)
    after, own_after, elapsed = machine_busy_seconds(stat), time.process_time(), time.monotonic() - start
    if before is None or after is None or elapsed <= 0:
        return 0.0
    return max(0.0, (after - before) - (own_after - own_before)) / elapsed


@dataclass(frozen=True)
class ThreadChoice:
    threads: int
    reason: str


def choose_threads(limits: CoreLimits, busy: float) -> ThreadChoice:
    """All usable cores but those other work keeps busy (a core is taken above half use), and at least one."""
    taken = int(busy + (1 - _TAKEN))  # 0.5 of a core busy or more takes it
    threads = max(1, limits.usable - taken)
    quota = "no cgroup CPU quota" if limits.quota is None else f"cgroup quota {limits.quota:g} cores"
    return ThreadChoice(threads, f"{limits.usable} usable cores (affinity {limits.affinity}, {quota}), "
                                 f"{busy:.1f} kept busy by other processes at load")


def engine_threads(requested: int | None, shared: bool) -> ThreadChoice:
    """The thread count for an engine being loaded: the one asked for; else, where the process's engines share the
    cores at run time (`shared`: thread_budget.py), every usable core: the budget moves the threads off the cores
    others take, and a team kept whole did better on the busy 2-core VM (two models at once, load 12: 2 threads
    each on a core of its own 39.9 tok/s in all, 1 thread each 13.8); else the usable cores less those other
    processes keep busy now (choose_threads).

    Blocks for a 0.3 s sample when not shared: call it from a thread, as engines load in one.
    """
    if requested:
        return ThreadChoice(requested, "--threads")
    limits = core_limits()
    if not shared:
        return choose_threads(limits, busy_elsewhere())
    quota = "no cgroup CPU quota" if limits.quota is None else f"cgroup quota {limits.quota:g} cores"
    return ThreadChoice(limits.usable, f"{limits.usable} usable cores (affinity {limits.affinity}, {quota}); "
                                       "their cores follow the process's thread budget")
