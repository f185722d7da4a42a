"""Models by name from the Hugging Face Hub (rostra/hub/, issue 44): `rostra serve OWNER/NAME[:QUANT]`, `pull`,
`ls`, `rm`, against a local stand-in for the Hub's HTTP API (tests/hub_standin.py) with repositories made from the
embedded GGUF. Every command is a real process with its own HF_HOME; nothing reaches the network."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from openai import OpenAI

from hub_standin import StandInHub, StandInRepo
from images import data_url, encoded, pattern
from mmproj_gguf import mmproj_path
from rostra.embedded import embedded_model_path
from rostra.generation_defaults import LLAMACPP_DEFAULTS, llamacpp_recommendation
from rostra.hub.choice import ChoiceError, RemoteFile, choose, quant_of
from rostra.hub.reference import HubReference
from servers import RunningServer

CACHE = Path(__file__).resolve().parent.parent / ".cache"
REPO = "test-org/SmolLM2-135M-Instruct-GGUF"
TINY = "test-org/tiny-GGUF"


def fake_gguf(label: str, size: int = 200_000) -> bytes:
    """Bytes standing for a quantization that is listed and downloaded but never loaded."""
    return b"GGUF" + random.Random(label).randbytes(size)


@pytest.fixture(scope="module")
def smol() -> bytes:
    return embedded_model_path().read_bytes()


@pytest.fixture
def hub(smol):
    with StandInHub() as hub:
        hub.repos[REPO] = StandInRepo({
            "SmolLM2-135M-Instruct-Q4_K_M.gguf": smol, "SmolLM2-135M-Instruct-Q8_0.gguf": fake_gguf("Q8_0"),
            "README.md": b"# SmolLM2-135M-Instruct GGUF\n"})
        hub.repos[TINY] = StandInRepo({
            "tiny-Q4_K_M.gguf": fake_gguf("tiny Q4_K_M"), "tiny-Q8_0.gguf": fake_gguf("tiny Q8_0"),
            "tiny-Q5_K_M.gguf": fake_gguf("tiny Q8_0"),  # the same bytes as Q8_0: one blob, two names
            "mmproj-tiny-f16.gguf": fake_gguf("mmproj f16"), "mmproj-tiny-Q8_0.gguf": fake_gguf("mmproj q8"),
            "split/tiny-Q2_K-00001-of-00002.gguf": fake_gguf("split 1"),
            "split/tiny-Q2_K-00002-of-00002.gguf": fake_gguf("split 2")})
        yield hub


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def hub_env(endpoint: str, home: Path, **extra: str) -> dict[str, str]:
    """The Hugging Face variables a test's process sees: its own cache and the stand-in, nothing inherited."""
    return {"HF_HOME": str(home), "HF_HUB_CACHE": str(home / "hub"), "HF_ENDPOINT": endpoint, "HF_TOKEN": "",
            "HF_HUB_OFFLINE": "0", "HF_HUB_DISABLE_TELEMETRY": "1", **extra}


def rostra(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    inherited = {key: value for key, value in os.environ.items() if not key.startswith("HF_")}
    return subprocess.run([sys.executable, "-m", "rostra.cli", *args], env={**inherited, **env},
                          capture_output=True, text=True, timeout=300)


def pulled(env: dict[str, str], reference: str) -> Path:
    done = rostra(env, "pull", reference)
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.strip())


def one_line_error(done: subprocess.CompletedProcess, command: str = "pull") -> str:
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"rostra {command}: " if command != "serve" else "rostra: "), done.stderr
    return last


def answer(server: RunningServer, model: str, content: object = "Say hello.") -> str:
    client = OpenAI(base_url=server.v1, api_key="unused")
    completion = client.chat.completions.create(model=model, messages=[{"role": "user", "content": content}],
                                                max_tokens=8, temperature=0)
    return completion.choices[0].message.content or ""


# -- serving by name -----------------------------------------------------------------------------------------

