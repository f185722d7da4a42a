"""How a download shows: a bar on a terminal (tqdm, which huggingface_hub brings), a plain line per file when
stderr is not one (a log, CI), so logs stay readable."""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable


@dataclass
class DownloadState:
    """A pull under way in this process, for GET /v1/models (many models: a model downloads on its first request)."""
    done: int  # bytes on disk, those in the cache before included
    total: int


_ACTIVE: dict[str, DownloadState] = {}  # by the reference's label (OWNER/NAME[:QUANT])
_LOCK = threading.Lock()


def downloading(label: str) -> DownloadState | None:
    with _LOCK:
        return _ACTIVE.get(label)


def track(label: str, state: DownloadState | None) -> None:
    with _LOCK:
        if state is None:
            _ACTIVE.pop(label, None)
        else:
            _ACTIVE[label] = state


def size_text(size: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} GB"


class ConsoleProgress:
    """One download at a time; `start` returns the callback the downloader calls with each chunk's size."""

    def __init__(self) -> None:
        self._bar: Any = None

    def start(self, label: str, size: int, done: int) -> Callable[[int], None]:
        if sys.stderr.isatty():
            from tqdm.auto import tqdm

            self._bar = tqdm(total=size, unit="B", unit_scale=True, desc=label, file=sys.stderr,
                             initial=done, leave=True)
            return self._bar.update  # type: ignore[no-any-return]
        resumed = f", resuming at {size_text(done)}" if done else ""
        print(f"downloading {label} ({size_text(size)}{resumed})", file=sys.stderr, flush=True)
        return lambda _: None

    def finish(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
