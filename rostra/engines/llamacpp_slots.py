"""Which llama.cpp slot a request runs in: the one that already holds the most of its prompt.

llama.cpp keeps each slot's last prompt (and what was generated after it) in that slot's KV cache, and reads
only what follows the longest common prefix. With more sessions than slots, which slot a turn lands in
decides whether it re-reads thousands of tokens. rostra knows every prompt it sent, so it picks the slot
itself and pins the request there (`id_slot`):

- among the free slots, the one whose held tokens share the longest prefix with the prompt (a prefix
  shorter than a tenth of the prompt counts as none, as llama.cpp's own `slot_prompt_similarity` does),
  less the state it would destroy for good (see `gain`); ties go to the slot of the same session key
  (`prompt_cache_key` and the like), then to the least recently used one, so the state evicted is the
  one least likely to be asked for again;
- a request with a cache salt (vLLM's `cache_salt`: per-tenant isolation) shares a prefix only with a slot
  last used with the same salt (no salt counts as one); in any other slot llama.cpp reads its whole prompt
  afresh (`cache_prompt` off), so no tenant's request is sped up by another tenant's prompt;
- when every slot is busy, requests wait here (not in llama.cpp's queue: one that is cancelled while it
  waits is simply never started). A freed slot goes to the waiting request that shares the most with
  it; a request passed over `parallel` times goes first, whatever it shares, so none waits forever.

A state pushed out of its slot is not lost: llama.cpp saves it to its host-memory prompt cache
(`--cache-ram`) when the new prompt keeps less than half of it, and loads the best saved state back into
the slot a prompt is pinned to. The choice here keeps those copies rare.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import time
from dataclasses import dataclass, field
from typing import AsyncIterator, Iterator, Sequence

MIN_SHARED_FRACTION = 0.1  # a shared prefix shorter than this fraction of the prompt is no reason to choose a slot


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """Tokens `a` and `b` share from the start. Compares whole slices (C speed), halving the range that
    differs: O(n) element comparisons in all, no Python loop per token."""
    low, high = 0, min(len(a), len(b))
    if a[:high] == b[:high]:
        return high
    while high - low > 1:  # a[:low] == b[:low]; a[:high] != b[:high]
        middle = (low + high) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle
    return low


class SlotState(enum.Enum):
    FREE = "free"
    BUSY = "busy"


@dataclass
class Slot:
    index: int
    tokens: list[int] = field(default_factory=list)  # what it holds: the last prompt and its output
    key: str | None = None  # the session key of the request that last ran here
    salt: str | None = None  # the cache salt of the request that last ran here (vLLM's `cache_salt`)
    # Whether the request now holding the slot may reuse the prefix the slot held (the same salt as before).
    reuses: bool = True
    last_used: float = 0.0
    state: SlotState = SlotState.FREE

    @property
    def busy(self) -> bool:
        return self.state is SlotState.BUSY

    def take(self) -> None:
        if self.state is not SlotState.FREE:
            raise RuntimeError(f"slot {self.index} taken while {self.state.value}")
        self.state = SlotState.BUSY

    def free(self) -> None:
        if self.state is not SlotState.BUSY:
            raise RuntimeError(f"slot {self.index} freed while {self.state.value}")
        self.state = SlotState.FREE
        self.last_used = time.monotonic()


@dataclass
class _Waiter:
    """A request waiting for a slot. Its future is the only state: pending (waiting), done with a slot
    (granted), or cancelled (its task was cancelled: a client gone, a timeout). A cancelled waiter may stay
    in the queue until its task runs again, possibly after other events of the same loop turn; the router
    never grants it a slot (the bug this replaces: the slot went to the cancelled future and was lost)."""
    tokens: Sequence[int]
    key: str | None
    granted: asyncio.Future[Slot]
    passed_over: int = 0
    salt: str | None = None

    @property
    def waiting(self) -> bool:
        return not self.granted.done()


class SlotRouter:
    """An explicit state machine: each slot is FREE or BUSY (`Slot.take`/`Slot.free` check the state they
    leave), each waiter pending, granted or cancelled. Transitions: a request arrives (takes a free slot
    or queues), a holder releases (FREE, then dispatch), a waiter is cancelled (leaves the queue; a slot
    granted to it in the same turn is passed on). Dispatch grants only to pending waiters."""

    def __init__(self, count: int, host_cache: bool = True):
        self.slots = [Slot(index) for index in range(count)]
        self.host_cache = host_cache  # llama.cpp keeps states pushed out of a slot in host memory
        self.salted = False  # a request with a cache salt came: the host-memory cache may hold its state
        self._waiting: list[_Waiter] = []  # in arrival order
        self.held_exclusively = False  # every slot held by `exclusive` (the speculation probe), not by requests

    @property
    def waiting(self) -> int:
        return sum(1 for waiter in self._waiting if waiter.waiting)

    @property
    def free_count(self) -> int:
        return sum(1 for slot in self.slots if not slot.busy)

    @contextlib.asynccontextmanager
    async def claim(self, tokens: Sequence[int], key: str | None = None, salt: str | None = None
                    ) -> AsyncIterator[Slot]:
        """A slot for a prompt, held for the block. The block records what the slot holds afterwards in
        `slot.tokens` (by default the prompt: a generation that failed early holds at most that). `salt`: a
        prefix is shared only between requests of the same salt (`slot.reuses` says whether this one may)."""
        slot = await self._acquire(tokens, key, salt)
        # A prompt that keeps less than half of the slot's state makes llama.cpp swap in the best state of its
        # host-memory cache, whoever's it is: once salts are in use, such a prompt is read afresh instead.
        self.salted = self.salted or salt is not None
        keeps_most = 2 * common_prefix_length(slot.tokens, tokens) >= len(slot.tokens)
        slot.reuses = slot.salt == salt and (not self.salted or not self.host_cache or keeps_most)
        slot.tokens, slot.key, slot.salt = list(tokens), key, salt
        try:
            yield slot
        finally:
            self._release(slot)

    def forget_prompts(self) -> None:
        """llama.cpp's server was made again: its slots hold no prompt any more."""
        for slot in self.slots:
            slot.tokens, slot.key, slot.salt = [], None, None

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[list[Slot]]:
        """Every slot held at once, for work that must have llama.cpp's server to itself (the speculation probe):
        taken only when all are free and nobody waits (else RuntimeError); requests arriving meanwhile queue.
        The work may overwrite any slot's state: afterwards each counts as holding nothing."""
        if self.waiting or any(slot.busy for slot in self.slots):
            raise RuntimeError("the slots are in use")
        for slot in self.slots:
            slot.take()
        self.held_exclusively = True
        try:
            yield self.slots
        finally:
            self.held_exclusively = False
            for slot in self.slots:
                slot.tokens, slot.key = [], None
                slot.free()
            self._dispatch()

    def preferred(self, tokens: Sequence[int], key: str | None, candidates: list[Slot],
                  salt: str | None = None) -> Slot:
        """The candidate that holds the most of `tokens`: see the module's docstring."""
        return max(candidates, key=lambda slot: (self.gain(slot, tokens, salt), key is not None and slot.key == key,
                                                 -slot.last_used))

    def gain(self, slot: Slot, tokens: Sequence[int], salt: str | None = None) -> float:
        """Tokens of prefill that running `tokens` in `slot` saves, less what it pushes out: the rest of the
        slot's state. llama.cpp saves that to its host-memory cache when the prompt keeps less than half of
        it, and otherwise drops it. A saved state costs a copy back (microseconds per token, where reading a
        token again costs milliseconds on a CPU), so it counts a tenth: enough that a slot is not churned for
        a prefix much shorter than what it holds, not so much that a fresh server's first requests re-read a
        shared system prompt in empty slots (they did at one half: 380 ms to first token instead of 75)."""
        shared = common_prefix_length(slot.tokens, tokens) if slot.salt == salt else 0
        useful = shared if shared >= MIN_SHARED_FRACTION * len(tokens) else 0
        lost = len(slot.tokens) - shared
        saved = self.host_cache and shared < 0.5 * len(slot.tokens)
        return useful - (0.1 if saved else 1.0) * lost

    async def _acquire(self, tokens: Sequence[int], key: str | None, salt: str | None) -> Slot:
        self._drop_done_waiters()
        free = [slot for slot in self.slots if not slot.busy]
        if free and not self._waiting:
            slot = self.preferred(tokens, key, free, salt)
            slot.take()
            return slot
        waiter = _Waiter(tokens, key, asyncio.get_running_loop().create_future(), salt=salt)
        self._waiting.append(waiter)
        self._dispatch()  # (a slot may be free while others wait: only when one was freed this very moment)
        try:
            return await waiter.granted
        except asyncio.CancelledError:
            if waiter in self._waiting:
                self._waiting.remove(waiter)
            if waiter.granted.done() and not waiter.granted.cancelled():
                self._release(waiter.granted.result())  # granted just as it was cancelled: pass it on
            raise

    def _release(self, slot: Slot) -> None:
        slot.free()
        self._dispatch()

    def _drop_done_waiters(self) -> None:
        """Waiters whose future is done were cancelled (granted ones leave the queue as they are granted)."""
        self._waiting = [waiter for waiter in self._waiting if waiter.waiting]

    def _dispatch(self) -> None:
        """Hand free slots to waiting requests: each freed slot to the waiter that shares the most with it."""
        self._drop_done_waiters()
        while self._waiting:
            free = [slot for slot in self.slots if not slot.busy]
            if not free:
                return
            starved = next((w for w in self._waiting if w.passed_over >= len(self.slots)), None)
            if starved is not None:
                waiter, slot = starved, self.preferred(starved.tokens, starved.key, free, starved.salt)
            else:
                waiter, slot = self._best_pair(free)
            for other in self._waiting:
                if other is waiter:
                    break
                other.passed_over += 1  # an earlier arrival overtaken
            self._waiting.remove(waiter)
            slot.take()
            waiter.granted.set_result(slot)  # pending: `_drop_done_waiters` left only those, and nothing ran since

    def _best_pair(self, free: list[Slot]) -> tuple[_Waiter, Slot]:
        best: tuple[float, _Waiter, Slot] | None = None
        for waiter in self._waiting:
            slot = self.preferred(waiter.tokens, waiter.key, free, waiter.salt)
            gain = self.gain(slot, waiter.tokens, waiter.salt)
            if best is None or gain > best[0]:  # ties: the earlier arrival stays
                best = (gain, waiter, slot)
        assert best is not None
        return best[1], best[2]
