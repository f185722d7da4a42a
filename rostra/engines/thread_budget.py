"""One CPU budget for the whole process: the usable cores, shared among the engines that are generating now.

Why: every llama.cpp server in this process has its own compute threads (a team of OpenMP threads that meet at a
barrier after every operation), each team as large as the cores the process may use. Two models generating at once,
an embedding model beside a chat model, or another process taking a core after load all put more busy threads on the
cores than there are cores, and a team whose thread is parked behind another's work stalls at every barrier
(benchmarks/README.md, "A busy machine": 0.4x of one thread with a core taken). The thread count of a llama.cpp server
is fixed when it is made, but its threads are threads of this process: the budget narrows and widens the CPU affinity
of each engine's threads at run time, so that the engines generating now get disjoint cores (a model alone gets them
all), a batch-only engine yields to engines serving online requests, and the cores other processes keep busy are left
to them (measured again every second while anything generates, not only at load).

The decision (`share_cores`) is a pure function; `ThreadBudget` holds the engines and applies it.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from rostra.engines.cpu_budget import CoreLimits, core_limits, machine_busy_seconds

log = logging.getLogger("rostra.engines")
T = TypeVar("T")

# Other processes take a core when they keep it this busy (a share of one core), as at load (cpu_budget.py).
_TAKEN = 0.5
_SAMPLE_SECONDS = 1.0
# How long an OpenMP thread spins at a barrier before it sleeps (libgomp's GOMP_SPINCOUNT, in pause loops).
OPENMP_SPIN = "100"
# Whether this process's engines share the cores at run time (share_the_cores decides it at start-up).
_sharing = False


def share_the_cores(several_models: bool, busy_at_start: Callable[[], float]) -> bool:
    """Decided once, at start-up, before any engine library loads: whether the engines' threads are moved among the
    cores at run time (this module), with OpenMP's barrier spin bounded, or each engine keeps the threads it was
    made with on every core (llama.cpp's own way). Sharing where several models are served (two may generate at
    once) or where other processes keep a core busy at start; not on a quiet machine with one model, where it
    costs: the bounded spin makes threads sleep between llama.cpp's tiny operations (the embedded model at
    concurrency 1 on the quiet 2-core VM: 0.67x llama.cpp's own server with it, 1.00x without; benchmarks/README.md).

    Why the spin: a team narrowed to fewer cores than it has threads waits at every barrier for a thread that is not
    running; libgomp's default spin (300,000 pause loops) burns that thread's core meanwhile. Measured on the 2-core
    VM (load 12-18, embedded SmolLM2, 2 threads narrowed to one core, tok/s of 24-token generations): spin 10,000
    0.5-0.7, spin 1,000 4-15, spin 0 8-34, one thread alone 5-10. 100 is libgomp's own spin when its threads
    outnumber the cores. A GOMP_SPINCOUNT or OMP_WAIT_POLICY in the environment is the user's and is kept."""
    global _sharing
    _sharing = several_models or busy_at_start() >= _TAKEN
    if _sharing and "GOMP_SPINCOUNT" not in os.environ and "OMP_WAIT_POLICY" not in os.environ:
        os.environ["GOMP_SPINCOUNT"] = OPENMP_SPIN
    return _sharing


@dataclass(frozen=True)
class Claim:
    """An engine that is generating now."""
    key: str
    online: bool = True  # False: only batch work runs on it, which yields to online requests


@dataclass(frozen=True)
class Share:
    """The cores an engine's threads may run on now, and why."""
    cores: frozenset[int]
    why: str  # alone | split | yields to online | pinned | idle
    reason: str  # the same in words, with the figures (the log)


def usable_cores(limits: CoreLimits, affinity: Sequence[int]) -> list[int]:
    """The cores of the affinity mask this process may use, as many as its cgroup quota allows."""
    return sorted(affinity)[:limits.usable]


def share_cores(cores: Sequence[int], taken: int, generating: Sequence[Claim]) -> dict[str, Share]:
    """The cores of each generating engine: the usable cores less those other processes keep busy, split evenly
    among the engines serving online requests; batch-only engines get them only when no online engine generates,
    else they share the last core. Cores taken by others are left to them only while every engine keeps a core of
    its own: two engines on one core would fight over it as the others' work would (measured: two one-thread
    engines on one core of the busy 2-core VM, 4.9 tok/s in all, against 15.7 for llama.cpp's servers on both).
    More engines than cores: they take turns on the cores."""
    online = [claim for claim in generating if claim.online]
    batch = [claim for claim in generating if not claim.online]
    first = online or batch
    free = sorted(cores)[:max(1, len(cores) - max(0, taken), min(len(cores), len(first)))]
    busy = f"{len(cores)} usable cores, {taken} kept busy by other processes"
    shares: dict[str, Share] = {}
    for index, claim in enumerate(first):
        part = _part(free, index, len(first))
        why = "alone" if len(first) == 1 else "split"
        shares[claim.key] = Share(part, why, f"{len(part)} of {len(free)} free cores ({busy}), "
                                             f"{len(first)} engine(s) generating")
    if online:
        for claim in batch:
            shares[claim.key] = Share(frozenset(free[-1:]), "yields to online",
                                      f"1 core shared: batch work yields to {len(online)} online engine(s) ({busy})")
    return shares


