"""Session-aware prefix reuse on the real embedded model: more sessions than slots, and a session that returns
after its slot went to another one still finds its prefix (the slot it is sent to loads its state back from
llama.cpp's host-memory prompt cache), reported as cached tokens in Chat's usage and in the Messages API's
`cache_read_input_tokens`.

The prompts are kept short (a few hundred tokens): prefill on the shared 2-core machine is slow."""

from __future__ import annotations

import anthropic
import openai
import pytest

from tests.servers import RunningServer

SYSTEM = ("You are a careful coding assistant for a team that writes small Python services. "
          "Read the conversation, keep answers short, and say which file you would change. ") * 3


def session_text(number: int) -> str:
    """What one session has said so far: different for every session, from its first word on."""
    words = ["parser", "slot", "cache", "token", "stream", "server", "module", "branch", "commit", "review"]
    return f"Session {number}. " + " ".join(words[(number * 7 + i * 3) % len(words)] for i in range(120))


@pytest.fixture(scope="module")
def server():
    running = RunningServer(["--parallel", "2", "--max-model-len", "2048", "--threads", "1"])
    yield running
    running.stop()


def chat(client: openai.OpenAI, number: int, turns: int):
    messages: list = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": session_text(number)}]
    for turn in range(1, turns):
        messages += [{"role": "assistant", "content": f"Noted, turn {turn}."},
                     {"role": "user", "content": f"And turn {turn + 1}?"}]
    return client.chat.completions.create(model="SmolLM2-135M-Instruct", messages=messages, max_tokens=2, temperature=0,
                                          extra_body={"prompt_cache_key": f"session-{number}"})


def test_a_returning_session_finds_its_prefix_after_its_slot_was_reused(server):
    client = openai.OpenAI(base_url=server.v1, api_key="unused", max_retries=0, timeout=600)
    first = chat(client, 0, 1)
    for number in (1, 2):  # three sessions over two slots: session 0's slot goes to session 2
        chat(client, number, 1)
    again = chat(client, 0, 2)
    assert first.usage is not None and again.usage is not None
    details = again.usage.prompt_tokens_details
    assert details is not None and details.cached_tokens is not None
    # Everything of turn 1 but its last token or so (the system prompt alone would be a third of it).
    assert details.cached_tokens >= first.usage.prompt_tokens - 4, (details.cached_tokens, first.usage)


def test_messages_report_the_returning_sessions_prefix_as_cache_reads(server):
    client = anthropic.Anthropic(base_url=server.base_url, api_key="unused", max_retries=0, timeout=600)

    def turn(number: int, turns: int):
        messages: list = [{"role": "user", "content": session_text(number + 10)}]
        for n in range(1, turns):
            messages += [{"role": "assistant", "content": f"Noted, turn {n}."},
                         {"role": "user", "content": f"And turn {n + 1}?"}]
        return client.messages.create(model="SmolLM2-135M-Instruct", system=SYSTEM, messages=messages, max_tokens=2,
                                      metadata={"user_id": f"user-{number}"})

    first = turn(0, 1)
    for number in (1, 2):
        turn(number, 1)
    again = turn(0, 2)
    read = again.usage.cache_read_input_tokens or 0
    assert read >= first.usage.input_tokens + (first.usage.cache_read_input_tokens or 0) - 4, (again.usage, first.usage)
