"""llama.cpp's decode speed by thread count and poll level, on the embedded model, with whatever else the machine runs.

    python benchmarks/threads_under_load.py THREADS POLL     # prints tok/s of three 64-token generations

llama.cpp's own HTTP server (xllamacpp's), one slot, temperature 0, `ignore_eos`, after one warm-up generation. Run it
on a quiet machine and again while another process keeps a core busy (`python -c "while True: pass" &`):
benchmarks/README.md, "A busy machine".
"""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path

import xllamacpp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from rostra.embedded import embedded_model_path  # noqa: E402


def decode_rate(address: str) -> float:
    body = json.dumps({"prompt": "Once upon a time", "n_predict": 64, "ignore_eos": True, "temperature": 0}).encode()
    request = urllib.request.Request(address + "/completion", body, {"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(request).read())["timings"]["predicted_per_second"]


def main() -> None:
    threads, poll = int(sys.argv[1]), int(sys.argv[2])
    params = xllamacpp.CommonParams()
    params.model.path = str(embedded_model_path())
    params.n_ctx, params.n_parallel = 2048, 1
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = threads
    params.cpuparams.poll = params.cpuparams_batch.poll = poll
    server = xllamacpp.Server(params)
    decode_rate(server.listening_address)  # warm-up
    print(f"threads {threads}, poll {poll}: tok/s",
          [round(decode_rate(server.listening_address), 1) for _ in range(3)], flush=True)


if __name__ == "__main__":
    main()
