"""Which models see images: a projector beside a model in --models-dir, or named per model in --models-config."""

from __future__ import annotations

from pathlib import Path

import httpx

from images import png_data_url
from mmproj_gguf import mmproj_path
from rostra.config import Settings
from rostra.embedded import embedded_model_path
from rostra.models.specs import command_line_specs, read_models_config
from servers import RunningServer

CACHE = Path(__file__).resolve().parent.parent / ".cache"


def test_models_dir_finds_the_projector_beside_its_model(tmp_path):
    (tmp_path / "smol.gguf").symlink_to(embedded_model_path())
    (tmp_path / "mmproj-smol-f32.gguf").symlink_to(mmproj_path(CACHE))
    [spec] = command_line_specs(Settings(models_dir=str(tmp_path)))  # the projector is not a model of its own
    assert spec.name == "smol" and spec.settings.mmproj == str(tmp_path / "mmproj-smol-f32.gguf")


def test_models_dir_without_a_projector(tmp_path):
    (tmp_path / "smol.gguf").symlink_to(embedded_model_path())
    [spec] = command_line_specs(Settings(models_dir=str(tmp_path)))
    assert spec.settings.mmproj is None


def test_models_config_names_a_projector_per_model(tmp_path):
    (tmp_path / "m.gguf").symlink_to(embedded_model_path())
    (tmp_path / "proj.gguf").symlink_to(mmproj_path(CACHE))
    config = tmp_path / "models.yaml"
    config.write_text("models:\n  - {name: seeing, model: m.gguf, mmproj: proj.gguf}\n  - {name: blind, model: m.gguf}\n")
    seeing, blind = read_models_config(config, Settings())
    assert seeing.settings.mmproj == str(tmp_path / "proj.gguf") and blind.settings.mmproj is None


def test_models_config_serves_the_seeing_model_images_and_the_blind_one_a_400(tmp_path):
    """Served: the model whose entry names a projector loads it (an image request answers, /v1/models says it
    sees); its sibling without one answers the image a 400 naming the part."""
    (tmp_path / "m.gguf").symlink_to(embedded_model_path())
    (tmp_path / "proj.gguf").symlink_to(mmproj_path(CACHE))
    config = tmp_path / "models.yaml"
    config.write_text("models:\n  - {name: seeing, model: m.gguf, mmproj: proj.gguf, parallel: 1}\n"
                      "  - {name: blind, model: m.gguf, parallel: 1}\n")
    server = RunningServer(["--models-config", str(config), "--max-model-len", "1024"], startup_timeout=300)
    try:
        # before either loads, from their entries (Codex's catalog too: it sends images only where it says so)
        listing = httpx.get(f"{server.v1}/models", params={"client_version": "0.130.0"}, timeout=10).json()
        assert {card["id"]: (card["state"], card["input_modalities"]) for card in listing["data"]} == {
            "seeing": ("unloaded", ["text", "image"]), "blind": ("unloaded", ["text"])}
        assert {entry["slug"]: entry["input_modalities"] for entry in listing["models"]} == {
            "seeing": ["text", "image"], "blind": ["text"]}
        def ask(model: str) -> httpx.Response:
            return httpx.post(f"{server.v1}/chat/completions", timeout=300, json={
                "model": model, "max_tokens": 2, "temperature": 0, "messages": [{"role": "user", "content": [
                    {"type": "text", "text": "Describe"}, {"type": "image_url", "image_url": {"url": png_data_url()}}]}]})

        seen = ask("seeing")
        assert seen.status_code == 200, seen.text
        assert seen.json()["usage"]["prompt_tokens"] > 16  # the projector's 16 tokens and the text's
        refused = ask("blind")
        assert refused.status_code == 400 and refused.json()["error"]["param"] == "messages[0].content[1]"
        cards = {card["id"]: card["input_modalities"] for card in httpx.get(f"{server.v1}/models").json()["data"]}
        assert cards == {"seeing": ["text", "image"], "blind": ["text"]}
    finally:
        server.stop()
