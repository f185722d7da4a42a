"""Operator input that could kill the process is refused at start-up (issue 33): --models-config values of
the wrong type or out of range, named by model and key; `parallel` beyond MAX_PARALLEL; the same ranges on the
command line."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from rostra.config import Settings
from rostra.embedded import embedded_model_path
from rostra.models.checks import MAX_PARALLEL
from rostra.models.specs import ModelConfigError, read_models_config
from servers import became_healthy, free_port


def config(tmp_path, entry: str):
    path = tmp_path / "models.yaml"
    path.write_text(f"models:\n  - name: smol\n    model: {embedded_model_path()}\n{entry}")
    return path


@pytest.mark.parametrize("entry,message", [
    ("    parallel: 100000\n", "parallel: 100000 is out of range (from 1 to 512)"),
    ("    parallel: 0\n", "parallel: 0 is out of range"),
    ("    parallel: four\n", "parallel: expected int, not str 'four'"),
    ("    parallel: true\n", "parallel: expected int, not bool"),
    ("    max_model_len: 8.5\n", "max_model_len: expected int or null, not float"),
    ("    threads: -2\n", "threads: -2 is out of range"),
    ("    upstream_timeout: fast\n", "upstream_timeout: expected float, not str"),
    ("    strict_tool_parsing: yes please\n", "strict_tool_parsing: expected bool"),
    ("    served_model_name: [a, 3]\n", "served_model_name"),
    ("    cache_ram_mib: -5\n", "cache_ram_mib: -5 is out of range"),
])
def test_a_bad_value_is_refused_naming_the_model_and_key(tmp_path, entry, message):
    with pytest.raises(ModelConfigError) as refused:
        read_models_config(config(tmp_path, entry), Settings())
    assert message in str(refused.value) and "models[0]" in str(refused.value), str(refused.value)


def test_good_values_pass(tmp_path):
    (spec,) = read_models_config(config(tmp_path, "    parallel: 8\n    max_model_len: 1024\n    threads: 2\n"),
                                 Settings())
    assert (spec.settings.parallel, spec.settings.max_model_len, spec.settings.threads) == (8, 1024, 2)


@pytest.mark.parametrize("flags,message", [
    (["--parallel", str(MAX_PARALLEL + 1)], "--parallel: from 1 to 512"),
    (["--parallel", "0"], "--parallel: from 1 to 512"),
    (["--threads", "0"], "threads: 0 is out of range"),
])
def test_the_command_line_is_checked_before_anything_loads(flags, message):
    done = subprocess.run([sys.executable, "-m", "rostra.cli", "serve", *flags, "--port", "1"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode != 0 and message in done.stderr, done.stderr[-2000:]


def test_a_port_in_use_is_refused_before_the_model_loads():
    """Issue 44: a second server on a busy port says so at once, naming it, instead of loading its model first."""
    with socket.socket() as occupant:
        occupant.bind(("127.0.0.1", 0))
        occupant.listen()
        port = occupant.getsockname()[1]
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "rostra.cli", "serve", "--port", str(port)], capture_output=True,
                              text=True, timeout=120)
        took = time.monotonic() - started
    assert done.returncode != 0, done.stderr[-2000:]
    assert f"rostra: cannot listen on 127.0.0.1:{port}: Address already in use" in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "serving" not in done.stderr
    assert took < 10, took  # a bare interpreter start and one bind (the model takes longer), with room for a busy CI


def test_a_second_server_on_a_port_another_is_still_loading_on_is_refused(tmp_path):
    """Issue 44: two `rostra serve` started together on one port. The first has claimed the port and is loading
    its model; the second must say the port is in use at once, not load its model too and then share the port
    (with SO_REUSEADDR, two sockets bound but not yet listening do not conflict on Linux)."""
    port = free_port()
    first_log = tmp_path / "first.log"
    with open(first_log, "wb") as log:
        first = subprocess.Popen([sys.executable, "-m", "rostra.cli", "serve", "--port", str(port),
                                  "--data-dir", str(tmp_path / "first")], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while "serving" not in first_log.read_text() and time.monotonic() < deadline:  # bound, now loading
            assert first.poll() is None, first_log.read_text()[-2000:]
            time.sleep(0.05)
        started = time.monotonic()
        second = subprocess.run([sys.executable, "-m", "rostra.cli", "serve", "--port", str(port),
                                 "--data-dir", str(tmp_path / "second")], capture_output=True, text=True, timeout=60)
        took = time.monotonic() - started
        assert second.returncode != 0, second.stderr[-2000:]
        assert f"rostra: cannot listen on 127.0.0.1:{port}: Address already in use" in second.stderr
        assert "Traceback" not in second.stderr and "serving" not in second.stderr
        assert took < 10, took
        # The first one was not disturbed: it serves once loaded.
        assert became_healthy(first, f"http://127.0.0.1:{port}", first_log, 120, "the first rostra serve")
    finally:
        first.terminate()
        first.wait(timeout=30)
