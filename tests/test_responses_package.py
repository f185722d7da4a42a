"""The Responses package's typed boundary (input items and tools as discriminated unions) and the settlement of
a response whose runner died, as plain functions: data-driven, no server."""

from __future__ import annotations

import pytest

from rostra.api.responses.items import ITEM_KINDS, normalize_input
from rostra.api.responses.recovery import settle_from_events
from rostra.api.responses.models import CreateResponseRequest
from rostra.api.responses.render import ResponseBuilder
from rostra.api.responses.response_object import ResponseObject
from rostra.api.responses.service import base_response
from rostra.api.responses.wire import OutputBudget, ResponseUsage
from rostra.api.responses.tools import TOOL_KINDS, FunctionTool, McpTool, parse_tools
from rostra.errors import InvalidRequest, ServerError
from rostra.parsing.events import Reasoning, Text, ToolCallArgs, ToolCallStart

BAD_ITEMS = [  # (input, param of the 400)
    ([{"type": "image_generation_call"}], "input[0].type"),
    (["a string, not an item"], "input[0]"),
    ([{"role": "robot", "content": "hi"}], "input[0].role"),
    ([{"role": "user"}], "input[0].content"),
    # (an input_image is taken: images are served; its URL is checked where the image is loaded)
    ([{"role": "user", "content": [{"type": "input_video", "video_url": "x"}]}], "input[0].content"),
    ([{"role": "user", "content": "ok"}, {"type": "function_call", "call_id": "c", "name": "f"}], "input[1]"),
    ([{"type": "function_call_output", "output": "x"}], "input[0]"),
    ([{"type": "mcp_approval_response", "approval_request_id": "r", "approve": "true"}], "input[0]"),  # no coercion
    ([{"type": "mcp_list_tools", "server_label": "s", "tools": [{"description": "no name"}]}], "input[0]"),
    ([], "input"),
]


@pytest.mark.parametrize("value, param", BAD_ITEMS)
def test_bad_input_items_are_400s_naming_the_culprit(value, param):
    with pytest.raises(InvalidRequest) as refused:
        normalize_input(value)
    assert refused.value.param == param


def test_items_are_stored_as_sent_with_an_id_and_text_parts():
    stored = normalize_input([{"role": "assistant", "content": "hi", "status": "completed"},
                              {"type": "function_call_output", "call_id": "c", "output": None, "id": None},
                              {"type": "reasoning", "summary": [], "encrypted_content": "opaque"}])
    assert stored[0] == {"type": "message", "role": "assistant", "status": "completed", "id": stored[0]["id"],
                         "content": [{"type": "output_text", "text": "hi", "annotations": [], "logprobs": []}]}
    assert [item["id"].split("_")[0] for item in stored] == ["msg", "fco", "rs"]
    assert stored[1]["output"] is None and stored[2]["encrypted_content"] == "opaque"
    assert normalize_input("hello")[0]["content"] == [{"type": "input_text", "text": "hello"}]


def test_each_union_lists_its_members_once():
    assert set(ITEM_KINDS) == {"message", "function_call", "function_call_output", "reasoning", "mcp_list_tools",
                               "mcp_call", "mcp_approval_request", "mcp_approval_response", "item_reference",
                               "custom_tool_call", "custom_tool_call_output", "local_shell_call",
                               "local_shell_call_output", "compaction", "compaction_trigger", "web_search_call",
                               "code_interpreter_call"}
    assert (TOOL_KINDS["function"], TOOL_KINDS["mcp"]) == (FunctionTool, McpTool)
    assert {"namespace", "custom", "local_shell", "web_search", "tool_search"} <= set(TOOL_KINDS)


@pytest.mark.parametrize("tools, param", [
    ([{"type": "quantum_tool"}], "tools[0].type"),
    ([{"type": "function"}], "tools[0].name"),
    ([{"type": "function", "name": "f", "parameters": "not a schema"}], "tools[0]"),
    ([{"type": "mcp", "server_label": ""}], "tools[0].server_label"),
    ([{"type": "mcp", "server_label": "s", "headers": {"X": 1}}], "tools[0].headers"),
    ([{"type": "function", "name": "f"}, {"type": "mcp", "server_label": "s", "server_url": 5}], "tools[1].server_url"),
])
def test_bad_tools_are_400s_naming_the_field(tools, param):
    with pytest.raises(InvalidRequest) as refused:
        parse_tools(tools)
    assert refused.value.param == param


