"""The speculation probe (llamacpp_speculation.py's calibration) in the background, once the server answers.

Measured at load, the probe kept a first `rostra serve` from answering for seconds on a quiet machine and for
minutes on a busy one (8 s of a 10 s start for the embedded model on 2 busy cores, issue 44); its result is kept
in the data directory, so only a first start (or a changed file or setting) measures. Now the server answers at
once with drafting off, and the probe runs when nothing else does, so that requests and measurements never share
the machine:

- it starts only after the engine has been idle for QUIET_SECONDS (no request running or waiting, no
  tokenization in flight);
- each of its requests holds every slot (requests arriving meanwhile wait for that one request, a fraction of a
  second) and runs only if the engine is still idle; a request that came since drops the attempt, which starts
  again at the next quiet moment (a server never quiet never drafts: the safe side).

Where drafting pays, the server is made again with it on, also at a quiet moment: new work waits at the engine's
gate for those seconds (llamacpp.py's `_paused`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Awaitable, Callable, TypeVar

from rostra.engines.llamacpp_slots import SlotRouter
from rostra.engines.llamacpp_speculation import Post

log = logging.getLogger("rostra.engine.llamacpp")

QUIET_SECONDS = 1.0  # idle this long before a probe starts: a client's next request usually comes sooner
_POLL_SECONDS = 0.1

Result = TypeVar("Result")


class ProbeInterrupted(Exception):
    """A request came while the probe measured: this attempt is dropped."""


class QuietProbe:
    """Runs work on llama.cpp's server only while the engine has nothing else to do."""

    def __init__(self, busy: Callable[[], bool], slots: SlotRouter, post: Post):
        self._busy = busy
        self._slots = slots
        self._post = post
        self.attempts = 0

    async def quiet(self) -> None:
        """Returns once the engine has been idle for QUIET_SECONDS (and still is)."""
        idle_since: float | None = None
        while True:
            if self._busy():
                idle_since = None
            elif idle_since is None:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since >= QUIET_SECONDS:
                return
            await asyncio.sleep(_POLL_SECONDS)

    async def post(self, path: str, body: dict) -> Any:
        """One of the probe's requests, with every slot held; ProbeInterrupted if the engine is not idle."""
        if self._busy():
            raise ProbeInterrupted
        with self._slots.exclusive():
            return await self._post(path, body)

    async def run(self, work: Callable[[Post], Awaitable[Result]]) -> Result:
        """`work` (given this probe's `post`) at the next quiet moment, again until no request interrupts it."""
        while True:
            await self.quiet()
            self.attempts += 1
            try:
                return await work(self.post)
            except ProbeInterrupted:
                log.debug("speculation probe: a request came, measured again at the next quiet moment")