def test_serve_by_name_downloads_the_default_quantization_and_its_projector(hub, tmp_path):
    """The repository of a model that sees: Q4_K_M by default, the projector found and used with no flag."""
    hub.repos[REPO].files["mmproj-SmolLM2-135M-Instruct-f16.gguf"] = mmproj_path(CACHE).read_bytes()
    server = RunningServer([REPO, "--parallel", "1", "--speculative", "off"], log_level="info", env=hub_env(hub.url, tmp_path / "hf"))
    try:
        client = OpenAI(base_url=server.v1, api_key="unused")
        model = client.models.list().data[0]
        assert model.id == REPO
        assert model.model_extra["input_modalities"] == ["text", "image"]
        assert answer(server, REPO)
        picture = [{"type": "text", "text": "What is this?"},
                   {"type": "image_url", "image_url": {"url": data_url(encoded(pattern(40, 28), "PNG"))}}]
        assert answer(server, REPO, picture)
    finally:
        server.stop()
    log = server.log_path.read_text()
    assert "Q4_K_M" in log and "memory-mapped" in log
    assert len(hub.downloads("Q4_K_M.gguf")) == 1 and not hub.downloads("Q8_0.gguf")


def test_pull_then_serve_offline_and_a_second_pull_downloads_nothing(hub, tmp_path, smol):
    env = hub_env(hub.url, tmp_path / "hf")
    path = pulled(env, REPO)
    assert path.name == "SmolLM2-135M-Instruct-Q4_K_M.gguf" and path.read_bytes() == smol
    again = rostra(env, "pull", REPO)
    assert again.returncode == 0 and Path(again.stdout.strip()) == path
    assert "already downloaded" in again.stderr
    assert len(hub.downloads("Q4_K_M.gguf")) == 1  # the second pull listed the repository, fetched nothing
    seen = len(hub.requests)
    offline = hub_env(f"http://127.0.0.1:{closed_port()}", tmp_path / "hf", HF_HUB_OFFLINE="1")
    server = RunningServer([REPO, "--parallel", "1", "--speculative", "off"], env=offline)
    try:
        assert answer(server, REPO)
    finally:
        server.stop()
    assert len(hub.requests) == seen


def test_an_explicit_quantization_in_any_case_and_the_hf_co_spelling(hub, tmp_path):
    done = rostra(hub_env(hub.url, tmp_path / "hf"), "pull", f"hf.co/{REPO}:q8_0")
    assert done.returncode == 0, done.stderr
    path = Path(done.stdout.strip())
    assert path.name == "SmolLM2-135M-Instruct-Q8_0.gguf"
    assert path.read_bytes() == hub.repos[REPO].files[path.name]
    assert not hub.downloads("Q4_K_M.gguf")
    # not a terminal: a plain line per file
    assert f"downloading {REPO} SmolLM2-135M-Instruct-Q8_0.gguf (200.0 kB)" in done.stderr.splitlines()
    # the Hub out of reach: what is downloaded answers
    unreachable = hub_env(f"http://127.0.0.1:{closed_port()}", tmp_path / "hf")
    assert pulled(unreachable, f"{REPO}:Q8_0") == path


def test_a_split_model_downloads_every_part_and_the_preferred_projector(hub, tmp_path):
    done = rostra(hub_env(hub.url, tmp_path / "hf"), "pull", f"{TINY}:Q2_K")
    assert done.returncode == 0, done.stderr
    first = Path(done.stdout.strip())
    assert first.name == "tiny-Q2_K-00001-of-00002.gguf"
    assert (first.parent / "tiny-Q2_K-00002-of-00002.gguf").read_bytes() == fake_gguf("split 2")
    projector = first.parent.parent / "mmproj-tiny-f16.gguf"  # F16 before Q8_0
    assert f"projector: {projector}" in done.stderr and projector.read_bytes() == fake_gguf("mmproj f16")
    assert not hub.downloads("mmproj-tiny-Q8_0.gguf")


# -- downloads you can trust -------------------------------------------------------------------------------

