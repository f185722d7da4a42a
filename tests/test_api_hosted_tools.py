"""Hosted tools served through tool servers: `--tool-server browser=URL` and `python=URL` name real MCP servers
(tests/mcp_servers.py); a Responses request's `web_search` / `code_interpreter` tools are then served, for gpt-oss
as its own built-in tools, for any other model as functions. The scripted gpt-oss output
(tests/data/hosted_tools.jsonl) is written as gpt-oss writes it: the browser call as a llama.cpp run of
gpt-oss-20b printed it (`<|channel|>analysis to=browser.search code<|message|>{"query": ...}`, quoted in
avble/av_llm's notes), the python call as OpenAI's harmony guide and renderer give it (`to=python`, content type
`code`, the code itself as the body). Every body and event is checked against the spec and the openai SDK's types."""

from __future__ import annotations

import pytest
from openai import OpenAI

from conftest import scripted
from gpt_oss_tokenizer import gpt_oss_tokenizer
from servers import DATA, RunningServer
from test_api_mcp import McpProcess
from test_api_responses import check_response, raw_stream
from wire import check_error, post

WEB_SEARCH = {"type": "web_search"}
CODE = {"type": "code_interpreter", "container": {"type": "auto"}}


@pytest.fixture(scope="module")
def tool_servers():
    browser, python = McpProcess("streamable-http", "browser"), McpProcess("streamable-http", "python")
    yield [f"browser={browser.url}", f"code_interpreter={python.url}"]
    browser.stop()
    python.stop()


@pytest.fixture(scope="module")
def gpt_oss(tool_servers):
    server = RunningServer(["--engine", "scripted", "--script", str(DATA / "hosted_tools.jsonl"), "--tokenizer",
                            str(gpt_oss_tokenizer()), "--served-model-name", "gpt-oss",
                            *[arg for spec in tool_servers for arg in ("--tool-server", spec)]])
    yield server
    server.stop()


@pytest.fixture(scope="module")
def hermes(tool_servers):
    server = RunningServer(list(scripted("hosted_tools.jsonl", "--tool-call-parser", "hermes",
                                         *[arg for spec in tool_servers for arg in ("--tool-server", spec)])))
    yield server
    server.stop()


def create(server, model, text, tools, **extra) -> dict:
    response = post(server.base_url, "/v1/responses", {"model": model, "input": text, "tools": tools, **extra})
    assert response.status_code == 200, response.text
    return check_response(response.json())


def kinds(events: list[dict], prefix: str) -> list[str]:
    return [event["type"] for event in events if event["type"].startswith(prefix)]


def test_gpt_oss_searches_with_its_browser(gpt_oss):
    body = create(gpt_oss, "gpt-oss", "What is the weather in Oslo?", [WEB_SEARCH])
    assert [item["type"] for item in body["output"]] == ["reasoning", "web_search_call", "reasoning", "message"]
    call = body["output"][1]
    assert call["status"] == "completed"
    assert call["action"]["type"] == "search" and call["action"]["query"] == "Oslo weather"
    assert body["output"][-1]["content"][0]["text"] == "It is 21C and sunny in Oslo."
    assert "ignored_tools" not in body
    events = raw_stream(gpt_oss.base_url, {"model": "gpt-oss", "input": "What is the weather in Oslo?",
                                           "tools": [WEB_SEARCH]})
    assert kinds(events, "response.web_search_call") == [
        "response.web_search_call.in_progress", "response.web_search_call.searching",
        "response.web_search_call.completed"]
    final = check_response(events[-1]["response"])
    assert [item["type"] for item in final["output"]] == [item["type"] for item in body["output"]]
    assert final["output"][1]["action"] == call["action"]


def test_gpt_oss_runs_python(gpt_oss):
    body = create(gpt_oss, "gpt-oss", "What is two to the tenth?", [CODE], reasoning={"effort": "high"})
    call = next(item for item in body["output"] if item["type"] == "code_interpreter_call")
    assert (call["code"], call["outputs"], call["status"]) == ("print(2**10)", [{"type": "logs", "logs": "1024\n"}],
                                                                "completed")
    assert body["output"][-1]["content"][0]["text"] == "2**10 is 1024."
    events = raw_stream(gpt_oss.base_url, {"model": "gpt-oss", "input": "What is two to the tenth?", "tools": [CODE]})
    assert kinds(events, "response.code_interpreter_call") == [
        "response.code_interpreter_call.in_progress", "response.code_interpreter_call_code.delta",
        "response.code_interpreter_call_code.done", "response.code_interpreter_call.interpreting",
        "response.code_interpreter_call.completed"]


