"""What today's Responses clients send (Codex CLI, the Vercel AI SDK, instructor), over HTTP with the openai SDK:
the request fields they add, `item_reference` input items, every client-run tool type (namespace, custom,
local_shell), hosted tools rostra does not run, reasoning summaries, text.format beside a forced tool choice.

The scripted model (tests/data/responses_tools.jsonl) writes Hermes-style calls and Qwen3's `<think>` blocks, as
Qwen3 models do (see tests/test_clients_codex.py). Bodies and events are validated against the vendored spec and
the openai SDK's types (test_api_responses.check_response / raw_stream)."""

from __future__ import annotations

import httpx
import pytest
from openai import BadRequestError, OpenAI

from conftest import scripted
from servers import RunningServer
from test_api_responses import check_response, raw_stream
from wire import check_error

WEATHER = {"type": "function", "name": "get_weather", "description": "The weather in a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
AGENTS = {"type": "namespace", "name": "multi_agent_v1", "description": "Tools for sub-agents.", "tools": [
    {"type": "function", "name": "spawn_agent", "description": "Start a sub-agent.", "strict": False,
     "parameters": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}}]}
# Codex's apply_patch, as Codex 0.169 sends it under gpt-5.5 (its Lark grammar shortened).
APPLY_PATCH = {"type": "custom", "name": "apply_patch", "description": "Edit files with a patch.",
               "format": {"type": "grammar", "syntax": "lark",
                          "definition": 'start: "*** Begin Patch" LF /(.|\\n)*/ "*** End Patch" LF?\n%import common.LF'}}
PATCH = "*** Begin Patch\n*** Update File: greeting.txt\n@@\n-hello\n+goodbye\n*** End Patch\n"


@pytest.fixture(scope="module")
def server():
    running = RunningServer(list(scripted("responses_tools.jsonl", "--tool-call-parser", "hermes",
                                          "--reasoning-parser", "qwen3")))
    yield running
    running.stop()


@pytest.fixture
def client(server) -> OpenAI:
    return OpenAI(base_url=server.v1, api_key="unused", max_retries=0)


def create(server, body: dict) -> httpx.Response:
    return httpx.post(f"{server.v1}/responses", json={"model": "scripted", **body}, timeout=60)


def both_ways(server, body: dict) -> tuple[dict, list[dict]]:
    """The response and its stream's events: the stream's final response equals the plain one but for ids."""
    plain = create(server, body)
    assert plain.status_code == 200, plain.text
    events = raw_stream(server.base_url, {"model": "scripted", **body})
    streamed = events[-1]["response"]
    assert [strip(item) for item in streamed["output"]] == [strip(item) for item in plain.json()["output"]]
    return check_response(plain.json()), events


def strip(item: dict) -> dict:
    return {key: value for key, value in item.items() if key not in ("id", "call_id")}


# -- 1. fields of today's clients ---------------------------------------------------------------------------
def test_client_metadata_and_verbosity_are_accepted_and_typos_are_not(server):
    ok = create(server, {"input": "Remember the number", "client_metadata": {"x-codex-window-id": "w:0"},
                         "text": {"verbosity": "low"}, "image": {"detail": "auto"}})
    assert ok.status_code == 200, ok.text
    assert check_response(ok.json())["output"][0]["content"][0]["text"] == "I will remember 42."
    typo = create(server, {"input": "hi", "client_metdata": {}})
    assert typo.status_code == 400 and typo.json()["error"]["param"] == "client_metdata"


# -- 2. item_reference ----------------------------------------------------------------------------------
def test_item_reference_resolves_stored_items(server, client):
    first = client.responses.create(model="scripted", input="Remember the number")
    answer = first.output[0]
    second = client.responses.create(model="scripted", input=[
        {"type": "message", "role": "user", "content": "Remember the number"},
        {"type": "item_reference", "id": answer.id},
        {"role": "user", "content": "think first"}])
    assert second.output_text == "Short answer."
    items = client.responses.input_items.list(second.id, order="asc").data
    assert [item.type for item in items] == ["message", "message", "message"]
    assert items[1].id == answer.id and items[1].content[0].text == "I will remember 42."


