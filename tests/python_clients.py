"""Python clients whose pins cannot live in the test extra (instructor's jiter<0.15 beside the test extra's openai):
each lives in tests/clients/<name>/ with a requirements.txt pinning it and everything it needs, installed by
pip into tests/clients/<name>/.venv (git-ignored) the first time a test asks for it, and run as a subprocess."""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
from pathlib import Path

CLIENTS = Path(__file__).parent / "clients"


def python_client(name: str) -> Path:
    """The python executable of tests/clients/<name>/.venv, made (or remade, when requirements.txt changed)."""
    directory = CLIENTS / name
    venv = directory / ".venv"
    requirements = directory / "requirements.txt"
    stamp = venv / ".rostra-requirements-sha256"
    wanted = hashlib.sha256(requirements.read_bytes()).hexdigest()
    with open(directory / ".install.lock", "w") as guard:  # one installer at a time, across test processes
        fcntl.flock(guard, fcntl.LOCK_EX)
        if not stamp.exists() or stamp.read_text() != wanted:
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, timeout=300)
            subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                            "-r", str(requirements)], check=True, timeout=900,
                           env={**os.environ, "PIP_NO_INPUT": "1"})
            stamp.write_text(wanted)
    return venv / "bin" / "python"
