"""`codex exec` (the Codex CLI, pinned in tests/clients/codex/) run against a rostra server.

Each run gets a CODEX_HOME of its own holding the config.toml a user writes (README, "Coding agents"): the
provider block pointing at rostra's /v1 with the Responses wire API, and nothing else changed from Codex's
defaults but what keeps a test offline: no update check, no analytics, no feedback upload, and an unreachable
proxy for anything that is not loopback, so a request to a network service fails instead of leaving the machine.
The sandbox is Codex's `workspace-write` (its bundled bubblewrap where it works), or none where this machine
cannot run bubblewrap (containers without user namespaces); either lets the model's shell commands run in the
test's directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from node_clients import node_bin

# What a user writes (README, "Coding agents"): the provider block. Top-level keys come before any table.
USER_CONFIG = """\
model = "{model}"
model_provider = "rostra"
{top_level}
[model_providers.rostra]
name = "rostra"
base_url = "{base_url}"
wire_api = "responses"
"""

# What keeps a test offline.
OFFLINE = """\
[analytics]
enabled = false

[feedback]
enabled = false
"""


@dataclass
class CodexRun:
    returncode: int
    events: list[dict[str, Any]]  # `codex exec --json` output, one event a line
    last_message: str  # what -o wrote: the agent's final message
    stderr: str
    items: list[dict[str, Any]] = field(default_factory=list)  # the completed items, in order
    session: list[dict[str, Any]] = field(default_factory=list)  # Codex's own record of the session (its rollout)
    home: Path | None = None  # its CODEX_HOME

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [item for item in self.items if item.get("type") == kind]

    def errors(self) -> list[dict[str, Any]]:
        return [event for event in self.events if event.get("type") in ("error", "turn.failed")]


def codex_exec(base_url: str, workdir: Path, prompt: str, *args: str, model: str = "scripted",
               extra_config: str = "", timeout: float = 180, user_config: str | None = None) -> CodexRun:
    """One `codex exec --json` run in `workdir` (its own CODEX_HOME beside it); `user_config`: the whole
    config.toml a user wrote (e.g. the README's), in place of the provider block made from `model`."""
    home = workdir.parent / f"{workdir.name}-codex-home"
    home.mkdir(exist_ok=True)
    top_level = "check_for_update_on_startup = false\n" + extra_config
    config = USER_CONFIG.format(model=model, base_url=base_url, top_level=top_level) if user_config is None \
        else top_level + user_config  # top-level keys before the user's tables
    (home / "config.toml").write_text(config + OFFLINE)
    last = home / "last-message.txt"
    command = [str(node_bin("codex", "codex")), "exec", "--json", "--skip-git-repo-check", "--color", "never",
               "--sandbox", sandbox_mode(), "-o", str(last), *args, prompt]
    done = subprocess.run(command, cwd=workdir, env=offline_env(home), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    items = [event["item"] for event in events if event.get("type") == "item.completed"]
    session = [json.loads(line) for rollout in sorted(home.glob("sessions/**/rollout-*.jsonl"))
               for line in rollout.read_text().splitlines() if line.startswith("{")]
    return CodexRun(done.returncode, events, last.read_text() if last.exists() else "", done.stderr, items,
                    session, home)


def offline_env(home: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "CODEX_HOME": str(home),
        "LANG": "C.UTF-8", "TERM": "dumb", "NO_COLOR": "1", "RUST_LOG": "error",
        # Anything but loopback goes to a port nothing listens on: no test reaches a network service.
        "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9", "ALL_PROXY": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1,localhost",
    }


_SANDBOX: list[str] = []


def sandbox_mode() -> str:
    """`workspace-write` where Codex's sandbox runs here, else `danger-full-access` (the test's directory is
    a temporary one either way)."""
    if not _SANDBOX:
        probe = subprocess.run([str(node_bin("codex", "codex")), "sandbox", "--", "true"], capture_output=True,
                               timeout=60, stdin=subprocess.DEVNULL, env=offline_env(Path(tempfile.mkdtemp())))
        _SANDBOX.append("workspace-write" if probe.returncode == 0 else "danger-full-access")
    return _SANDBOX[0]