def test_unknown_or_unstored_item_reference_is_a_400_naming_the_input(server, client):
    unstored = client.responses.create(model="scripted", input="Remember the number", store=False)
    for reference in ("msg_nothing_has_this_id", unstored.output[0].id):
        with pytest.raises(BadRequestError) as caught:
            client.responses.create(model="scripted", input=[
                {"role": "user", "content": "hi"}, {"type": "item_reference", "id": reference}])
        error = caught.value.body
        assert error["param"] == "input[1]" and reference in error["message"]
        assert "store" in error["message"]  # why it may be unknown: responses with store: false keep nothing


# -- 3. tool types -----------------------------------------------------------------------------------------
def test_namespace_functions(server, client):
    body, events = both_ways(server, {"input": "spawn a helper", "tools": [AGENTS, WEATHER]})
    [call] = body["output"]
    assert (call["type"], call["name"], call["namespace"]) == ("function_call", "spawn_agent", "multi_agent_v1")
    assert body["tools"][0]["type"] == "namespace"  # echoed as sent
    answer = client.responses.create(model="scripted", tools=[AGENTS, WEATHER], input=[
        {"role": "user", "content": "spawn a helper"}, {k: v for k, v in call.items() if k != "status"},
        {"type": "function_call_output", "call_id": call["call_id"], "output": "agent started"}])
    assert answer.output_text == "The tool did it."


def test_a_function_call_output_without_its_call_is_a_400(server, client):
    """As OpenAI answers: an output whose call_id no function_call of the conversation has (in the input, or
    restored from previous_response_id) is refused; the same output beside its call, or after it, is not."""
    orphan = {"type": "function_call_output", "call_id": "call_nobody_made", "output": "agent started"}
    refused = create(server, {"tools": [AGENTS], "input": [{"role": "user", "content": "spawn a helper"}, orphan]})
    error = check_error(refused, 400, "input")
    assert "call_nobody_made" in error["message"]
    counted = httpx.post(f"{server.v1}/responses/input_tokens", timeout=60, json={
        "model": "scripted", "tools": [AGENTS], "input": [{"role": "user", "content": "spawn a helper"}, orphan]})
    check_error(counted, 400, "input")
    first = client.responses.create(model="scripted", input="spawn a helper", tools=[AGENTS])
    [call] = first.output
    continued = client.responses.create(model="scripted", tools=[AGENTS], previous_response_id=first.id, input=[
        {"type": "function_call_output", "call_id": call.call_id, "output": "agent started"}])
    assert continued.output_text == "The tool did it."
    still_refused = create(server, {"tools": [AGENTS], "previous_response_id": first.id, "input": [orphan]})
    check_error(still_refused, 400, "input")


def test_custom_tool_calls_stream_their_input(server, client):
    body, events = both_ways(server, {"input": "edit the greeting", "tools": [APPLY_PATCH]})
    [call] = body["output"]
    assert (call["type"], call["name"], call["input"]) == ("custom_tool_call", "apply_patch", PATCH)
    kinds = [event["type"] for event in events]
    assert "response.custom_tool_call_input.delta" in kinds
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.custom_tool_call_input.delta")
    [done] = [e for e in events if e["type"] == "response.custom_tool_call_input.done"]
    assert deltas == done["input"] == PATCH
    answer = client.responses.create(model="scripted", tools=[APPLY_PATCH], input=[
        {"role": "user", "content": "edit the greeting"}, {k: v for k, v in call.items() if k != "status"},
        {"type": "custom_tool_call_output", "call_id": call["call_id"], "output": "Success. Done."}])
    assert answer.output_text == "The tool did it."


