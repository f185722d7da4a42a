"""README.md's "Clients" section, run as written: every client-setup block is used by a test (the coding agents'
by their client tests; the SDK snippets here, executed against a server whose address replaces the README's)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from readme_clients import KEY, MODEL, README, at, documentation, setup_block
from servers import RunningServer

# Which test runs each block; a block no test reads would drift.
RUN_BY = {"opencode-config": "test_clients_coding_agents.py", "opencode": "test_clients_coding_agents.py",
          "pi-config": "test_clients_coding_agents.py", "pi": "test_clients_coding_agents.py",
          "qwen-code": "test_clients_coding_agents.py", "codex-config": "test_clients_codex.py",
          "openai-sdk": "test_readme_clients.py", "anthropic-sdk": "test_readme_clients.py",
          "images-curl": "test_api_images.py"}


def test_every_setup_block_is_run_by_a_test():
    names = re.findall(r"^<!-- client-setup: (\S+) -->$", documentation(), re.M)
    assert sorted(names) == sorted(RUN_BY)
    for name, test in RUN_BY.items():
        assert f'"{name}"' in (README.parent / "tests" / test).read_text(), (name, test)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    script = tmp_path_factory.mktemp("sdk") / "script.jsonl"
    script.write_text('{"match": "Say hello", "output": "Hello from rostra."}\n')
    running = RunningServer(["--engine", "scripted", "--script", str(script), "--served-model-name", MODEL,
                             "--api-key", KEY])
    yield running
    running.stop()


@pytest.mark.parametrize("name", ["openai-sdk", "anthropic-sdk"])
def test_sdk_snippet(server, name):
    code = at(setup_block(name), server.base_url)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "Hello from rostra."