def _part(free: list[int], index: int, count: int) -> frozenset[int]:
    """The index-th of `count` even, contiguous parts of `free` (the first parts one core larger); with more parts
    than cores, core index mod cores."""
    if count > len(free):
        return frozenset([free[index % len(free)]])
    size, extra = divmod(len(free), count)
    start = index * size + min(index, extra)
    return frozenset(free[start:start + size + (1 if index < extra else 0)])


def thread_ids() -> set[int]:
    """The ids of this process's threads now."""
    return {int(name) for name in os.listdir("/proc/self/task")}


_census_lock = threading.Lock()


@contextlib.contextmanager
def new_threads() -> Iterator[set[int]]:
    """The threads this process starts during the block (one block at a time: an engine's server being made, whose
    threads are its compute and connection threads). Blocking: run it in a thread, as a server is made in one."""
    with _census_lock:
        started: set[int] = set()
        before = thread_ids()
        yield started
        started |= thread_ids() - before


@dataclass(frozen=True)
class MachineSample:
    busy: float | None  # CPU seconds all processes spent working since boot (/proc/stat), None if unreadable
    own: float  # this process's CPU seconds
    at: float


def sample_machine(stat: Path = Path("/proc/stat")) -> MachineSample:
    return MachineSample(machine_busy_seconds(stat), time.process_time(), time.monotonic())


def cores_taken(before: MachineSample, after: MachineSample, usable: int) -> int:
    """Cores other processes kept busy between two samples (this process's work left out), at most all but one."""
    elapsed = after.at - before.at
    if before.busy is None or after.busy is None or elapsed <= 0:
        return 0
    busy = max(0.0, (after.busy - before.busy) - (after.own - before.own)) / elapsed
    return min(max(0, usable - 1), int(busy + (1 - _TAKEN)))


@dataclass
class Member:
    """An engine in the budget: how to apply its share, and how much it generates now."""
    key: str
    name: str
    apply: Callable[[Share], None]
    pinned: bool = False
    online: int = 0  # generations of online requests running now
    batch: int = 0  # generations of batch work running now
    share: Share | None = None

    @property
    def generating(self) -> bool:
        return bool(self.online or self.batch)


