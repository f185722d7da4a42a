"""gpt-oss's prompt: rostra's harmony rendering equals OpenAI's `openai-harmony` library's for the same
conversation (functions, tool calls and results, reasoning kept and dropped, every effort, built-in tools).

The library needs OpenAI's o200k vocabulary, made inside the checkout by tests/harmony_vocab.py."""

from __future__ import annotations

from datetime import date

import pytest

from harmony_vocab import harmony_vocab_dir
from rostra.errors import InvalidRequest
from rostra.prompt.harmony import HarmonyTemplate, speaks_harmony

harmony = pytest.importorskip("openai_harmony")
TODAY = date(2025, 6, 28)

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Gets the weather\nfor a city",
    "parameters": {"type": "object", "required": ["city"], "properties": {
        "city": {"type": "string", "description": "the city"},
        "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
        "days": {"type": "integer", "default": 3},
        "tags": {"type": "array", "items": {"type": "string"}},
        "exact": {"type": "boolean", "default": False},
        "note": {"type": ["string", "null"]},
        "place": {"type": "object", "description": "where", "required": ["lat"], "properties": {
            "lat": {"type": "number", "description": "latitude"}, "lon": {"type": "number"}}},
        "stops": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
        "any": {}}}}}
NO_ARGS = {"type": "function", "function": {"name": "now", "description": "The time", "parameters": None}}
EMPTY = {"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}}}


@pytest.fixture(scope="module")
def encoding():
    harmony_vocab_dir()
    return harmony.load_harmony_encoding(harmony.HarmonyEncodingName.HARMONY_GPT_OSS)


def library_text(encoding, messages, effort="medium", tools=(), instructions=None, builtin=()) -> str:
    """The library's rendering of the same conversation, built with its own types."""
    system = harmony.SystemContent.new().with_reasoning_effort(
        harmony.ReasoningEffort(effort.capitalize())).with_conversation_start_date(TODAY.isoformat())
    if "browser" in builtin:
        system = system.with_browser_tool()
    if "python" in builtin:
        system = system.with_python_tool()
    turns = [harmony.Message.from_role_and_content(harmony.Role.SYSTEM, system)]
    developer = harmony.DeveloperContent.new()
    if instructions:
        developer = developer.with_instructions(instructions)
    if tools:
        developer = developer.with_function_tools([harmony.ToolDescription.new(
            tool["function"]["name"], tool["function"].get("description") or "",
            parameters=tool["function"].get("parameters")) for tool in tools])
    if instructions or tools:
        turns.append(harmony.Message.from_role_and_content(harmony.Role.DEVELOPER, developer))
    turns += messages
    tokens = encoding.render_conversation_for_completion(harmony.Conversation.from_messages(turns),
                                                         harmony.Role.ASSISTANT)
    return encoding.decode(tokens)


def offered_builtin(builtin) -> list[dict]:
    """The built-in tools as the Responses API offers them: marked functions of harmony's names."""
    names = {"browser": ["browser.search", "browser.open", "browser.find"], "python": ["python"]}
    return [{"type": "function", "function": {"name": name, "parameters": {"type": "object"}, "harmony_builtin": True}}
            for tool in builtin for name in names[tool]]


def ours(messages, effort="medium", tools=None, builtin=()) -> str:
    offered = [*(tools or []), *offered_builtin(builtin)]
    return HarmonyTemplate().render(messages, tools=offered or None, reasoning_effort=effort, current_date=TODAY)


def user(text):
    return harmony.Message.from_role_and_content(harmony.Role.USER, text)


def assistant(text, channel, recipient=None, content_type=None):
    message = harmony.Message.from_role_and_content(harmony.Role.ASSISTANT, text).with_channel(channel)
    if recipient:
        message = message.with_recipient(recipient)
    return message.with_content_type(content_type) if content_type else message


def tool_result(name, text):
    return harmony.Message.from_author_and_content(harmony.Author.new(harmony.Role.TOOL, f"functions.{name}"),
                                                   text).with_channel("commentary").with_recipient("assistant")


@pytest.mark.parametrize("effort", ["low", "medium", "high"])
def test_effort_levels_and_instructions(encoding, effort):
    chat = [{"role": "system", "content": "Answer in riddles."}, {"role": "user", "content": "Hi there"}]
    expected = library_text(encoding, [user("Hi there")], effort, instructions="Answer in riddles.")
    assert ours(chat, effort) == expected
    assert f"Reasoning: {effort}" in expected


def test_functions_in_the_developer_message(encoding):
    tools = [WEATHER, NO_ARGS, EMPTY]
    chat = [{"role": "user", "content": "Weather in Oslo?"}]
    assert ours(chat, tools=tools) == library_text(encoding, [user("Weather in Oslo?")], tools=tools)


def test_tool_calls_results_and_reasoning_of_the_current_turn_kept(encoding):
    chat = [{"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": "", "reasoning_content": "Need the tool.", "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21}'}]
    expected = library_text(encoding, [
        user("Weather in Oslo?"), assistant("Need the tool.", "analysis"),
        assistant('{"city": "Oslo"}', "commentary", "functions.get_weather", "<|constrain|>json"),
        tool_result("get_weather", '{"temp": 21}')], tools=[WEATHER])
    assert ours(chat, tools=[WEATHER]) == expected
    assert "Need the tool." in expected


def test_reasoning_before_a_final_answer_dropped(encoding):
    chat = [{"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "4", "reasoning_content": "Simple sum."},
            {"role": "user", "content": "and 3+3?"}]
    expected = library_text(encoding, [user("2+2?"), assistant("Simple sum.", "analysis"),
                                       assistant("4", "final"), user("and 3+3?")], "high")
    assert ours(chat, "high") == expected
    assert "Simple sum." not in expected


@pytest.mark.parametrize("builtin", [("browser",), ("python",), ("browser", "python")])
def test_builtin_tools_in_the_system_message(encoding, builtin):
    chat = [{"role": "user", "content": "Search the news"}]
    assert ours(chat, builtin=builtin) == library_text(encoding, [user("Search the news")], builtin=builtin)


def test_builtin_tools_beside_functions(encoding):
    chat = [{"role": "user", "content": "go"}]
    expected = library_text(encoding, [user("go")], tools=[EMPTY], builtin=("browser", "python"))
    assert ours(chat, tools=[EMPTY], builtin=("browser", "python")) == expected


def test_stops_are_the_librarys_action_stops(encoding):
    stops = encoding.decode(encoding.stop_tokens_for_assistant_actions())
    assert sorted(HarmonyTemplate.stop_texts) == sorted(["<|call|>", "<|return|>"])
    assert all(stop in stops for stop in HarmonyTemplate.stop_texts)


def test_continue_final_message_leaves_the_answer_open():
    chat = [{"role": "user", "content": "Count"}, {"role": "assistant", "content": "1, 2,"}]
    text = HarmonyTemplate().render(chat, add_generation_prompt=False, continue_final_message=True,
                                    current_date=TODAY)
    assert text.endswith("<|start|>assistant<|channel|>final<|message|>1, 2,")


def test_an_unknown_effort_is_a_400():
    with pytest.raises(InvalidRequest) as caught:
        ours([{"role": "user", "content": "x"}], "extreme")
    assert caught.value.param == "reasoning_effort"


@pytest.mark.parametrize("architecture, template, expected", [
    ("gpt-oss", None, True), ("gpt_oss", None, True), ("llama", None, False),
    ("", "{{ '<|start|>' + role + '<|channel|>final<|message|>' }}", True),
    ("", "{{ '<|im_start|>' }}", False), ("", None, False)])
def test_gpt_oss_detected(architecture, template, expected):
    assert speaks_harmony(architecture, template) is expected


def builtin_call(recipient, body):
    return assistant(body, "analysis", recipient, "code")


def builtin_result(author, text):
    return harmony.Message.from_author_and_content(harmony.Author.new(harmony.Role.TOOL, author),
                                                   text).with_channel("analysis").with_recipient("assistant")


def test_builtin_tools_offered_as_functions_and_their_calls_in_the_history(encoding):
    """How the Responses API offers gpt-oss its built-in tools (functions of reserved names), and the calls it
    ran: declared in the system message, called and answered on the analysis channel."""
    chat = [{"role": "user", "content": "Weather in Oslo, and 2**10?"},
            {"role": "assistant", "content": "", "reasoning_content": "Search first.", "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "browser.search", "arguments": '{"query": "Oslo weather"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "[0] Oslo: 21C"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c2", "type": "function", "function": {"name": "python",
                                                              "arguments": '{"code": "print(2**10)"}'}}]},
            {"role": "tool", "tool_call_id": "c2", "content": "1024"}]
    expected = library_text(encoding, [
        user("Weather in Oslo, and 2**10?"), assistant("Search first.", "analysis"),
        builtin_call("browser.search", '{"query": "Oslo weather"}'), builtin_result("browser.search", "[0] Oslo: 21C"),
        builtin_call("python", "print(2**10)"), builtin_result("python", "1024")],
        tools=[WEATHER], builtin=("browser", "python"))
    assert ours(chat, tools=[WEATHER], builtin=("browser", "python")) == expected


def test_a_clients_own_function_named_python_stays_a_function(encoding):
    python = {"type": "function", "function": {"name": "python", "description": "Mine",
                                               "parameters": {"type": "object", "properties": {}}}}
    chat = [{"role": "user", "content": "go"}]
    assert ours(chat, tools=[python]) == library_text(encoding, [user("go")], tools=[python])
