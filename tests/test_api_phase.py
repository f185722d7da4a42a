"""`phase` on assistant messages (OpenAI's label: `commentary`, an intermediate note such as a preamble to tool calls,
or `final_answer`): the Responses API gives every assistant output message one, by the channel gpt-oss wrote it on
(its commentary channel -> commentary, its final channel -> final_answer; other models' answers: final_answer),
and a phase given back in history picks the channel gpt-oss reads the message on, through every API. The harmony
outputs are the shape OpenAI's harmony guide gives for preambles (tests/data/harmony.jsonl)."""

from __future__ import annotations

import httpx
import pytest
from openai import OpenAI

from conftest import scripted
from gpt_oss_tokenizer import gpt_oss_tokenizer
from servers import DATA, RunningServer
from test_api_responses import check_response, raw_stream

from rostra.api.messages.models import MessagesRequest
from rostra.api.messages.history import turn_messages
from rostra.api.responses.items import normalize_input
from rostra.api.responses.to_chat import items_to_messages
from rostra.prompt.harmony import HarmonyTemplate
from rostra.prompt.messages import template_messages
from rostra.serving.reasoning_crypto import ReasoningSealer

MODEL = "gpt-oss-scripted"
WEATHER = [{"type": "function", "name": "get_weather", "description": "The weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]
PREAMBLE = "<|start|>assistant<|channel|>commentary<|message|>Checking the forecast first.<|end|>"


@pytest.fixture(scope="module")
def gpt_oss_server():
    server = RunningServer(["--engine", "scripted", "--script", str(DATA / "harmony.jsonl"), "--tokenizer",
                            str(gpt_oss_tokenizer()), "--served-model-name", MODEL])
    yield server
    server.stop()


def test_gpt_oss_commentary_and_final_answer_are_phases(gpt_oss_server):
    client = OpenAI(base_url=gpt_oss_server.v1, api_key="unused")
    first = client.responses.create(model=MODEL, input="What's the forecast in Oslo?", tools=WEATHER)
    check_response(first.model_dump(mode="json", exclude_unset=True))
    assert [(item.type, getattr(item, "phase", None)) for item in first.output] == [
        ("reasoning", None), ("message", "commentary"), ("function_call", None)]
    assert first.output[1].content[0].text == "Checking the forecast first."
    call = first.output[2]
    answer = client.responses.create(model=MODEL, previous_response_id=first.id, tools=WEATHER, input=[
        {"type": "function_call_output", "call_id": call.call_id, "output": "Sunny, 21 C"}])
    [message] = [item for item in answer.output if item.type == "message"]
    assert (message.phase, message.content[0].text) == ("final_answer", "It is sunny in Oslo.")


def test_the_stream_opens_each_message_with_its_phase(gpt_oss_server):
    events = raw_stream(gpt_oss_server.base_url, {"model": MODEL, "input": "What's the forecast?", "tools": WEATHER})
    added = [event["item"] for event in events if event["type"] == "response.output_item.added"]
    assert [item.get("phase") for item in added if item["type"] == "message"] == ["commentary"]
    final = events[-1]["response"]
    assert [item.get("phase") for item in final["output"] if item["type"] == "message"] == ["commentary"]
    check_response(final)


def test_other_models_answer_as_final_answer():
    server = RunningServer(list(scripted("script.jsonl")))
    try:
        response = OpenAI(base_url=server.v1, api_key="unused").responses.create(model="scripted", input="Hello")
        assert [item.phase for item in response.output if item.type == "message"] == ["final_answer"]
    finally:
        server.stop()


def harmony_prompt(messages) -> str:
    return HarmonyTemplate().render(template_messages(messages), current_date="2026-11-29")


def test_responses_history_keeps_the_phase_on_the_channel():
    """A commentary message given back (as OpenAI asks clients to: with its phase) is read on the commentary
    channel, though no call shares its message; unlabelled it would read as a final answer."""
    items = normalize_input([
        {"role": "user", "content": "What's the forecast in Oslo?"},
        {"type": "message", "role": "assistant", "phase": "commentary",
         "content": [{"type": "output_text", "text": "Checking the forecast first."}]},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Oslo"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "Sunny, 21 C"}])
    prompt = harmony_prompt(items_to_messages(items))
    assert PREAMBLE in prompt
    unlabelled = [items[0], {**items[1], "phase": None}, *items[2:]]
    assert "<|channel|>final<|message|>Checking the forecast first." in harmony_prompt(items_to_messages(unlabelled))


def test_a_phase_outside_the_two_is_a_400(gpt_oss_server):
    response = httpx.post(f"{gpt_oss_server.v1}/responses", json={"model": MODEL, "input": [
        {"role": "assistant", "content": "Hm.", "phase": "aside"}, {"role": "user", "content": "hello"}]})
    assert response.status_code == 400 and response.json()["error"]["param"].startswith("input[0]")


def test_chat_history_reads_the_phase_too(gpt_oss_server):
    messages = [{"role": "user", "content": "What's the forecast in Oslo?"},
                {"role": "assistant", "content": "Checking the forecast first.", "phase": "commentary"},
                {"role": "user", "content": "Go on."}]
    tokens = httpx.post(f"{gpt_oss_server.base_url}/tokenize", json={"model": MODEL, "messages": messages})
    prompt = httpx.post(f"{gpt_oss_server.base_url}/detokenize",
                        json={"model": MODEL, "tokens": tokens.json()["tokens"]}).json()["prompt"]
    assert PREAMBLE in prompt


def test_messages_history_keeps_a_preamble_beside_its_tool_use_on_commentary():
    """Anthropic's Messages API has no phase: a text block beside tool_use in one assistant message is the preamble
    gpt-oss wrote on its commentary channel (rostra's Messages answer puts it there), and is read back so."""
    request = MessagesRequest.model_validate({"model": MODEL, "max_tokens": 64, "messages": [
        {"role": "user", "content": "What's the forecast in Oslo?"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Checking the forecast first."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "Sunny"}]}]})
    assert PREAMBLE in harmony_prompt(turn_messages(request, ReasoningSealer(key=bytes(32))))
