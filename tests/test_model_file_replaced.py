"""A loaded model's GGUF overwritten in place (`cp other.gguf model.gguf`: the same file truncated and
rewritten) does not kill the server (it did, with SIGBUS: the file was memory-mapped; issue 33). The weights
are read into memory at load (llamacpp.py), so requests go on being answered from what was loaded."""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx

from embedding_models import minilm_gguf
from rostra.embedded import embedded_model_path
from servers import RunningServer

CACHE = Path(__file__).parent.parent / ".cache" / "replaced-in-place"


def test_a_model_file_overwritten_while_loaded_does_not_kill_the_server():
    CACHE.mkdir(parents=True, exist_ok=True)
    model = CACHE / "model.gguf"
    shutil.copyfile(embedded_model_path(), model)
    server = RunningServer([str(model), "--served-model-name", "m", "--speculative", "off", "--max-model-len", "256",
                            "--parallel", "1"], startup_timeout=300)
    try:
        body = {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "Hi"}]}
        before = httpx.post(f"{server.v1}/chat/completions", json=body, timeout=120)
        assert before.status_code == 200, before.text
        shutil.copyfile(minilm_gguf("f16"), model)  # in place: same inode, shorter file
        for _ in range(3):
            after = httpx.post(f"{server.v1}/chat/completions", json=body, timeout=120)
            assert after.status_code == 200, after.text
        assert server.process.poll() is None
    finally:
        server.stop()
        model.unlink(missing_ok=True)