def test_a_killed_pull_resumes_with_a_range_request(hub, tmp_path):
    data = fake_gguf("big", 6_000_000)
    hub.repos["test-org/big-GGUF"] = StandInRepo({"big-Q4_K_M.gguf": data})
    hub.stall = ("big-Q4_K_M.gguf", 2_500_000)  # sends this much, then holds the connection
    env = hub_env(hub.url, tmp_path / "hf")
    inherited = {key: value for key, value in os.environ.items() if not key.startswith("HF_")}
    process = subprocess.Popen([sys.executable, "-m", "rostra.cli", "pull", "test-org/big-GGUF"],
                               env={**inherited, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    blobs = tmp_path / "hf" / "hub" / "models--test-org--big-GGUF" / "blobs"
    deadline = time.monotonic() + 60
    while not any(part.stat().st_size == 2_500_000 for part in blobs.glob("*.rostra-partial")):
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.1)
    process.kill()
    process.wait(timeout=15)
    hub.stall = None
    hub.release.set()
    path = pulled(env, "test-org/big-GGUF")
    assert path.read_bytes() == data
    first, resumed = hub.downloads("big-Q4_K_M.gguf")
    assert first.range is None and resumed.range == "bytes=2500000-"
    assert resumed.sent == len(data) - 2_500_000
    assert not list(blobs.glob("*.rostra-partial"))


def test_a_corrupted_download_is_refused_and_never_served(hub, tmp_path):
    hub.repos["test-org/bad-GGUF"] = StandInRepo({"bad-Q4_K_M.gguf": fake_gguf("bad")},
                                                 corrupt={"bad-Q4_K_M.gguf"})
    env = hub_env(hub.url, tmp_path / "hf")
    assert "SHA-256" in one_line_error(rostra(env, "pull", "test-org/bad-GGUF"))
    folder = tmp_path / "hf" / "hub" / "models--test-org--bad-GGUF"
    assert not [path for path in folder.rglob("*") if path.is_file() and "bad" in path.name or
                path.parent.name == "blobs"]
    offline = {**env, "HF_HUB_OFFLINE": "1"}
    served = rostra(offline, "serve", "test-org/bad-GGUF", "--port", str(closed_port()))
    assert "not downloaded" in one_line_error(served, "serve")


@pytest.mark.parametrize("reference, expected", [
    ("test-org/nope-GGUF", "no repository test-org/nope-GGUF on http://127.0.0.1:"),
    ("test-org/checkpoint", "test-org/checkpoint has no GGUF model file (it has: config.json, model.safetensors)"),
    (f"{REPO}:Q2_K", f"{REPO} has no GGUF matching 'Q2_K'; its quantizations: Q4_K_M, Q8_0"),
    ("test-org/huge-GGUF", "not enough disk space"),
    ("no reference here", "is not OWNER/NAME[:QUANT]"),
])
def test_what_cannot_be_had_is_one_line_and_a_failure(hub, tmp_path, reference, expected):
    hub.repos["test-org/checkpoint"] = StandInRepo({"config.json": b"{}", "model.safetensors": b"\0" * 64})
    hub.repos["test-org/huge-GGUF"] = StandInRepo({"huge-Q4_K_M.gguf": b"GGUF"},
                                                  claimed_sizes={"huge-Q4_K_M.gguf": 10 ** 18})
    assert expected in one_line_error(rostra(hub_env(hub.url, tmp_path / "hf"), "pull", reference))


def test_serve_of_an_unknown_repository_is_one_line_and_a_failure(hub, tmp_path):
    served = rostra(hub_env(hub.url, tmp_path / "hf"), "serve", "test-org/nope-GGUF", "--port", str(closed_port()))
    assert "test-org/nope-GGUF: no such file, and no repository test-org/nope-GGUF on" in one_line_error(served,
                                                                                                       "serve")


def test_no_network_is_one_line_and_a_failure(tmp_path):
    env = hub_env(f"http://127.0.0.1:{closed_port()}", tmp_path / "hf")
    assert "no network: cannot reach" in one_line_error(rostra(env, "pull", REPO))
    served = rostra(env, "serve", "test-org/nope-GGUF", "--port", str(closed_port()))
    assert "no network" in one_line_error(served, "serve")


def test_hf_token_is_sent_as_authorization(hub, tmp_path):
    hub.repos["test-org/private-GGUF"] = StandInRepo({"private-Q4_K_M.gguf": fake_gguf("private")},
                                                     token="hf_standin_secret")
    env = hub_env(hub.url, tmp_path / "hf")
    assert "needs HF_TOKEN" in one_line_error(rostra(env, "pull", "test-org/private-GGUF"))
    hub.requests.clear()
    pulled({**env, "HF_TOKEN": "hf_standin_secret"}, "test-org/private-GGUF")
    asked = [seen for seen in hub.requests if "private-GGUF" in seen.path]
    assert len(asked) == 2  # the listing and the file
    assert all(seen.authorization == "Bearer hf_standin_secret" for seen in asked)


def test_many_models_shows_a_model_downloading_on_its_first_request(hub, tmp_path, smol):
    """A --models-config entry naming a Hub model: its first request downloads it; meanwhile GET /v1/models shows
    `downloading` with the bytes, and a client that gives up waiting does not stop the download."""
    config = tmp_path / "models.yaml"
    config.write_text(f"models:\n  - name: smol\n    model: {REPO}:Q4_K_M\n    speculative: 'off'\n"
                      "  - name: scripted\n    engine: scripted\n")
    hub.stall, hub.stall_drops = ("SmolLM2-135M-Instruct-Q4_K_M.gguf", 20_000_000), False
    server = RunningServer(["--models-config", str(config), "--parallel", "1"], env=hub_env(hub.url, tmp_path / "hf"))
    try:
        before = _card(server, "smol")
        assert before["state"] == "unloaded" and "input_modalities" not in before  # its projector: not known yet
        impatient = OpenAI(base_url=server.v1, api_key="unused", timeout=2, max_retries=0)
        with pytest.raises(Exception):
            impatient.chat.completions.create(model="smol", messages=[{"role": "user", "content": "Hi"}])
        deadline = time.monotonic() + 60
        while (card := _card(server, "smol")).get("download", {}).get("bytes_done") != 20_000_000:
            assert time.monotonic() < deadline, card
            time.sleep(0.2)
        assert card["state"] == "downloading" and card["download"]["bytes_total"] == len(smol)
        hub.release.set()
        assert answer(server, "smol")
        loaded = _card(server, "smol")
        assert loaded["state"] == "loaded" and loaded["input_modalities"] == ["text"] and "download" not in loaded
    finally:
        server.stop()
    assert len(hub.downloads("Q4_K_M.gguf")) == 1


def _card(server: RunningServer, name: str) -> dict:
    import httpx

    cards = httpx.get(f"{server.v1}/models", timeout=10).json()["data"]
    return next(card for card in cards if card["id"] == name)


# -- the sampling that suits the model -----------------------------------------------------------------------

def test_a_model_without_a_recommendation_gets_llama_cpps_defaults(hub, tmp_path):
    """The embedded GGUF carries no general.sampling.* and its repository no generation_config.json: llama.cpp's
    own defaults (what llama-server would give), not OpenAI's temperature 1 with no truncation; a request's own
    values win."""
    server = RunningServer([REPO, "--parallel", "1", "--speculative", "off"], log_level="info",
                           env=hub_env(hub.url, tmp_path / "hf"))
    try:
        card = _card(server, REPO)
        assert card["generation_defaults"] == LLAMACPP_DEFAULTS == {"temperature": 0.8, "top_k": 40, "top_p": 0.95,
                                                                    "min_p": 0.05}
        assert card["generation_defaults_from"] == "llama.cpp's defaults"
        client = OpenAI(base_url=server.v1, api_key="unused")
        unset = client.responses.create(model=REPO, input="Hi", max_output_tokens=4)
        assert (unset.temperature, unset.top_p) == (0.8, 0.95)  # the sampling in force, echoed
        own = client.responses.create(model=REPO, input="Hi", max_output_tokens=4, temperature=0.1, top_p=1.0)
        assert (own.temperature, own.top_p) == (0.1, 1.0)
    finally:
        server.stop()
    assert "generation defaults: min_p=0.05, temperature=0.8, top_k=40, top_p=0.95 (from llama.cpp's defaults)" \
        in server.log_path.read_text()


def test_the_repositorys_generation_config_is_fetched_with_the_gguf_and_used(hub, tmp_path):
    """A repository that carries its checkpoint's generation_config.json (as Qwen2.5's: temperature 0.7, top_p
    0.8, top_k 20, repetition_penalty 1.05): it is downloaded beside the GGUF, checked against its git blob id, and
    its values are the defaults; llama.cpp's fill what it leaves out (min_p). Offline, the cached copy serves."""
    config = {"bos_token_id": 1, "do_sample": True, "eos_token_id": 2, "temperature": 0.7, "top_p": 0.8,
              "top_k": 20, "repetition_penalty": 1.05, "transformers_version": "4.37.0"}
    hub.repos[REPO].files["generation_config.json"] = json.dumps(config, indent=2).encode()
    env = hub_env(hub.url, tmp_path / "hf")
    pulled(env, REPO)
    assert len(hub.downloads("generation_config.json")) == 1
    offline = hub_env(f"http://127.0.0.1:{closed_port()}", tmp_path / "hf", HF_HUB_OFFLINE="1")
    server = RunningServer([REPO, "--parallel", "1", "--speculative", "off"], env=offline)
    try:
        card = _card(server, REPO)
    finally:
        server.stop()
    assert card["generation_defaults"] == {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "repetition_penalty": 1.05,
                                           "min_p": 0.05}
    assert card["generation_defaults_from"] == (f"{REPO}'s generation_config.json (repetition_penalty, temperature, "
                                                "top_k, top_p) + llama.cpp's defaults (min_p)")


def test_a_corrupted_generation_config_is_refused(hub, tmp_path):
    hub.repos[REPO].files["generation_config.json"] = b'{"temperature": 0.7}\n'
    hub.repos[REPO].corrupt.add("generation_config.json")
    assert "git blob id" in one_line_error(rostra(hub_env(hub.url, tmp_path / "hf"), "pull", REPO))


def test_the_gguf_wins_over_the_repository_and_both_over_llama_cpp(tmp_path):
    """llama.cpp lets a GGUF's general.sampling.* replace its own defaults key by key; the repository's file sits
    between (the GGUF was converted from that checkpoint: where both say something, the file served says last)."""
    config = tmp_path / "generation_config.json"
    config.write_text('{"temperature": 0.7, "top_k": 20, "max_new_tokens": 256}')
    recommended = llamacpp_recommendation({"temperature": 0.6}, config, "org/model-GGUF")
    assert recommended.values == {"temperature": 0.6, "top_k": 20, "max_tokens": 256, "top_p": 0.95, "min_p": 0.05}
    assert recommended.source == ("the GGUF's general.sampling (temperature) + org/model-GGUF's generation_config.json"
                                  " (max_tokens, top_k) + llama.cpp's defaults (min_p, top_p)")
    config.write_text("not json")  # advice that cannot be read is passed over, not fatal
    assert llamacpp_recommendation({}, config, "org/model-GGUF").values == LLAMACPP_DEFAULTS


# -- ls and rm -----------------------------------------------------------------------------------------------

def test_ls_lists_and_rm_removes_a_quantization_or_a_repository(hub, tmp_path):
    env = hub_env(hub.url, tmp_path / "hf")
    pulled(env, f"{TINY}:Q8_0")
    q5 = pulled(env, f"{TINY}:Q5_K_M")
    assert len(hub.downloads("tiny-Q5_K_M.gguf")) == 0  # its bytes were in the cache already (Q8_0's blob)
    rows = [line.split() for line in rostra(env, "ls").stdout.splitlines()]
    assert rows[0] == ["REPOSITORY", "FILE", "QUANT", "SIZE", "LAST", "USED"]
    assert [row[:3] for row in rows[1:]] == [[TINY, "mmproj-tiny-f16.gguf", "mmproj"],
                                             [TINY, "tiny-Q5_K_M.gguf", "Q5_K_M"], [TINY, "tiny-Q8_0.gguf", "Q8_0"]]
    assert rows[2][3:] == ["200.0", "kB", "just", "now"]
    removed = rostra(env, "rm", f"{TINY}:q8_0")
    assert removed.returncode == 0 and "tiny-Q8_0.gguf" in removed.stderr
    assert "mmproj" not in removed.stderr  # (the projector stays: `mmproj-tiny-Q8_0` is not this quantization)
    assert q5.read_bytes() == fake_gguf("tiny Q8_0")  # the blob it shares stays
    assert "not downloaded" in one_line_error(rostra(env, "rm", f"{TINY}:Q8_0"), "rm")
    assert rostra(env, "rm", TINY).returncode == 0
    assert not (tmp_path / "hf" / "hub" / "models--test-org--tiny-GGUF").exists()
    assert "no models downloaded" in rostra(env, "ls").stderr
    assert "not downloaded" in one_line_error(rostra(env, "rm", TINY), "rm")


# -- the choice, file names only -----------------------------------------------------------------------------

@pytest.mark.parametrize("name, quant", [
    ("Qwen2.5-0.5B-Instruct-Q4_K_M.gguf", "Q4_K_M"), ("gemma-3-4b-it-qat-UD-Q4_K_XL.gguf", "UD-Q4_K_XL"),
    ("Q8_0/Llama-3.3-70B-Instruct-Q8_0-00001-of-00002.gguf", "Q8_0"), ("model.IQ4_XS.gguf", "IQ4_XS"),
    ("mmproj-model-f16.gguf", "F16"), ("phi-4-bf16.gguf", "BF16"), ("model.gguf", "model"),
])
def test_the_quantization_a_file_name_states(name, quant):
    assert quant_of(name) == quant


def test_the_preference_order_and_a_prefix_match():
    files = [RemoteFile(name, 1) for name in ("m-Q8_0.gguf", "m-Q4_K_S.gguf", "m-Q4_K_M.gguf", "m-IQ4_XS.gguf")]
    assert choose("o/m", files, None).quant == "Q4_K_M"
    assert choose("o/m", files, "q4_k").quant == "Q4_K_M"  # Q4_K_M and Q4_K_S match: the preferred one
    assert choose("o/m", files[:2], None).quant == "Q4_K_S"
    assert choose("o/m", [RemoteFile("m-Q3_K_L.gguf", 1), RemoteFile("m-TQ1_0.gguf", 1)], None).quant == "Q3_K_L"
    with pytest.raises(ChoiceError, match="split in 3 parts but the repository has 2"):
        choose("o/m", [RemoteFile(f"m-Q4_K_M-0000{i}-of-00003.gguf", 1) for i in (1, 2)], None)


@pytest.mark.parametrize("text, parsed", [
    ("ggml-org/gemma-3-4b-it-GGUF:Q4_K_M", HubReference("ggml-org/gemma-3-4b-it-GGUF", "Q4_K_M")),
    ("hf.co/bartowski/Qwen2.5-0.5B-Instruct-GGUF", HubReference("bartowski/Qwen2.5-0.5B-Instruct-GGUF", None)),
    ("https://huggingface.co/unsloth/Qwen3-8B-GGUF:UD-Q4_K_XL", HubReference("unsloth/Qwen3-8B-GGUF", "UD-Q4_K_XL")),
    ("models/SmolLM2.gguf", None), ("SmolLM2.gguf", None), ("/abs/path/model", None),
])
def test_what_a_reference_names(text, parsed):
    assert HubReference.parse(text) == parsed


def test_a_listed_path_never_leaves_the_snapshot_folder():
    from rostra.hub.pull import _safe_path

    assert _safe_path("model-Q4_K_M.gguf") and _safe_path("Q8_0/model-Q8_0-00001-of-00002.gguf")
    for path in ("../../.bashrc", "/etc/passwd", "a/../../b.gguf", "a//b.gguf", "a\\..\\b.gguf", ""):
        assert not _safe_path(path), path


def test_a_models_config_entry_names_a_hub_model_in_any_spelling(tmp_path):
    from rostra.config import Settings
    from rostra.models.specs import read_models_config

    config = tmp_path / "models.yaml"
    config.write_text("models:\n  - model: https://huggingface.co/o/n-GGUF:Q8_0\n  - model: hf.co/o/m-GGUF\n")
    specs = read_models_config(config, Settings())
    assert [(spec.name, spec.settings.model) for spec in specs] == [
        ("o/n-GGUF:Q8_0", "https://huggingface.co/o/n-GGUF:Q8_0"), ("o/m-GGUF", "hf.co/o/m-GGUF")]


def test_a_hub_model_is_mapped_and_a_path_of_ones_own_only_with_mmap(tmp_path):
    """How the engine is built (no load): read into memory by default for a path (a file overwritten in place must
    not end the process: tests/test_model_file_replaced.py), mapped with --mmap."""
    from rostra.config import Settings
    from rostra.engines.registry import build_engine

    own = str(embedded_model_path())
    assert build_engine(Settings(model=own, data_dir=str(tmp_path))).mmap is False
    assert build_engine(Settings(model=own, data_dir=str(tmp_path), mmap=True)).mmap is True