@dataclass
class ThreadBudget:
    """The engines of this process and their cores. Every change (an engine starting or stopping generation, another
    process taking or leaving a core) decides every share again and applies those that changed."""
    cores: list[int]
    limits: CoreLimits
    sharing: bool = True  # False: every engine keeps every core (share_the_cores decided not to share)
    taken: int = 0
    members: dict[str, Member] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)
    _next_key: int = 0
    _watcher: threading.Thread | None = None

    @classmethod
    def for_this_process(cls) -> ThreadBudget:
        limits = core_limits()
        return cls(usable_cores(limits, sorted(os.sched_getaffinity(0))), limits, sharing=_sharing)

    def join(self, name: str, apply: Callable[[Share], None], pinned: bool = False) -> Member:
        with self.lock:
            self._next_key += 1
            member = Member(f"{name}#{self._next_key}", name, apply, pinned)
            self.members[member.key] = member
            self._rebalance()
            return member

    def leave(self, member: Member) -> None:
        with self.lock:
            self.members.pop(member.key, None)
            self._rebalance()

    @contextlib.contextmanager
    def generating(self, member: Member, online: bool = True) -> Iterator[None]:
        """While a generation (or an embedding batch) runs on the member's engine."""
        self._count(member, online, 1)
        try:
            yield
        finally:
            self._count(member, online, -1)

    def _count(self, member: Member, online: bool, step: int) -> None:
        with self.lock:
            before = (member.generating, bool(member.online))
            if online:
                member.online += step
            else:
                member.batch += step
            if (member.generating, bool(member.online)) != before:
                self._rebalance()
            if member.generating and self._watcher is None and self.sharing:
                self._watcher = threading.Thread(target=self._watch, name="rostra-thread-budget", daemon=True)
                self._watcher.start()

    def set_taken(self, taken: int) -> None:
        with self.lock:
            if taken != self.taken:
                log.info("thread budget: %d of %d usable cores now kept busy by other processes (were %d)",
                         taken, len(self.cores), self.taken)
                self.taken = taken
                self._rebalance()

    def _watch(self) -> None:
        """Other processes' load, measured every second while any engine generates; a change of the cores they take
        counts once seen twice in a row (one busy second of another process moves nothing)."""
        seen, before = self.taken, sample_machine()
        while True:
            time.sleep(_SAMPLE_SECONDS)
            after = sample_machine()
            taken, before = cores_taken(before, after, len(self.cores)), after
            with self.lock:
                if not any(member.generating for member in self.members.values()):
                    self._watcher = None
                    return
                if taken == seen:
                    self.set_taken(taken)
                seen = taken

    def _rebalance(self) -> None:
        if not self.sharing:
            for member in self.members.values():
                if member.share is None:
                    self._apply(member, Share(frozenset(self.cores), "not shared",
                                              "one model on a machine quiet at start: its threads keep every core"))
            return
        claims = [Claim(member.key, online=bool(member.online)) for member in self.members.values()
                  if member.generating and not member.pinned]
        shares = share_cores(self.cores, self.taken, claims)
        everything = frozenset(self.cores[:max(1, len(self.cores) - self.taken)])
        for member in self.members.values():
            share = shares.get(member.key)
            if member.pinned:
                share = Share(frozenset(self.cores), "pinned", "--threads given: the cores are left to the kernel")
            elif share is None:  # idle: its threads sleep; ready to start on every free core
                share = Share(everything, "idle", f"not generating: {len(everything)} free cores")
            if share != member.share:
                self._apply(member, share)

    def _apply(self, member: Member, share: Share) -> None:
        try:
            member.apply(share)
        except Exception as exc:  # a share that cannot be applied leaves the engine as it was: it still serves
            log.warning("thread budget: cores for %s not applied: %s", member.name, exc)
            return
        if member.share is None or member.share.why != share.why or len(member.share.cores) != len(share.cores):
            log.info("%s: cores %s (%s: %s)", member.name, sorted(share.cores), share.why, share.reason)
        member.share = share

    def shares(self) -> list[tuple[str, Share]]:
        with self.lock:
            return [(member.name, member.share) for member in self.members.values() if member.share is not None]


def pin_threads(thread_ids: set[int], cores: frozenset[int]) -> None:
    """The CPU affinity of these threads of this process set to `cores` (threads that have ended are skipped)."""
    for thread_id in list(thread_ids):
        try:
            os.sched_setaffinity(thread_id, cores)
        except ProcessLookupError:
            thread_ids.discard(thread_id)


_process_budget: ThreadBudget | None = None
_process_lock = threading.Lock()


def process_budget() -> ThreadBudget:
    """The budget every engine of this process shares."""
    global _process_budget
    with _process_lock:
        if _process_budget is None:
            _process_budget = ThreadBudget.for_this_process()
        return _process_budget


# Set (by the gate) while a batch line runs: its generations yield to online requests' (share_cores).
batch_work: contextvars.ContextVar[bool] = contextvars.ContextVar("batch_work", default=False)


class EngineCores:
    """An engine's place in the process budget: the threads its servers started, kept on the engine's share."""

    def __init__(self, name: str, pinned: bool, budget: ThreadBudget | None = None,
                 on_share: Callable[[Share], None] | None = None):
        """`on_share`: told each new share (an engine whose threads are not its own to pin: torch's)."""
        self.threads: set[int] = set()
        self.on_share = on_share
        self.budget = budget or process_budget()
        self.member = self.budget.join(name, self._apply, pinned)

    def _apply(self, share: Share) -> None:
        pin_threads(self.threads, share.cores)
        if self.on_share is not None:
            self.on_share(share)

    def made(self, make: Callable[[], T]) -> T:
        """`make()` (an engine's server being made; blocking), its new threads then kept on the engine's share."""
        with new_threads() as started:
            made = make()
        with self.budget.lock:
            self.threads |= started
            if self.member.share is not None:
                pin_threads(self.threads, self.member.share.cores)
        return made

    def generating(self) -> contextlib.AbstractContextManager[None]:
        return self.budget.generating(self.member, online=not batch_work.get())

    @property
    def share(self) -> Share | None:
        return self.member.share

    def close(self) -> None:
        self.budget.leave(self.member)
        self.threads.clear()
