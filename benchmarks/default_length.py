"""How long a chat answer runs when the client sets no sampling parameters at all.

LangChain's `ChatOpenAI()` (like the Agents SDK and plain `openai` calls) sends no temperature and
no max_tokens, so the server's defaults decide. This starts `rostra serve` (the embedded model by
default) with the given generation-default flags, asks ChatOpenAI a few everyday prompts with no
parameters, and prints each answer's tokens, seconds and finish reason as a Markdown table.

    python benchmarks/default_length.py --label "auto" -- --generation-config auto
    python benchmarks/default_length.py --label "openai, capped" -- --generation-config openai \
        --override-generation-config '{"max_tokens": 1024}'

Flags after `--` go to `rostra serve` as they are.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time

import httpx
from langchain_openai import ChatOpenAI

from bench_serving import free_port, stop_process

PROMPTS = [
    "Hello",
    "What is the capital of France?",
    "Write a short poem about the sea.",
    "Explain how a rainbow forms.",
    "Give me three tips for learning Python.",
    "Tell me a story about a dragon.",
]


def start_server(port: int, flags: list[str]) -> subprocess.Popen:
    command = [sys.executable, "-m", "rostra.cli", "serve", "--port", str(port), "--log-level", "warning",
               "--data-dir", tempfile.mkdtemp(prefix="rostra-bench-"), *flags]
    process = subprocess.Popen(command)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return process
        except httpx.HTTPError:
            time.sleep(0.3)
    stop_process(process)
    raise SystemExit("rostra serve did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--label", default="", help="what the flags mean, for the table")
    parser.add_argument("flags", nargs="*", help="flags for rostra serve (after --)")
    args = parser.parse_args()
    port = free_port()
    process = start_server(port, args.flags)
    try:
        model_id = httpx.get(f"http://127.0.0.1:{port}/v1/models").json()["data"][0]
        print(f"{args.label}: `rostra serve {' '.join(args.flags)}`; defaults {model_id['generation_defaults']}\n")
        print("| prompt | tokens | seconds | finish_reason |\n|---|---:|---:|---|")
        chat = ChatOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", model=model_id["id"],
                          timeout=900)
        for prompt in PROMPTS:
            started = time.monotonic()
            reply = chat.invoke(prompt)
            seconds = time.monotonic() - started
            tokens = reply.usage_metadata["output_tokens"]
            print(f"| {prompt} | {tokens} | {seconds:.1f} | {reply.response_metadata.get('finish_reason')} |",
                  flush=True)
    finally:
        stop_process(process)


if __name__ == "__main__":
    main()
