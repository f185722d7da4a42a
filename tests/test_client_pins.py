"""The install lines the documentation gives for the clients CI runs pin exactly the versions CI runs (issue 44: an
unpinned `npm install -g @qwen-code/qwen-code` on Node 20 silently installed 0.15.10, whose first prompt does not fit
the embedded model's context). The pins are read from tests/clients/ (package.json, requirements.txt); the lines
from README.md and the docs site's pages."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLIENTS = ROOT / "tests" / "clients"
# The packages a user installs to run a client (a tests/clients/ package's other dependencies come with them).
USER_INSTALLED = {"opencode-ai", "@mariozechner/pi-coding-agent", "@qwen-code/qwen-code", "@openai/codex",
                  "@anthropic-ai/claude-code", "ai", "@ai-sdk/openai"}


def documentation() -> str:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return "\n".join(page.read_text() for page in pages)


def npm_pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for manifest in CLIENTS.glob("*/package.json"):
        pins.update(json.loads(manifest.read_text()).get("dependencies", {}))
    return pins


def test_every_npm_install_line_pins_the_version_ci_runs():
    text = documentation()
    pins = npm_pins()
    installed: dict[str, str] = {}
    for line in re.findall(r"npm install ([^`\n]+)", text):
        for word in line.split():
            if word.startswith("-"):
                continue
            name, _, version = word.rpartition("@") if word.count("@") > (1 if word.startswith("@") else 0) \
                else (word, "", "")
            installed[name] = version
            if name in pins:
                assert version == pins[name], f"`npm install {line}`: {name} is pinned to {pins[name]} in tests/clients/"
    missing = USER_INSTALLED - installed.keys()
    assert not missing, f"no install line for {sorted(missing)}"


def test_the_instructor_line_pins_the_version_ci_runs():
    pinned = dict(line.split("==") for line in (CLIENTS / "instructor" / "requirements.txt").read_text().splitlines()
                  if "==" in line and not line.startswith("#"))
    assert f"pip install instructor=={pinned['instructor']}" in documentation()
