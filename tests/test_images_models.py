"""Which models see images: a projector beside a model in --models-dir, or named per model in --models-config."""

from __future__ import annotations

from pathlib import Path

from mmproj_gguf import mmproj_path
from rostra.config import Settings
from rostra.embedded import embedded_model_path
from rostra.models.specs import command_line_specs, read_models_config

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
