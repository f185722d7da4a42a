"""One serving process per SQLite store.

A second `rostra serve` on the same file would take the first one's running responses for a previous run's
leftovers and mark them failed (SQLite's recovery assumes it owns the file), and both would write the same rows.
The server therefore holds an exclusive advisory lock (flock) on `<store>.lock` for as long as it runs; the kernel
drops the lock with the process, however it ends (kill -9 included), so a stale lock file never blocks a restart.
Replicas that must share state use PostgreSQL (`--store postgres://...`), which is made for it.
"""

from __future__ import annotations

import os
from pathlib import Path

from rostra.store.base import StoreError

try:
    import fcntl
except ImportError:  # Windows: no flock; one process per store is then the operator's to keep
    fcntl = None  # type: ignore[assignment]


class ProcessLock:
    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, or raise StoreError naming the process that holds it."""
        if fcntl is None or self._fd is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise StoreError(f"another rostra process (pid {holder}) is serving from {self.path.with_suffix('')}; "
                             "one process per SQLite store: stop it, give this one another --data-dir, or share a "
                             "PostgreSQL store between replicas (--store postgres://...)") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None