def test_local_shell_calls(server, client):
    body, _ = both_ways(server, {"input": "run ls", "tools": [{"type": "local_shell"}]})
    [call] = body["output"]
    assert call["type"] == "local_shell_call"
    assert call["action"] == {"type": "exec", "command": ["ls", "-la"], "env": {}, "timeout_ms": None,
                              "user": None, "working_directory": "/tmp"}
    answer = client.responses.create(model="scripted", tools=[{"type": "local_shell"}], input=[
        {"role": "user", "content": "run ls"}, call,
        {"type": "local_shell_call_output", "id": call["call_id"], "output": "total 0"}])
    assert answer.output_text == "The tool did it."


def test_hosted_tools_are_not_offered_and_the_response_says_so(server):
    tools = [{"type": "web_search", "external_web_access": False}, WEATHER, {"type": "image_generation"}]
    body, events = both_ways(server, {"input": "Remember the number", "tools": tools})
    assert body["output"][0]["content"][0]["text"] == "I will remember 42."
    assert [tool["type"] for tool in body["tools"]] == ["web_search", "function", "image_generation"]
    assert body["ignored_tools"] == [
        {"index": 0, "type": "web_search", "reason": "a hosted tool this server does not run"},
        {"index": 2, "type": "image_generation", "reason": "a hosted tool this server does not run"}]
    assert events[0]["response"]["ignored_tools"] == body["ignored_tools"]


def test_no_tools_with_tool_choice_auto_means_no_tools(server):
    """Codex's compaction request."""
    response = create(server, {"input": "Remember the number", "tools": [], "tool_choice": "auto"})
    assert response.status_code == 200, response.text
    required = create(server, {"input": "Remember the number", "tools": [], "tool_choice": "required"})
    assert required.status_code == 400 and required.json()["error"]["param"] == "tool_choice"


