"""Real Node clients (Codex CLI, Claude Code, the Vercel AI SDK...) for the end-to-end tests.

Each client lives in tests/clients/<name>/ with a package.json and a package-lock.json that pin it exactly;
`npm ci` installs it there (node_modules/ is git-ignored) the first time a test asks for it, so a fresh clone
needs nothing but Node, npm and the npm registry. The tests point the clients at rostra on loopback and turn
their telemetry and update checks off: no client reaches a network service while a test runs.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

CLIENTS = Path(__file__).parent / "clients"


def node_client(name: str) -> Path:
    """The installed client directory tests/clients/<name>/ (its node_modules/ made by `npm ci` when missing or
    stale); a test that needs it fails in CI and is skipped elsewhere when Node is missing."""
    directory = CLIENTS / name
    if shutil.which("npm") is None or shutil.which("node") is None:
        message = "Node and npm are needed for the real-client tests"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    lock = directory / "package-lock.json"
    stamp = directory / "node_modules" / ".rostra-lock-sha256"
    wanted = hashlib.sha256(lock.read_bytes()).hexdigest()
    with open(directory / ".install.lock", "w") as guard:  # one installer at a time, across test processes
        fcntl.flock(guard, fcntl.LOCK_EX)
        if not stamp.exists() or stamp.read_text() != wanted:
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=directory, check=True,
                           env={**os.environ, "NPM_CONFIG_UPDATE_NOTIFIER": "false"}, timeout=900)
            stamp.write_text(wanted)
    return directory


def node_bin(name: str, command: str) -> Path:
    """The path of an installed client's executable (node_modules/.bin/<command>)."""
    return node_client(name) / "node_modules" / ".bin" / command
