"""What a many-models server serves (rostra/models/specs.py): sizes, the config file, the directory."""

from __future__ import annotations

import pytest

from rostra.config import Settings
from rostra.embedded import embedded_model_path
from rostra.models.specs import ModelConfigError, command_line_specs, parse_size, read_models_config


@pytest.mark.parametrize("text, size", [("12GB", 12_000_000_000), ("512MiB", 512 * 1024**2), ("1.5g", 1_500_000_000),
                                        ("1000", 1000), (" 2 kb ", 2000), ("3TiB", 3 * 1024**4)])
def test_sizes(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "GB", "12 parsecs", "-1GB", "1..5G"])
def test_bad_sizes_are_refused(text):
    with pytest.raises(ModelConfigError):
        parse_size(text)


def test_config_entries_get_their_own_settings_and_names(tmp_path):
    (tmp_path / "m.gguf").symlink_to(embedded_model_path())
    config = tmp_path / "models.yaml"
    config.write_text("models:\n"
                      "  - {name: a, model: m.gguf, parallel: 2, reasoning_parser: qwen3, ttl: 5, preload: true}\n"
                      "  - {served_model_name: [b, b2], model: m.gguf, override_generation_config: {top_p: 0.5}}\n")
    first, second = read_models_config(config, Settings(parallel=4))
    assert (first.name, first.names, first.ttl, first.preload) == ("a", ["a"], 5.0, True)
    assert first.settings.parallel == 2 and first.settings.reasoning_parser == "qwen3"
    assert first.settings.model == str(tmp_path / "m.gguf")  # relative to the config file
    assert (second.name, second.names, second.settings.parallel) == ("b", ["b", "b2"], 4)
    assert second.size_bytes == embedded_model_path().stat().st_size


@pytest.mark.parametrize("text, message", [
    ("models: {a: 1}", "expected `models:` and a list"),
    ("models:\n  - {name: a, colour: red}", "unknown model settings colour"),
    ("models:\n  - {name: a, ttl: -1}", "ttl must be a number of seconds above 0"),
    ("models:\n  - {name: a}\n  - {name: a}", "the name 'a' is served twice"),
    ("models:\n  - {name: g, engine: remote, served_model_name: x}", "a gateway serves its upstreams' model names"),
])
def test_bad_configs_say_what_is_wrong(tmp_path, text, message):
    config = tmp_path / "models.yaml"
    config.write_text(text)
    with pytest.raises(ModelConfigError, match=message.replace("(", r"\(")):
        command_line_specs(Settings(models_config=str(config)))


def test_a_models_dir_serves_ggufs_and_checkpoints(tmp_path):
    (tmp_path / "one.gguf").symlink_to(embedded_model_path())
    (tmp_path / "big-00001-of-00002.gguf").write_bytes(b"")
    (tmp_path / "big-00002-of-00002.gguf").write_bytes(b"")
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text("{}")
    (tmp_path / "notes").mkdir()
    specs = command_line_specs(Settings(models_dir=str(tmp_path), preload=["one"]))
    assert {spec.name: spec.settings.engine for spec in specs} == {
        "big-00001-of-00002": "llamacpp", "ckpt": "transformers", "one": "llamacpp"}
    with pytest.raises(ModelConfigError, match="--preload nope: no such model"):
        command_line_specs(Settings(models_dir=str(tmp_path), preload=["nope"]))
