"""Durable storage for the Responses API, and where it lives on disk."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from rostra.store.base import ResponseStore, StoreError
from rostra.store.sqlite import SqliteResponseStore

__all__ = ["ResponseStore", "SqliteResponseStore", "StoreError", "default_data_dir", "open_store"]

POSTGRES_SCHEMES = ("postgres://", "postgresql://")

STORE_FILENAME = "responses.sqlite3"


def default_data_dir() -> Path:
    """Where rostra keeps its data: $ROSTRA_DATA_DIR if set, else the platform's per-user data
    directory (the XDG base-directory spec on Linux and other Unixes)."""
    override = os.environ.get("ROSTRA_DATA_DIR")
    if override:
        return Path(override).expanduser()
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA")
        return (Path(base) if base else Path.home() / "AppData" / "Local") / "rostra"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "rostra"
    # The XDG spec says a relative $XDG_DATA_HOME is invalid and must be ignored.
    xdg = os.environ.get("XDG_DATA_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "rostra"
    return Path.home() / ".local" / "share" / "rostra"


def open_store(data_dir: Path, url: str | None = None) -> ResponseStore:
    """The store `url` names (`postgres://...` or `postgresql://...`: PostgreSQL, shared by
    replicas; `sqlite:///path/file.sqlite3`: that SQLite file), else SQLite on
    `data_dir/responses.sqlite3`. Not opened yet: the caller awaits `open()`."""
    if url is None:
        return SqliteResponseStore(Path(data_dir) / STORE_FILENAME)
    if url.startswith(POSTGRES_SCHEMES):
        from rostra.store.postgres import PostgresResponseStore  # asyncpg only where it is used

        return PostgresResponseStore(url)
    if url.startswith("sqlite:///"):
        return SqliteResponseStore(Path(url.removeprefix("sqlite://")))
    raise StoreError(f"unknown store {url!r}: give postgres://user:password@host/database or "
                     "sqlite:///path/to/file.sqlite3")
