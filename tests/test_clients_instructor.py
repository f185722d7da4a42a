"""instructor 1.17 (its own venv: tests/clients/instructor/requirements.txt) with Mode.RESPONSES_TOOLS against
`rostra serve`: it sends `text.format` together with a named `tool_choice`, and reads the forced call's arguments.

The scripted model (tests/data/app_clients.jsonl) writes what a model constrained to the named function's
arguments writes: the JSON object alone."""

import json
import subprocess

from python_clients import CLIENTS, python_client


def test_responses_tools_extracts(app_clients_server):
    done = subprocess.run([str(python_client("instructor")), str(CLIENTS / "instructor" / "extract.py"),
                           app_clients_server.v1, "scripted"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == {"name": "Ada", "age": 36}
