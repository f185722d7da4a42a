"""The Vercel AI SDK 7 (`ai` + `@ai-sdk/openai`, pinned in tests/clients/ai-sdk) against `rostra serve`,
unmodified: its OpenAI provider speaks the Responses API with `store: true`, so every turn after the first sends
the earlier items back as `item_reference`s. One small script per scenario (tests/clients/ai-sdk/*.mjs).

The scripted model (tests/data/app_clients.jsonl) writes Hermes-style calls and Qwen3's `<think>` blocks, as in
tests/test_clients_codex.py; `gpt-5-mini` is the same script under a name the SDK treats as a reasoning model."""

import json
import os
import subprocess

from node_clients import node_client


def run_script(name: str, *args: str) -> dict:
    directory = node_client("ai-sdk")
    done = subprocess.run(["node", str(directory / name), *args], cwd=directory, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "NO_PROXY": "127.0.0.1,localhost",
                                            "AI_SDK_TELEMETRY_DISABLED": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_multi_turn_with_store(app_clients_server):
    result = run_script("multi_turn.mjs", app_clients_server.v1)
    assert result["first"]["text"] == "Nice to meet you, Ada."
    assert result["second"]["text"] == "Your name is Ada."


def test_a_tool_loop(app_clients_server):
    result = run_script("tool_loop.mjs", app_clients_server.v1, "scripted", "What is the weather in Oslo?")
    first, second = result["steps"]
    assert first["calls"] == [["get_weather", {"city": "Oslo"}]] and first["results"] == ["sunny in Oslo"]
    assert second["text"] == result["text"] == "It is sunny in Oslo."


def test_a_reasoning_models_tool_loop(app_clients_server):
    """The reasoning item comes back as an item_reference too; the SDK shows the thinking (summary parts)."""
    result = run_script("tool_loop.mjs", app_clients_server.v1, "gpt-5-mini",
                        "Please think about the weather in Paris.")
    first, second = result["steps"]
    assert first["reasoning"].strip() == "The user wants the weather in Paris: I call get_weather."
    assert first["calls"] == [["get_weather", {"city": "Paris"}]] and first["results"] == ["rainy in Paris"]
    assert second["reasoning"].strip() == "The tool says rain."
    assert result["text"] == "It is rainy in Paris."
