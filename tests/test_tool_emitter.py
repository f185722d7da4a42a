"""CallEmitter: one contract for every call, from every parser and from relayed upstreams."""

import json

import pytest

from rostra.parsing.events import Finish, Text, ToolCallArgs, ToolCallEnd, ToolCallStart
from rostra.parsing.reasoning.gpt_oss import GptOssReasoningParser
from rostra.parsing.tools import tool_parser_class
from rostra.parsing.tools.base import ToolSpec
from rostra.parsing.tools.emitter import CallEmitter
from rostra.serving.relay import ChatChunkEvents
from toolparse import ADD, NOW, TOOLS, WEATHER, fold_tool_calls

HARMONY_CALL = ("<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>{args}<|call|>")


def through(emitter, events):
    out = emitter.feed(events) + emitter.finish()
    content = "".join(e.text for e in out if isinstance(e, Text))
    calls, ids = fold_tool_calls(out)
    return content, calls, ids, out


def harmony(*calls):
    parser = GptOssReasoningParser()
    text = "".join(HARMONY_CALL.format(name=name, args=args) for name, args in calls)
    return parser.feed([Text(text)]) + parser.finish()


def test_gpt_oss_calls_to_tools_never_offered_become_text():
    content, calls, _, _ = through(CallEmitter(TOOLS), harmony(("get_weather", '{"city": "Oslo"}'),
                                                              ("rm_rf", '{"path": "/"}')))
    assert calls == [("get_weather", {"city": "Oslo"})]
    assert content == '{"path": "/"}'


def test_gpt_oss_calls_with_tool_choice_none_become_text():
    content, calls, _, out = through(CallEmitter(TOOLS, allow_calls=False), harmony(("get_weather", '{"city": "Oslo"}')))
    assert calls == [] and content == '{"city": "Oslo"}'
    assert not any(isinstance(e, ToolCallStart) for e in out)


def test_parallel_tool_calls_false_keeps_the_first_of_any_source():
    events = harmony(("get_weather", '{"city": "Oslo"}'), ("add", '{"a": 1}'))
    content, calls, _, _ = through(CallEmitter(TOOLS, max_calls=1), events)
    assert calls == [("get_weather", {"city": "Oslo"})] and content == ""


def test_indexes_count_over_sources_and_ids_are_kept():
    events = [ToolCallStart(0, "call_a", "now"), ToolCallArgs(0, "{}"), ToolCallEnd(0),
              ToolCallStart(0, "", "add"), ToolCallArgs(0, '{"a": 1}'), ToolCallEnd(0)]
    _, calls, ids, out = through(CallEmitter(TOOLS), events)
    assert calls == [("now", {}), ("add", {"a": 1})]
    assert ids[0] == "call_a" and ids[1].startswith("call_")
    assert [e.index for e in out if isinstance(e, ToolCallStart)] == [0, 1]


def test_nan_from_llama3_json_and_mistral_never_reaches_the_arguments():
    for name, output in [("llama3_json", '{"parameters": {"a": NaN, "b": 1}, "name": "add"}'),
                         ("mistral", '[TOOL_CALLS][{"arguments": {"a": NaN}, "name": "add"}]')]:
        parser = tool_parser_class(name)(TOOLS)
        content, calls, _, _ = through(CallEmitter(TOOLS), parser.feed([Text(output)]) + parser.finish())
        assert calls == [] and content == output, name
    # A call that streams once its name and "{" are read: NaN stops its arguments there.
    for name, output in [("mistral", '[TOOL_CALLS]add{"b": 1, "a": Infinity}'),
                         ("mistral", '[TOOL_CALLS][{"name": "add", "arguments": {"b": 1, "a": NaN}}]'),
                         ("llama3_json", '{"name": "add", "parameters": {"b": 1, "a": NaN}}')]:
        parser = tool_parser_class(name)(TOOLS)
        content, calls, _, _ = through(CallEmitter(TOOLS), parser.feed([Text(output)]) + parser.finish())
        assert calls == [("add", {"b": 1})] and content == "", name


