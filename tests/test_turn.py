"""The typed turn (rostra/turn.py): each API converts its own request, and a 400 from the shared pipeline names the
field as that API's client wrote it; the three APIs' turns of one conversation render the same prompt."""

import pytest

from harness import MODEL, InProcessServer

SCHEMA_TYPE_IS_WRONG = {"type": 12}  # not a JSON schema: refused by the pipeline's schema check


@pytest.fixture
def anyio_backend():
    return "asyncio"


def user(text):
    return {"role": "user", "content": text}


CASES = [
    # A tool's schema: Chat's function.parameters, Messages' input_schema (by the tool's own index, deferred tools
    # counted), Responses' flat parameters.
    ("/v1/chat/completions", {"messages": [user("hi")], "tools": [
        {"type": "function", "function": {"name": "f", "parameters": SCHEMA_TYPE_IS_WRONG}}]}, "tools[0].function.parameters"),
    ("/v1/messages", {"max_tokens": 8, "messages": [user("hi")], "tools": [
        {"name": "g", "input_schema": {"type": "object"}, "defer_loading": True},
        {"name": "f", "input_schema": SCHEMA_TYPE_IS_WRONG}]}, "tools[1].input_schema"),
    ("/v1/responses", {"input": "hi", "tools": [
        {"type": "function", "name": "f", "parameters": SCHEMA_TYPE_IS_WRONG}]}, "tools[0].parameters"),
    # A named tool choice that names no tool.
    ("/v1/chat/completions", {"messages": [user("hi")], "tools": [{"type": "function", "function": {"name": "f"}}],
                              "tool_choice": {"type": "function", "function": {"name": "g"}}}, "tool_choice.function.name"),
    ("/v1/messages", {"max_tokens": 8, "messages": [user("hi")], "tools": [{"name": "f", "input_schema": {}}],
                      "tool_choice": {"type": "tool", "name": "g"}}, "tool_choice.name"),
    ("/v1/responses", {"input": "hi", "tools": [{"type": "function", "name": "f"}],
                       "tool_choice": {"type": "function", "name": "g"}}, "tool_choice.name"),
    # The answer's format.
    ("/v1/chat/completions", {"messages": [user("hi")], "response_format": {
        "type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA_TYPE_IS_WRONG}}}, "response_format.json_schema.schema"),
    ("/v1/messages", {"max_tokens": 8, "messages": [user("hi")],
                      "output_config": {"format": {"type": "json_schema", "schema": SCHEMA_TYPE_IS_WRONG}}},
     "output_config.format.schema"),
    # (the structured-outputs beta's older name for output_config.format: its own path, not the newer one's)
    ("/v1/messages", {"max_tokens": 8, "messages": [user("hi")],
                      "output_format": {"type": "json_schema", "schema": SCHEMA_TYPE_IS_WRONG}}, "output_format.schema"),
    ("/v1/responses", {"input": "hi", "text": {"format": {"type": "json_schema", "name": "x",
                                                          "schema": SCHEMA_TYPE_IS_WRONG}}}, "text.format.schema"),
    # An image where none may stand: the part's own path.
    ("/v1/chat/completions", {"messages": [{"role": "assistant", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}, user("hi")]},
     "messages[0].content[0]"),
]


@pytest.mark.anyio
async def test_a_400_from_the_pipeline_names_the_field_as_each_api_spells_it(tmp_path):
    async with InProcessServer(tmp_path, []) as server:
        for path, body, param in CASES:
            response = await server.client.post(path, json={"model": MODEL, **body})
            assert response.status_code == 400, (path, response.text)
            error = response.json()
            if path == "/v1/messages":  # Anthropic's envelope has no param: it leads the message
                assert error["error"]["message"].startswith(f"{param}:"), (path, error)
            else:
                assert error["error"]["param"] == param, (path, error)


@pytest.mark.anyio
async def test_one_conversation_is_one_prompt_through_every_api(tmp_path):
    """System prompt, a call and its result, then a question: Chat, Messages and Responses make the same turn, so
    their counts (which render the turn through the template) agree with Chat's own prompt tokens."""
    calls = [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}]
    chat = {"model": MODEL, "max_tokens": 4, "messages": [
        {"role": "system", "content": "Be brief."}, user("weather in Oslo?"),
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}, user("and tomorrow?")]}
    messages = {"model": MODEL, "system": "Be brief.", "messages": [
        user("weather in Oslo?"),
        {"role": "assistant", "content": [{"type": "tool_use", "id": "call_1", "name": "weather",
                                           "input": {"city": "Oslo"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "sunny"},
                                     {"type": "text", "text": "and tomorrow?"}]}]}
    responses = {"model": MODEL, "instructions": "Be brief.", "input": [
        user("weather in Oslo?"),
        {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": '{"city": "Oslo"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}, user("and tomorrow?")]}
    async with InProcessServer(tmp_path, []) as server:
        answered = await server.client.post("/v1/chat/completions", json=chat)
        assert answered.status_code == 200, answered.text
        prompt_tokens = answered.json()["usage"]["prompt_tokens"]
        counted = await server.client.post("/v1/messages/count_tokens", json=messages)
        assert counted.status_code == 200 and counted.json()["input_tokens"] == prompt_tokens
        input_tokens = await server.client.post("/v1/responses/input_tokens", json=responses)
        assert input_tokens.status_code == 200 and input_tokens.json()["input_tokens"] == prompt_tokens
