"""LoRA adapters where no model runs (issue 48): a --models-config entry's `lora:` read into its settings and names,
its mistakes reported at start-up, and vLLM's adapter routes on an engine without adapters (the scripted one):
closed without the admin key, a 400 naming the engine, a 404 for an adapter nobody loaded."""

from __future__ import annotations

import json

import pytest

from harness import served
from rostra.config import Settings
from rostra.lora import LoraAdapter
from rostra.models.specs import ModelConfigError, read_models_config

ADMIN = "admin-key-48"


def config_file(tmp_path, lora) -> object:
    path = tmp_path / "models.yaml"
    path.write_text(json.dumps({"models": [{"name": "base", "model": "base.gguf", "lora": lora}]}))
    return path


def test_an_entry_lists_its_adapters_in_each_form(tmp_path):
    (tmp_path / "sql.gguf").write_bytes(b"")  # a relative path that exists beside the config: read from there
    for given in ({"sql": "sql.gguf", "poet": "/adapters/poet.gguf"},
                  ["sql=sql.gguf", "poet=/adapters/poet.gguf"],
                  [{"name": "sql", "path": "sql.gguf"}, {"name": "poet", "path": "/adapters/poet.gguf"}]):
        (spec,) = read_models_config(config_file(tmp_path, given), Settings())
        assert spec.settings.lora == [LoraAdapter("sql", str(tmp_path / "sql.gguf")),
                                      LoraAdapter("poet", "/adapters/poet.gguf")]
        assert spec.names == ["base", "sql", "poet"]  # each adapter served by its name


@pytest.mark.parametrize("given, message", [
    ("sql.gguf", "expected a mapping of NAME: PATH"),
    (["sql"], "expected NAME=PATH"),
    ({"sql": 3}, "expected a name and a path"),
    (["a=x.gguf", "a=y.gguf"], "given twice"),
])
def test_a_bad_lora_entry_stops_the_start(tmp_path, given, message):
    with pytest.raises(ModelConfigError, match=f"models\\[0\\]: .*{message}"):
        read_models_config(config_file(tmp_path, given), Settings())


def test_adapter_routes_need_the_admin_key_and_an_engine_with_adapters(tmp_path):
    body = {"lora_name": "sql", "lora_path": str(tmp_path / "sql.gguf")}
    with served(tmp_path, [], admin_keys=[ADMIN]) as http:
        assert http.post("/v1/load_lora_adapter", json=body).status_code == 401
        admin = {"Authorization": f"Bearer {ADMIN}"}
        refused = http.post("/v1/load_lora_adapter", json=body, headers=admin)
        assert refused.status_code == 400 and "scripted engine" in refused.json()["error"]["message"]
        missing = http.post("/v1/unload_lora_adapter", json={"lora_name": "sql"}, headers=admin)
        assert missing.status_code == 404 and missing.json()["error"]["message"] == (
            "The lora adapter 'sql' cannot be found.")
        assert http.post("/v1/load_lora_adapter", json={"lora_name": "sql"}, headers=admin).status_code == 400
    with served(tmp_path / "no-admin", []) as http:  # no admin key: the routes are closed to everyone
        assert http.post("/v1/load_lora_adapter", json=body).status_code == 401