def test_invalid_arguments_from_any_source_are_valid_json_out():
    events = [ToolCallStart(0, "x", "add"), ToolCallArgs(0, '{"a": 1, "b": NaN}'), ToolCallEnd(0)]
    _, calls, _, out = through(CallEmitter(TOOLS), events)
    assert calls == [("add", {"a": 1})]
    json.loads("".join(e.text for e in out if isinstance(e, ToolCallArgs)))


def test_strict_keeps_only_schema_properties():
    magic = ToolSpec("magic_function", {"type": "object", "properties": {"input": {"type": "integer"}},
                                        "required": ["input"]})
    events = [ToolCallStart(0, "x", "magic_function"),
              ToolCallArgs(0, '{"input": 3, "output_type": "magic_function"}'), ToolCallEnd(0)]
    _, calls, _, _ = through(CallEmitter([magic], strict=True), events)
    assert calls == [("magic_function", {"input": 3})]
    _, calls, _, _ = through(CallEmitter([magic]), list(events))
    assert calls == [("magic_function", {"input": 3, "output_type": "magic_function"})]  # not strict: as written
    marked = ToolSpec("magic_function", magic.parameters, strict=True)  # the tool's own `strict: true`
    assert through(CallEmitter([marked]), list(events))[1] == [("magic_function", {"input": 3})]
    open_schema = ToolSpec("magic_function", {**magic.parameters, "additionalProperties": True})
    assert through(CallEmitter([open_schema], strict=True), list(events))[1] == [
        ("magic_function", {"input": 3, "output_type": "magic_function"})]


