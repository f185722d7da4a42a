import pytest
from openai import OpenAI

from servers import DATA, RunningServer

SCRIPTED_MODEL = "scripted"
API_KEY = "test-key-123"


@pytest.fixture(scope="session")
def scripted_server():
    server = RunningServer(["--engine", "scripted", "--script", str(DATA / "script.jsonl"),
                            "--max-model-len", "2048"])
    yield server
    server.stop()


@pytest.fixture(scope="session")
def auth_server():
    server = RunningServer(["--engine", "scripted", "--script", str(DATA / "script.jsonl"), "--api-key", API_KEY])
    yield server
    server.stop()


@pytest.fixture(scope="session")
def real_server():
    """The embedded model on llama.cpp, as `rostra serve` starts it with no arguments."""
    server = RunningServer(["--parallel", "4", "--max-model-len", "2048"])
    yield server
    server.stop()


@pytest.fixture
def scripted_client(scripted_server) -> OpenAI:
    return OpenAI(base_url=f"{scripted_server.base_url}/v1", api_key="unused", max_retries=0)


@pytest.fixture(scope="session")
def tools_server():
    server = RunningServer(["--engine", "scripted", "--script", str(DATA / "tools.jsonl"),
                            "--tool-call-parser", "hermes"])
    yield server
    server.stop()


@pytest.fixture(scope="session")
def reasoning_server():
    server = RunningServer(["--engine", "scripted", "--script", str(DATA / "reasoning.jsonl"),
                            "--reasoning-parser", "qwen3", "--tool-call-parser", "hermes", "--reasoning-field", "both"])
    yield server
    server.stop()


@pytest.fixture(scope="session")
def real_reasoning_server():
    """The embedded model as if it were DeepSeek-R1 (whose outputs open thinking implicitly)."""
    server = RunningServer(["--parallel", "2", "--max-model-len", "2048", "--reasoning-parser", "deepseek_r1"])
    yield server
    server.stop()


@pytest.fixture(scope="session")
def harmony_server():
    server = RunningServer(["--engine", "scripted", "--script", str(DATA / "harmony.jsonl"),
                            "--reasoning-parser", "gpt_oss", "--reasoning-field", "both"])
    yield server
    server.stop()