def test_any_model_gets_them_as_functions(hermes):
    body = create(hermes, "scripted", "Please search the web for me", [WEB_SEARCH, CODE])
    assert [item["type"] for item in body["output"]] == ["web_search_call", "message"]
    assert body["output"][0]["action"]["query"] == "Bergen weather"
    assert body["output"][1]["content"][0]["text"] == "It rains in Bergen."
    body = create(hermes, "scripted", "Please run some code", [WEB_SEARCH, CODE])
    assert body["output"][0]["outputs"] == [{"type": "logs", "logs": "42\n"}]
    assert body["output"][1]["content"][0]["text"] == "The answer is 42."


def test_a_failed_search_is_a_failed_item_the_model_reads(hermes):
    body = create(hermes, "scripted", "The search fails", [WEB_SEARCH])
    assert body["output"][0]["status"] == "failed"
    assert body["output"][1]["content"][0]["text"] == "The search failed."


def test_the_openai_sdk_reads_them(gpt_oss):
    client = OpenAI(base_url=f"{gpt_oss.base_url}/v1", api_key="x", max_retries=0)
    response = client.responses.create(model="gpt-oss", input="What is the weather in Oslo?",
                                       tools=[{"type": "web_search"}])
    assert [item.type for item in response.output] == ["reasoning", "web_search_call", "reasoning", "message"]
    assert response.output_text == "It is 21C and sunny in Oslo."
    with client.responses.stream(model="gpt-oss", input="What is two to the tenth?",
                                 tools=[{"type": "code_interpreter", "container": {"type": "auto"}}]) as stream:
        types = [event.type for event in stream]
        final = stream.get_final_response()
    assert "response.code_interpreter_call.interpreting" in types
    assert final.output_text == "2**10 is 1024."


def test_containers_that_cannot_be_served_are_a_400(gpt_oss):
    for container, param in [("cntr_abc", "tools[0].container"),
                             ({"type": "auto", "file_ids": ["file-1"]}, "tools[0].container.file_ids")]:
        response = post(gpt_oss.base_url, "/v1/responses", {"model": "gpt-oss", "input": "hi", "tools": [
            {"type": "code_interpreter", "container": container}]})
        check_error(response, 400, param)


def test_without_a_tool_server_they_stay_ignored(scripted_server):
    body = create(scripted_server, "scripted", "hello", [WEB_SEARCH, CODE])
    assert [entry["type"] for entry in body["ignored_tools"]] == ["web_search", "code_interpreter"]


def test_chat_refuses_builtin_tools(gpt_oss):
    response = post(gpt_oss.base_url, "/v1/chat/completions", {"model": "gpt-oss", "messages": [
        {"role": "user", "content": "hi"}], "tools": [WEB_SEARCH]})
    assert check_error(response, 400, "tools[0].type")["code"] == "builtin_tool_not_supported"


def test_a_stateless_client_sends_the_calls_back(gpt_oss):
    """store: false, the output sent back as input (as the Agents SDK's to_input_list does): accepted."""
    first = create(gpt_oss, "gpt-oss", "What is two to the tenth?", [CODE], store=False)
    again = [{"role": "user", "content": "What is two to the tenth?"},
             *[item for item in first["output"] if item["type"] != "reasoning"],
             {"role": "user", "content": "What is the weather in Oslo?"}]
    body = create(gpt_oss, "gpt-oss", again, [CODE, WEB_SEARCH], store=False)
    assert body["output"][-1]["content"][0]["text"] == "It is 21C and sunny in Oslo."


def test_gpt_oss_is_offered_its_own_tools_other_models_functions():
    """What each model reads: gpt-oss the browser and python namespaces of its system message, no functions;
    another model functions named after the hosted tools."""
    from rostra.api.responses.builtin_tools import serve_hosted_tools
    from rostra.api.responses.mcp.tools import McpPolicy
    from rostra.api.responses.to_chat import offer
    from rostra.api.responses.tools import parse_tools
    from rostra.prompt.harmony import HarmonyTemplate

    policy = McpPolicy(tool_servers={"browser": "http://127.0.0.1:1/mcp", "python": "http://127.0.0.1:2/mcp"})
    tools, routes = serve_hosted_tools(parse_tools([WEB_SEARCH, CODE]), policy, harmony=True)
    assert sorted(routes) == ["browser.find", "browser.open", "browser.search", "python"]
    prompt = HarmonyTemplate().render([{"role": "user", "content": "hi"}],
                                      tools=[dict(tool.template) for tool in offer(tools)[0]])
    assert "namespace browser {" in prompt and "## python" in prompt and "namespace functions" not in prompt
    tools, routes = serve_hosted_tools(parse_tools([WEB_SEARCH, CODE]), policy, harmony=False)
    assert [tool.name for tool in offer(tools)[0]] == ["web_search", "code_interpreter"]
    assert {name: (route.server.label, route.tool) for name, route in routes.items()} == {
        "web_search": ("browser", "search"), "code_interpreter": ("python", "python")}
