"""Which serving processes use a SQLite store, so a process that starts knows whether it is the only one.

Several `rostra serve` processes on one machine may share one SQLite store (a chat model and an embedding model on
two ports, or a few replicas): they share it as replicas share PostgreSQL, each running its responses under a lease
with owner-checked writes (base.py), and failing another's runs only once their lease has expired. What a lease
cannot tell at start-up is whether the process that left a response running is still alive. This lock can: every
serving process holds a shared flock on `<store>.lock` while it runs, and the kernel drops it with the process
however it ends (kill -9 included). A process that starts first tries to take it exclusively: if it can, no other
process uses the store, so whatever is still running there was left by a process that is gone, and is failed at once
(as after a restart); the lock is then shared. If it cannot, other processes are alive: only expired leases are
failed, and the others' runs go on.
"""

from __future__ import annotations

import os
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no flock; a process there never assumes it is alone (leases decide)
    fcntl = None  # type: ignore[assignment]


class StoreUsers:
    """This process's membership among the processes that use one SQLite store."""

    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None
        self._exclusive = False

    def join(self) -> bool:
        """Become one of the store's users. True when no other live process uses it: the lock is then held
        exclusively until `admit_others()`, so none starts meanwhile. Blocks while a starting process recovers
        (milliseconds): call it off the event loop."""
        if fcntl is None or self._fd is not None:
            return False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self._exclusive = True
        except BlockingIOError:
            fcntl.flock(fd, fcntl.LOCK_SH)  # waits only for a starting process's recovery
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self._exclusive

    def admit_others(self) -> None:
        """Recovery is done: other processes may join (the lock becomes shared)."""
        if self._fd is not None and self._exclusive and fcntl is not None:
            fcntl.flock(self._fd, fcntl.LOCK_SH)
            self._exclusive = False

    def leave(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None
            self._exclusive = False