def test_tools_echo_as_the_response_lists_them():
    function, mcp = parse_tools([{"type": "function", "name": "f", "description": "d"},
                                 {"type": "mcp", "server_label": "s", "server_url": "http://h/mcp",
                                  "headers": {"X-Key": "secret"}, "authorization": "token"}])
    assert function.echo() == {"type": "function", "name": "f", "description": "d",
                               "parameters": {"type": "object", "properties": {}}, "strict": False}
    assert [offer for _, offer in function.offered()] == [{"name": "f", "description": "d"}]
    assert mcp.echo() == {"type": "mcp", "server_label": "s", "server_url": "http://h/mcp",
                          "headers": {"X-Key": "<redacted>"}}
    assert mcp.request_headers() == {"X-Key": "secret", "Authorization": "Bearer token"} and mcp.offered() == []


def new_response() -> ResponseObject:
    """A response object as a request of nothing but a model and an input starts one."""
    return base_response(CreateResponseRequest(model="m", input="hi"), [])


def logged_run(*events) -> tuple[ResponseBuilder, dict, list[dict]]:
    """A runner's builder, the response as it stored it (in_progress, no output yet) and the events it logged."""
    builder = ResponseBuilder(new_response())
    builder.mcp.tools = {"lookup": ("srv", False)}
    logged = [builder.lifecycle("response.created")]
    for event in events:
        logged += builder.add(0, event)
    return builder, {**logged[0]["response"], "status": "in_progress"}, logged


@pytest.mark.parametrize("events, kinds, partial", [
    ([Reasoning("thinking"), Text("The ans")], ["reasoning", "message"], "The ans"),
    ([Text("Calling."), ToolCallStart(0, "call_1", "f"), ToolCallArgs(0, '{"a": ')], ["message", "function_call"],
     '{"a": '),
    ([ToolCallStart(0, "call_1", "lookup"), ToolCallArgs(0, '{"q"')], ["mcp_call"], '{"q"'),
])
def test_a_dead_runners_partial_item_ends_incomplete(events, kinds, partial):
    """What the failing runner itself would have stored (ResponseBuilder.fail) is what recovery settles to."""
    runner, response, logged = logged_run(*events)
    settled, tail = settle_from_events(response, logged, {"code": "server_error", "message": "gone"})
    assert settled["status"] == "failed" and settled["error"] == {"code": "server_error", "message": "gone"}
    assert [item["type"] for item in settled["output"]] == kinds
    *finished, last = settled["output"]
    assert all(item["status"] == "completed" for item in finished) and last["status"] == "incomplete"
    assert (last["content"][0]["text"] if last["type"] == "message" else last["arguments"]) == partial
    assert [event["type"] for event in tail] == ["response.output_item.done", "response.failed"]
    assert tail[0]["item"] == last and tail[-1]["response"] == settled
    runner.fail(ServerError("gone"))  # had it lived to fail, the runner would have stored the same output
    assert settled["output"] == runner.response.output


def test_nothing_logged_settles_as_before():
    settled, tail = settle_from_events({"id": "resp_1", "status": "queued", "output": []}, [],
                                       {"code": "server_error", "message": "gone"})
    assert settled["output"] == [] and [event["type"] for event in tail] == ["response.failed"]


def test_the_response_object_reads_back_as_stored():
    """The typed response object is JSON only at the edges: what it writes (the store's row, the route's answer)
    reads back to the same object, keys a later version adds included; rostra's own fields are absent unless set."""
    response = new_response()
    wire = response.wire()
    assert not {"ignored_tools", "truncated_items", "input_messages", "output_messages"} & set(wire)
    response.usage = ResponseUsage.nothing()
    assert "output_budget" not in response.wire()["usage"]
    response.usage = response.usage.model_copy(update={"output_budget": OutputBudget(requested=8, granted=3)})
    response.truncated_items = 2
    wire = response.wire()
    assert wire["usage"]["output_budget"] == {"requested": 8, "granted": 3} and wire["truncated_items"] == 2
    assert ResponseObject.stored({**wire, "added_later": [1]}).wire() == {**wire, "added_later": [1]}
    wire["output"].append({"type": "message"})  # a copy: what was sent never changes with the object
    assert response.output == []