def test_relayed_upstream_calls_pass_the_emitter():
    chunks = ChatChunkEvents()
    upstream = [
        {"delta": {"tool_calls": [{"index": 0, "id": "call_up", "function": {"name": "rm_rf", "arguments": ""}}]}},
        {"delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"path": "/"}'}}]}},
        {"delta": {"tool_calls": [{"index": 1, "id": "call_w", "function": {"name": "get_weather",
                                                                             "arguments": '{"city": '}}]}},
        {"delta": {"tool_calls": [{"index": 1, "function": {"arguments": '"Oslo", "x": NaN}'}}]}},
        {"delta": {}, "finish_reason": "tool_calls"},
    ]
    emitter = CallEmitter([WEATHER, ADD, NOW])
    events = [e for choice in upstream for e in emitter.feed(chunks.events(0, choice))]
    content = "".join(e.text for e in events if isinstance(e, Text))
    calls, ids = fold_tool_calls(events)
    assert calls == [("get_weather", {"city": "Oslo"})] and ids == ["call_w"]
    assert content == '{"path": "/"}'
    assert events[-1] == Finish("tool_calls", 0)


def test_a_relayed_finish_without_calls_let_through_is_stop():
    emitter = CallEmitter(TOOLS, allow_calls=False)
    chunks = ChatChunkEvents()
    events = emitter.feed(chunks.events(0, {"delta": {"tool_calls": [
        {"index": 0, "id": "c", "function": {"name": "now", "arguments": "{}"}}]}, "finish_reason": "tool_calls"}))
    assert events[-1].reason == "stop"


def test_forced_constraints_are_strict_schemas():
    from rostra.guided.constraints import response_constraint, strict_schema
    from rostra.serving.chat_turn import chat_tool_choice, chat_tools
    from rostra.serving.tools import plan_tools

    magic = {"type": "function", "function": {"name": "magic_function", "parameters": {
        "type": "object", "properties": {"input": {"type": "integer"},
                                         "opts": {"type": "object", "properties": {"x": {"type": "string"}}},
                                         "free": {"type": "object"}},
        "required": ["input"]}}}
    named = plan_tools(chat_tools([magic]), chat_tool_choice({"type": "function", "function": {"name": "magic_function"}}),
                       None, None)
    schema = named.constraint.json_schema
    assert schema["additionalProperties"] is False and schema["required"] == ["input"]
    assert schema["properties"]["opts"]["additionalProperties"] is False
    assert "additionalProperties" not in schema["properties"]["free"]  # lists nothing: any object
    required = plan_tools(chat_tools([magic]), chat_tool_choice("required"), None, None).constraint.json_schema
    assert required["items"]["anyOf"][0]["properties"]["arguments"] == {
        key: value for key, value in schema.items() if key != "x-guidance"}
    allowing = {"type": "object", "properties": {"a": {}}, "additionalProperties": {"type": "string"}}
    assert strict_schema(allowing) == allowing
    strict = response_constraint({"type": "json_schema", "json_schema": {
        "name": "x", "strict": True, "schema": {"type": "object", "properties": {"a": {"type": "string"}}}}}, {})
    assert strict.json_schema["additionalProperties"] is False
    loose = response_constraint({"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"type": "object", "properties": {"a": {"type": "string"}}}}}, {})
    assert "additionalProperties" not in loose.json_schema


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "f"}}])
def test_forced_calls_are_laid_out_on_one_line(choice):
    """A forced call's grammar, compiled by llguidance as the llama.cpp and transformers engines
    do, takes JSON on one line with fixed separators and no other whitespace: with free whitespace,
    Qwen2.5-Coder-0.5B padded `[` with blanks until max_tokens (see single_line)."""
    import llguidance

    from rostra.serving.chat_turn import chat_tool_choice, chat_tools
    from rostra.serving.tools import plan_tools

    tool = {"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "string"}}, "required": ["x"]}}}
    grammar = llguidance.LLMatcher.grammar_from_json_schema(plan_tools(chat_tools([tool]), chat_tool_choice(choice), None, None).constraint.json_schema)
    tokenizer = llguidance.LLTokenizer("byte")

    def accepts(text: str) -> bool:
        matcher = llguidance.LLMatcher(tokenizer, grammar, log_level=0)
        return matcher.consume_tokens(tokenizer.tokenize_str(text)) and not matcher.is_error()

    arguments = '{"x": 3, "y": "a b"}'
    one_line = arguments if isinstance(choice, dict) else f'[{{"name": "f", "arguments": {arguments}}}]'
    assert accepts(one_line)
    assert not accepts(one_line[:1] + " ")
    assert not accepts(one_line[:1] + "\n")
    assert not accepts('{"x":3}')  # the separators are fixed too


def test_mistral_history_ids_become_nine_characters_consistently():
    import re

    from rostra.serving.tools import mistral_history, nine_character_id

    messages = [
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_77a568d08405067431596d27", "type": "function", "function": {"name": "now", "arguments": {}}},
            {"id": "abcDEF123", "type": "function", "function": {"name": "now", "arguments": {}}}]},
        {"role": "tool", "tool_call_id": "call_77a568d08405067431596d27", "content": "12:00"},
        {"role": "tool", "tool_call_id": "abcDEF123", "content": "12:00"},
    ]
    mapped = mistral_history(messages)
    first = mapped[0]["tool_calls"][0]["id"]
    assert re.fullmatch(r"[A-Za-z0-9]{9}", first) and mapped[1]["tool_call_id"] == first
    assert mapped[0]["tool_calls"][1]["id"] == "abcDEF123" == mapped[2]["tool_call_id"]  # already fine: kept
    assert nine_character_id("functions.now:0") != nine_character_id("functions.now:1")


def test_kimi_k2_ids_are_the_models_own():
    from rostra.parsing.tools.kimi_k2 import (ARGUMENTS_BEGIN, CALL_BEGIN, CALL_END, SECTION_BEGIN,
                                              SECTION_END)

    output = (f"{SECTION_BEGIN}{CALL_BEGIN}functions.get_weather:3{ARGUMENTS_BEGIN}{{\"city\": \"Oslo\"}}{CALL_END}"
              f"{CALL_BEGIN}now{ARGUMENTS_BEGIN}{{}}{CALL_END}{SECTION_END}")
    parser = tool_parser_class("kimi_k2")(TOOLS)
    _, calls, ids, _ = through(CallEmitter(TOOLS), parser.feed([Text(output)]) + parser.finish())
    assert calls == [("get_weather", {"city": "Oslo"}), ("now", {})]
    assert ids == ["functions.get_weather:3", "functions.now:1"]