# -- 4. text.format beside a forced tool choice ------------------------------------------------------------
def test_text_format_with_a_forced_function(server):
    schema = {"type": "json_schema", "name": "answer", "strict": True,
              "schema": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
                         "additionalProperties": False}}
    response = create(server, {"input": "spawn a helper", "tools": [AGENTS, WEATHER], "text": {"format": schema},
                               "tool_choice": {"type": "function", "name": "spawn_agent"}})
    assert response.status_code == 200, response.text
    [call] = check_response(response.json())["output"]
    assert call["name"] == "spawn_agent" and response.json()["text"]["format"]["name"] == "answer"
    chat = httpx.post(f"{server.v1}/chat/completions", timeout=60, json={
        "model": "scripted", "messages": [{"role": "user", "content": "weather please"}],
        "tools": [{"type": "function", "function": {k: v for k, v in WEATHER.items() if k != "type"}}],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": schema["schema"]}}})
    assert chat.status_code == 200, chat.text
    assert chat.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"


# -- 5. reasoning a client can see ---------------------------------------------------------------------------
def test_reasoning_summary_parts(server):
    body, events = both_ways(server, {"input": "think first", "reasoning": {"summary": "auto"}})
    reasoning, message = body["output"]
    # The thinking as the model wrote it, newlines of Qwen3's `<think>\n...\n</think>` included.
    assert reasoning["summary"] == [{"type": "summary_text", "text": "\nThe user wants a short answer.\n"}]
    assert reasoning["content"] == []
    kinds = [event["type"] for event in events]
    assert {"response.reasoning_summary_part.added", "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.done", "response.reasoning_summary_part.done"} <= set(kinds)
    assert "response.reasoning_text.delta" not in kinds
    assert body["reasoning"]["summary"] == "auto"
    # Without a summary asked for, the thinking is the item's reasoning_text content, as before.
    plain, _ = both_ways(server, {"input": "think first"})
    assert plain["output"][0]["summary"] == [] and plain["output"][0]["content"][0]["type"] == "reasoning_text"


# -- 6. no empty message items ---------------------------------------------------------------------------
def test_whitespace_between_calls_is_no_message(server):
    body, events = both_ways(server, {"input": "two calls with a gap", "tools": [WEATHER]})
    assert [item["type"] for item in body["output"]] == ["function_call", "function_call"]
    assert not [e for e in events if e["type"] == "response.output_text.delta"]


def test_a_forced_custom_tool_writes_its_input_as_the_output(server):
    """tool_choice {"type": "custom"}: the whole output is the input (a constrained model writes only what the
    grammar allows; the scripted one stands for it), streamed as it is written."""
    body, events = both_ways(server, {"input": "patch it now", "tools": [APPLY_PATCH, WEATHER],
                                      "tool_choice": {"type": "custom", "name": "apply_patch"}})
    [call] = body["output"]
    assert (call["type"], call["name"], call["input"]) == ("custom_tool_call", "apply_patch", PATCH)
    deltas = [e["delta"] for e in events if e["type"] == "response.custom_tool_call_input.delta"]
    assert len(deltas) > 1 and "".join(deltas) == PATCH
    assert body["tool_choice"] == {"type": "custom", "name": "apply_patch"}


CODEX_LARK = (  # Codex 0.169's apply_patch grammar, as it sends it
    'start: begin_patch hunk+ end_patch\nbegin_patch: "*** Begin Patch" LF\nend_patch: "*** End Patch" LF?\n\n'
    'hunk: add_hunk | delete_hunk | update_hunk\nadd_hunk: "*** Add File: " filename LF add_line+\n'
    'delete_hunk: "*** Delete File: " filename LF\nupdate_hunk: "*** Update File: " filename LF change_move? '
    'change?\n\nfilename: /(.+)/\nadd_line: "+" /(.*)/ LF -> line\n\nchange_move: "*** Move to: " filename LF\n'
    'change: (change_context | change_line)+ eof_line?\nchange_context: ("@@" | "@@ " /(.+)/) LF\n'
    'change_line: ("+" | "-" | " ") /(.*)/ LF\neof_line: "*** End of File" LF\n\n%import common.LF\n')


@pytest.mark.parametrize("tool_format, allowed", [
    ({"type": "grammar", "syntax": "lark", "definition": 'start: "apple" | "banana"'}, {"apple", "banana"}),
    ({"type": "grammar", "syntax": "regex", "definition": "[0-9]{3}"}, None),
])
def test_the_embedded_model_is_held_to_a_custom_tools_grammar(real_server, tool_format, allowed):
    tool = {"type": "custom", "name": "pick", "description": "Pick one.", "format": tool_format}
    response = httpx.post(f"{real_server.v1}/responses", timeout=300, json={
        "model": "SmolLM2-135M-Instruct", "input": "Pick a fruit, or three digits.", "tools": [tool],
        "tool_choice": {"type": "custom", "name": "pick"}, "max_output_tokens": 8, "temperature": 0})
    assert response.status_code == 200, response.text
    [call] = check_response(response.json())["output"]
    assert call["type"] == "custom_tool_call"
    assert call["input"] in allowed if allowed else len(call["input"]) == 3 and call["input"].isdigit()


def test_codex_apply_patch_grammar_holds_on_llama_cpp(real_server):
    """Codex's own Lark grammar (with its `%import common.LF`) is one llama.cpp's llguidance reads."""
    tool = {**APPLY_PATCH, "format": {"type": "grammar", "syntax": "lark", "definition": CODEX_LARK}}
    response = httpx.post(f"{real_server.v1}/responses", timeout=300, json={
        "model": "SmolLM2-135M-Instruct", "input": "Change hello to goodbye in greeting.txt", "tools": [tool],
        "tool_choice": {"type": "custom", "name": "apply_patch"}, "max_output_tokens": 24, "temperature": 0})
    assert response.status_code == 200, response.text
    [call] = check_response(response.json())["output"]
    assert call["type"] == "custom_tool_call" and call["input"].startswith("*** Begin Patch\n")
