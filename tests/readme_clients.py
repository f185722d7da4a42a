"""The client setups the "Clients" page (docs/clients.md, once README.md's section) shows, read from the page itself
so a test runs what it says.

Each tested block in the README follows a marker line `<!-- client-setup: NAME -->` and is one fenced code block:
a JSON config file (written where the client reads it), or a shell block of `export NAME=VALUE` lines and one
command line (its environment and argv). The README writes the values a reader changes as
`http://127.0.0.1:8000` (rostra's address), `local-key` (the API key) and `SmolLM2-135M-Instruct` (the model);
a test serves that model name and key, and swaps only the address for its own server's.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

README = Path(__file__).parent.parent / "README.md"
ADDRESS = "http://127.0.0.1:8000"
KEY = "local-key"
MODEL = "SmolLM2-135M-Instruct"


def documentation() -> str:
    """README.md and the documentation site's pages (docs/*.md), where the set-ups moved (issue 44)."""
    return "\n".join(page.read_text() for page in [README, *sorted((README.parent / "docs").glob("*.md"))])


def setup_block(name: str) -> str:
    """The text of the fenced block after `<!-- client-setup: NAME -->` (fails when the docs lost it)."""
    pattern = re.compile(rf"^<!-- client-setup: {re.escape(name)} -->\n```[a-z]*\n(.*?)^```$", re.M | re.S)
    found = pattern.search(documentation())
    assert found, f"neither README.md nor docs/ has a client-setup block {name!r}"
    return found.group(1)


def at(text: str, base_url: str) -> str:
    """A README block pointed at a test's server instead of rostra's default address."""
    return text.replace(ADDRESS, base_url)


@dataclass
class ShellSetup:
    env: dict[str, str]  # the block's exports
    argv: list[str]  # its command line


def shell_setup(name: str, base_url: str) -> ShellSetup:
    """A shell block's exports and its one command line (comments dropped)."""
    env: dict[str, str] = {}
    argv: list[str] = []
    for line in at(setup_block(name), base_url).splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        if words[0] == "export":
            env.update(word.split("=", 1) for word in words[1:])  # type: ignore[misc]
        else:
            assert not argv, f"client-setup {name!r} has more than one command line"
            argv = words
    return ShellSetup(env, argv)
