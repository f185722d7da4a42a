"""MCP tools in the Responses API: real MCP servers (the `mcp` SDK's server, tests/mcp_servers.py) on loopback,
streamable HTTP and SSE, and a real `rostra serve` whose scripted model calls their tools.

The script (tests/data/mcp.jsonl) writes calls in the hermes format as Qwen2.5/Hermes models emit them
(`<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`, the format their chat templates teach), and
answers once the tool's result is the last message (role "tool").
"""

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from servers import RunningServer, free_port
from test_api_responses import check_response, client_for, raw_stream
from conftest import scripted

MODEL = "scripted"
MCP_SERVERS = Path(__file__).parent / "mcp_servers.py"


class McpProcess:
    """tests/mcp_servers.py in its own process, on a free loopback port."""

    def __init__(self, transport: str, server: str = "calculator"):
        self.port = free_port()
        self.process = subprocess.Popen([sys.executable, str(MCP_SERVERS), str(self.port), transport, server],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{self.port}/" + ("sse" if transport == "sse" else "mcp")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                httpx.get(f"http://127.0.0.1:{self.port}/", timeout=1)
                return
            except httpx.HTTPError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("the MCP server did not start")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


@pytest.fixture(scope="module")
def mcp_http():
    server = McpProcess("streamable-http")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def mcp_sse():
    server = McpProcess("sse")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def rostra(mcp_http):
    server = RunningServer(list(scripted("mcp.jsonl", "--tool-call-parser", "hermes", "--mcp-allow", "127.0.0.1",
                                         "--tool-server", f"calc-here={mcp_http.url}", "--mcp-timeout", "10",
                                         "--mcp-max-output", "40")))
    yield server
    server.stop()


def mcp_tool(url: str, **fields) -> dict:
    return {"type": "mcp", "server_label": "calc", "server_url": url, "require_approval": "never", **fields}


def post(server, body: dict) -> httpx.Response:
    return httpx.post(f"{server.base_url}/v1/responses", json={"model": MODEL, **body}, timeout=60)


def without_ids(output: list[dict]) -> list[dict]:
    return [{key: value for key, value in item.items() if key != "id"} for item in output]


def test_mcp_call_streamed_and_not(rostra, mcp_http):
    body = {"input": "add 2 and 3", "tools": [mcp_tool(mcp_http.url)]}
    created = check_response(post(rostra, body).json())
    assert [item["type"] for item in created["output"]] == ["mcp_list_tools", "message", "mcp_call", "message"]
    listing, _, call, answer = created["output"]
    assert [tool["name"] for tool in listing["tools"]] == ["add", "divide", "shout", "slow", "count", "whoami"]
    assert listing["tools"][0]["input_schema"]["properties"]["a"]["type"] == "integer"
    assert (call["name"], json.loads(call["arguments"]), call["output"], call["error"], call["status"]) == \
        ("add", {"a": 2, "b": 3}, "5", None, "completed")
    assert answer["content"][0]["text"] == "The sum is 5."
    assert created["usage"]["output_tokens"] > 0 and created["status"] == "completed"
    stored = check_response(httpx.get(f"{rostra.base_url}/v1/responses/{created['id']}").json())
    assert stored["output"] == created["output"]

    events = raw_stream(rostra.base_url, {"model": MODEL, **body})
    kinds = [event["type"] for event in events]
    assert kinds[2:6] == ["response.output_item.added", "response.mcp_list_tools.in_progress",
                          "response.mcp_list_tools.completed", "response.output_item.done"]
    for kind in ("response.mcp_call.in_progress", "response.mcp_call_arguments.delta",
                 "response.mcp_call_arguments.done", "response.mcp_call.completed"):
        assert kind in kinds
    final = check_response(events[-1]["response"])
    assert without_ids(final["output"]) == without_ids(created["output"])  # the stream folds into the response
    # The SDK reads it too.
    sdk = client_for(rostra).responses.create(model=MODEL, **body)
    assert [item.type for item in sdk.output] == ["mcp_list_tools", "message", "mcp_call", "message"]
    assert sdk.output_text.endswith("The sum is 5.")


def test_sse_transport_and_tool_server_label(rostra, mcp_sse):
    created = check_response(post(rostra, {"input": "add 2 and 3", "tools": [mcp_tool(mcp_sse.url)]}).json())
    assert created["output"][2]["output"] == "5"
    # A server configured on rostra (--tool-server calc-here=URL), enabled by its label alone.
    by_label = {"type": "mcp", "server_label": "calc-here", "require_approval": "never"}
    created = check_response(post(rostra, {"input": "add 2 and 3", "tools": [by_label]}).json())
    assert created["output"][2]["server_label"] == "calc-here" and created["output"][2]["output"] == "5"


def test_tool_error_and_unreachable_server(rostra, mcp_http):
    created = check_response(post(rostra, {"input": "divide 1 by 0", "tools": [mcp_tool(mcp_http.url)]}).json())
    call = created["output"][1]
    assert call["status"] == "failed" and call["output"] is None
    assert call["error"] == {"type": "mcp_tool_execution_error",
                             "content": [{"type": "text", "text": "Error executing tool divide: division by zero"}]}
    assert created["output"][-1]["content"][0]["text"] == "I cannot divide by zero."
    events = raw_stream(rostra.base_url, {"model": MODEL, "input": "divide 1 by 0", "tools": [mcp_tool(mcp_http.url)]})
    assert "response.mcp_call.failed" in [event["type"] for event in events]

    dead = f"http://127.0.0.1:{free_port()}/mcp"  # nothing listens there
    created = check_response(post(rostra, {"input": "add 2 and 3", "tools": [mcp_tool(dead)]}).json())
    assert created["status"] == "completed"
    assert created["output"][0]["type"] == "mcp_list_tools" and "ConnectError" in created["output"][0]["error"]
    events = raw_stream(rostra.base_url, {"model": MODEL, "input": "add 2 and 3", "tools": [mcp_tool(dead)]})
    assert "response.mcp_list_tools.failed" in [event["type"] for event in events]

    # Listed earlier in the chain (the listing is reused), unreachable when called: an mcp_call with an error.
    first = post(rostra, {"input": "who am i", "tools": [mcp_tool(mcp_http.url)]}).json()
    second = check_response(post(rostra, {"input": "add 2 and 3", "previous_response_id": first["id"],
                                          "tools": [mcp_tool(dead)]}).json())
    assert [item["type"] for item in second["output"]] == ["message", "mcp_call", "message"]
    assert second["output"][1]["error"]["type"] == "http_error" and second["output"][1]["error"]["code"] == 502
    assert second["output"][2]["content"][0]["text"] == "The tool failed."
    assert httpx.get(f"{rostra.base_url}/health").status_code == 200


def test_approval_request_then_approve_or_deny(rostra, mcp_http):
    tool = mcp_tool(mcp_http.url, require_approval="always")
    first = check_response(post(rostra, {"input": "add 2 and 3", "tools": [tool]}).json())
    assert [item["type"] for item in first["output"]] == ["mcp_list_tools", "message", "mcp_approval_request"]
    streamed = raw_stream(rostra.base_url, {"model": MODEL, "input": "add 2 and 3", "tools": [tool]})
    sent = [event["item"]["type"] for event in streamed if event["type"].startswith("response.output_item.")]
    assert sent[-2:] == ["mcp_approval_request", "mcp_approval_request"]  # added and done, whole
    assert without_ids(streamed[-1]["response"]["output"]) == without_ids(first["output"])
    request = first["output"][2]
    assert (request["name"], json.loads(request["arguments"]), request["server_label"]) == \
        ("add", {"a": 2, "b": 3}, "calc")
    approve = {"type": "mcp_approval_response", "approval_request_id": request["id"], "approve": True}
    events = raw_stream(rostra.base_url, {"model": MODEL, "previous_response_id": first["id"], "tools": [tool],
                                          "input": [approve]})
    second = check_response(events[-1]["response"])
    assert [item["type"] for item in second["output"]] == ["mcp_call", "message"]  # the listing is reused
    assert second["output"][0]["approval_request_id"] == request["id"] and second["output"][0]["output"] == "5"
    assert second["output"][1]["content"][0]["text"] == "The sum is 5."
    items = httpx.get(f"{rostra.base_url}/v1/responses/{second['id']}/input_items").json()
    assert items["data"][0]["type"] == "mcp_approval_response"

    deny = {**approve, "approve": False, "reason": "not now"}
    third = check_response(post(rostra, {"previous_response_id": first["id"], "tools": [tool],
                                         "input": [deny]}).json())
    assert [item["type"] for item in third["output"]] == ["message"]
    assert third["output"][0]["content"][0]["text"] == "Understood: I did not run it."
    unknown = post(rostra, {"previous_response_id": first["id"], "tools": [tool],
                            "input": [{**approve, "approval_request_id": "mcpr_nope"}]})
    assert unknown.status_code == 400 and unknown.json()["error"]["param"] == "input[0].approval_request_id"


def test_approved_calls_run_as_the_first_step_of_an_accepted_turn(rostra, mcp_http):
    """Issue 21: approved calls ran while the request was prepared, before it was validated or stored: a refused
    request still ran the (side-effecting) tool, and its retry ran it again; max_tool_calls did not count them.
    The calls come back as a stateless client sends them (tests/mcp_servers.py `count` counts its runs)."""
    tool = mcp_tool(mcp_http.url, require_approval="always")
    requests = [{"type": "mcp_approval_request", "id": f"mcpr_count{n}", "server_label": "calc", "name": "count",
                 "arguments": "{}"} for n in (1, 2)]
    approvals = [{"type": "mcp_approval_response", "approval_request_id": request["id"], "approve": True}
                 for request in requests]
    body = {"store": False, "tools": [tool], "input": [{"role": "user", "content": "count"}, requests[0],
                                                       approvals[0]]}
    refused = post(rostra, {**body, "tool_choice": {"type": "function", "name": "nope"}})
    # named as the Responses request spells it (its tool_choice is {"type": "function", "name"})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "tool_choice.name"
    ran = check_response(post(rostra, body).json())
    calls = [item for item in ran["output"] if item["type"] == "mcp_call"]
    assert [call["output"] for call in calls] == ["1"]  # its first run: the refused request ran nothing
    assert ran["output"][-1]["content"][0]["text"] == "Counted."

    limited = check_response(post(rostra, {**body, "max_tool_calls": 1, "input": [
        {"role": "user", "content": "count"}, *requests, *approvals]}).json())
    calls = [item for item in limited["output"] if item["type"] == "mcp_call"]
    assert [(call["status"], call["output"]) for call in calls] == [("completed", "2"), ("failed", None)]
    assert "max_tool_calls" in calls[1]["error"]["content"][0]["text"]


def test_an_approved_call_that_ran_keeps_its_result_when_the_next_turn_is_refused(rostra, mcp_http):
    """Issue 33: an approved call ran, then the model turn that reads its result was refused (here: the result makes
    the prompt longer than the context); the call's result was lost with the response, and the client's retry ran
    the (side-effecting) tool again. Its result is kept: the failed response shows the call with its output, and a
    retry of the same request reuses that run (tests/mcp_servers.py `count` counts its runs)."""
    tool = mcp_tool(mcp_http.url, require_approval="always")

    def body(name: str) -> dict:
        request = {"type": "mcp_approval_request", "id": f"mcpr_{name}", "server_label": "calc", "name": "count",
                   "arguments": "{}"}
        return {"tools": [tool], "input": [{"role": "user", "content": "count"}, request,
                                           {"type": "mcp_approval_response", "approval_request_id": request["id"],
                                            "approve": True}]}

    # The prompt of the turn that reads the result, measured on a roomy server, is the tight server's whole
    # context: the turn before the call runs fits (the call is in its prompt, without the result), this one not.
    measured = check_response(post(rostra, body("measure")).json())
    tight = RunningServer(list(scripted("mcp.jsonl", "--tool-call-parser", "hermes", "--mcp-allow", "127.0.0.1",
                                        "--max-model-len", str(measured["usage"]["input_tokens"]))))
    try:
        events = raw_stream(tight.base_url, {"model": MODEL, **body("retried")})
        failed = events[-1]["response"]
        assert events[-1]["type"] == "response.failed", failed
        calls = [item for item in failed["output"] if item["type"] == "mcp_call"]
        assert [call["status"] for call in calls] == ["completed"] and calls[0]["output"].isdigit()
        ran = int(calls[0]["output"])
        retry = post(tight, body("retried"))  # the same request: the kept result makes its prompt too long at once
        assert retry.status_code == 400, retry.text
    finally:
        tight.stop()
    after = check_response(post(rostra, body("after")).json())
    assert [item["output"] for item in after["output"] if item["type"] == "mcp_call"] == [str(ran + 1)]


def test_policy_headers_and_output_cap(rostra, mcp_http):
    refused = post(rostra, {"input": "add 2 and 3", "tools": [mcp_tool("http://example.com/mcp")]})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "tools[0].server_url"
    unknown = post(rostra, {"input": "x", "tools": [{"type": "mcp", "server_label": "nobody"}]})
    assert unknown.status_code == 400 and unknown.json()["error"]["param"] == "tools[0].server_url"
    tool = mcp_tool(mcp_http.url, headers={"X-Caller": "rostra-test"})
    created = check_response(post(rostra, {"input": "who am i", "tools": [tool]}).json())
    assert created["output"][1]["output"] == "rostra-test"  # the header reached the MCP server ...
    assert created["tools"][0]["headers"] == {"X-Caller": "<redacted>"}  # ... and is neither echoed nor stored
    stored = httpx.get(f"{rostra.base_url}/v1/responses/{created['id']}").json()
    assert "rostra-test\"" not in json.dumps(stored["tools"]) and "rostra-test" not in rostra.log_path.read_text()
    shouted = check_response(post(rostra, {"input": "shout", "tools": [mcp_tool(mcp_http.url)]}).json())
    assert shouted["output"][1]["output"] == "ab" * 20 + "\n[output truncated: 60 more characters]"


def test_max_tool_calls_and_function_calls_beside(rostra, mcp_http):
    created = check_response(post(rostra, {"input": "keep adding", "max_tool_calls": 3,
                                           "tools": [mcp_tool(mcp_http.url)]}).json())
    calls = [item for item in created["output"] if item["type"] == "mcp_call"]
    assert len(calls) == 3 and all(call["output"] == "42" for call in calls)
    assert created["output"][-1]["type"] == "message" and created["max_tool_calls"] == 3
    weather = {"type": "function", "name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}
    mixed = check_response(post(rostra, {"input": "add and weather",
                                         "tools": [mcp_tool(mcp_http.url), weather]}).json())
    # The MCP call is run; the function call is the client's: the response ends with it.
    kinds = [item["type"] for item in mixed["output"] if item["type"] != "message"]
    assert kinds == ["mcp_list_tools", "mcp_call", "function_call"] and mixed["output"][-1]["name"] == "get_weather"
    assert mixed["output"][1]["output"] == "2"


def test_background_and_stateless_replay(rostra, mcp_http):
    body = {"input": "add 2 and 3", "tools": [mcp_tool(mcp_http.url)]}
    started = post(rostra, {**body, "background": True}).json()
    for _ in range(100):
        done = httpx.get(f"{rostra.base_url}/v1/responses/{started['id']}").json()
        if done["status"] not in ("queued", "in_progress"):
            break
        time.sleep(0.1)
    check_response(done)
    assert done["status"] == "completed" and done["output"][2]["output"] == "5"
    replay = raw_stream(rostra.base_url, {}, path=f"/v1/responses/{started['id']}?stream=true", method="GET")
    assert "response.mcp_call.completed" in [event["type"] for event in replay]
    # A client that stores nothing sends the items back itself: the listing is reused from them.
    first = post(rostra, {**body, "store": False, "tools": [mcp_tool(mcp_http.url, require_approval="always")]}).json()
    request = first["output"][-1]
    again = check_response(post(rostra, {"store": False, "tools": [mcp_tool(mcp_http.url, require_approval="always")],
                                         "input": [{"role": "user", "content": "add 2 and 3"}, *first["output"],
                                                   {"type": "mcp_approval_response", "approve": True,
                                                    "approval_request_id": request["id"]}]}).json())
    assert [item["type"] for item in again["output"]] == ["mcp_call", "message"]


# -- the OpenAI Agents SDK: HostedMCPTool with the Responses model, against rostra -------------------------------
def hosted_agent(server, url: str, **tool_fields):
    from agents import Agent, HostedMCPTool, OpenAIResponsesModel, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)  # the SDK would upload traces to OpenAI otherwise
    client = AsyncOpenAI(base_url=server.v1, api_key="unused", max_retries=0)
    tool = HostedMCPTool(tool_config={"type": "mcp", "server_label": "calc", "server_url": url, **tool_fields},
                         on_approval_request=lambda request: {"approve": request.data.name == "add"})
    return client, Agent(name="calculator", instructions="Use the calculator.", tools=[tool],
                         model=OpenAIResponsesModel(model=MODEL, openai_client=client))


def check_agent_run(result, approval: str) -> None:
    from agents import MCPApprovalRequestItem, MCPApprovalResponseItem, MCPListToolsItem, ToolCallItem

    assert result.final_output == "The sum is 5."
    asked = [type(item) for item in result.new_items if isinstance(item, (MCPApprovalRequestItem,
                                                                            MCPApprovalResponseItem))]
    assert asked == ([MCPApprovalRequestItem, MCPApprovalResponseItem] if approval == "always" else [])
    assert any(isinstance(item, MCPListToolsItem) for item in result.new_items)
    calls = [item.raw_item for item in result.new_items if isinstance(item, ToolCallItem)]
    assert [(call.type, call.name, call.output) for call in calls] == [("mcp_call", "add", "5")]


@pytest.mark.parametrize("approval", ["never", "always"])
def test_agents_sdk_hosted_mcp_tool(rostra, mcp_http, approval):
    import asyncio

    from agents import Runner

    async def both():  # one event loop: the SDK's client keeps its connections in it
        client, agent = hosted_agent(rostra, mcp_http.url, require_approval=approval)
        try:
            plain = await Runner.run(agent, "add 2 and 3")
            result = Runner.run_streamed(agent, "add 2 and 3")
            kinds = [event.type async for event in result.stream_events()]
        finally:  # closed in this loop: left to the garbage collector, it would close in another test's loop
            await client.close()
        return plain, result, kinds

    plain, result, kinds = asyncio.run(both())
    check_agent_run(plain, approval)
    check_agent_run(result, approval)
    assert "raw_response_event" in kinds and "run_item_stream_event" in kinds


def test_through_the_gateway_engine_and_a_call_timeout(rostra, mcp_http):
    """The loop is engine-independent: rostra as a gateway (--engine remote) in front of the scripted rostra,
    whose tool calls come back through the relay. A call slower than --mcp-timeout is a 504 http_error."""
    # 10 s: the slow tool sleeps 30; a timeout of 1 s also timed out listing the tools on a busy machine, so that
    # no tool was offered and the call came back as text (seen under load 12-17).
    gateway = RunningServer(["--engine", "remote", "--upstream", f"{rostra.v1},model=scripted", "--mcp-allow",
                             "127.0.0.1", "--mcp-timeout", "10"])
    try:
        body = {"input": "add 2 and 3", "tools": [mcp_tool(mcp_http.url)]}
        created = check_response(post(gateway, body).json())
        assert [item["type"] for item in created["output"]] == ["mcp_list_tools", "message", "mcp_call", "message"]
        assert created["output"][2]["output"] == "5" and created["output"][3]["content"][0]["text"] == "The sum is 5."
        events = raw_stream(gateway.base_url, {"model": MODEL, **body})
        assert without_ids(events[-1]["response"]["output"]) == without_ids(created["output"])
        slow = check_response(post(gateway, {"input": "be slow", "tools": [mcp_tool(mcp_http.url)]}).json())
        assert slow["output"][1]["error"] == {"type": "http_error", "code": 504,
                                              "message": "the MCP server did not answer in 10 s"}
        assert slow["output"][-1]["content"][0]["text"] == "The tool failed."
    finally:
        gateway.stop()


def test_allowed_tools_and_approval_filters(rostra, mcp_http):
    only_divide = mcp_tool(mcp_http.url, allowed_tools=["divide"])
    created = check_response(post(rostra, {"input": "add 2 and 3", "tools": [only_divide]}).json())
    # add is not offered: the model's call to it is no tool call, and nothing runs.
    assert [item["type"] for item in created["output"]] == ["mcp_list_tools", "message"]
    add_needs_none = mcp_tool(mcp_http.url, require_approval={"never": {"tool_names": ["add"]}})
    ran = check_response(post(rostra, {"input": "add 2 and 3", "tools": [add_needs_none]}).json())
    assert ran["output"][2]["type"] == "mcp_call" and ran["output"][2]["output"] == "5"
    others_free = mcp_tool(mcp_http.url, require_approval={"never": {"tool_names": ["divide"]}})
    asked = check_response(post(rostra, {"input": "add 2 and 3", "tools": [others_free]}).json())
    assert asked["output"][-1]["type"] == "mcp_approval_request"
    # A forced call (the scripted model writes just the arguments, as constrained decoding makes a model do);
    # the turns after it are free, so the model answers.
    forced = check_response(post(rostra, {"input": "add, forced", "tools": [mcp_tool(mcp_http.url)],
                                          "tool_choice": {"type": "mcp", "server_label": "calc", "name": "add"}}).json())
    assert [item["type"] for item in forced["output"]] == ["mcp_list_tools", "mcp_call", "message"]
    assert forced["output"][1]["output"] == "5" and forced["tool_choice"]["type"] == "mcp"


def test_policy_and_tool_server_flags():
    from rostra.api.responses.mcp.tools import McpPolicy, parse_tool_servers

    policy = McpPolicy(allow=("tools.example", "127.0.0.1:9000"))
    assert policy.allows("https://tools.example/mcp") and policy.allows("http://TOOLS.example:8080/sse")
    assert policy.allows("http://127.0.0.1:9000/mcp") and not policy.allows("http://127.0.0.1:9001/mcp")
    assert not policy.allows("file:///etc/passwd") and not policy.allows("http://evil.example/mcp")
    assert not McpPolicy().allows("http://127.0.0.1/mcp")  # nothing is allowed unless the operator says so
    assert McpPolicy(allow=("*",)).allows("https://anywhere.example/mcp")
    # Issue 42: an entry may be a whole URL, compared with the server_url normalized (scheme and host in lower
    # case, the default port spelled out, dot segments resolved): that endpoint and the paths under it only,
    # not every port, scheme and path of its host.
    exact = McpPolicy(allow=("https://Tools.example/mcp", "http://[::1]:9000"))
    assert exact.allows("https://tools.example/mcp") and exact.allows("HTTPS://TOOLS.EXAMPLE:443/mcp/")
    assert exact.allows("https://tools.example/mcp/sse") and exact.allows("http://[::1]:9000/anything")
    for refused in ["http://tools.example/mcp", "https://tools.example:8443/mcp", "https://tools.example/admin",
                    "https://tools.example/mcp/../admin", "https://tools.example/mcp/%2e%2e/admin",
                    "https://tools.example/mcpx", "https://evil.example/mcp", "http://[::1]:9001/",
                    "https://tools.example.evil.example/mcp"]:
        assert not exact.allows(refused), refused
    assert McpPolicy(allow=("[::1]:9000",)).allows("http://[::1]:9000/mcp")  # a bracketed IPv6 host:port
    assert parse_tool_servers(["python=http://127.0.0.1:1/mcp,search=https://s.example/sse"]) == {
        "python": "http://127.0.0.1:1/mcp", "search": "https://s.example/sse"}
    for bad in ["python", "=http://x/mcp", "python=ftp://x"]:
        with pytest.raises(ValueError):
            parse_tool_servers([bad])


def test_bad_mcp_input_is_a_400(rostra, mcp_http):
    tool = mcp_tool(mcp_http.url)
    cases = [
        ({"input": [{"type": "mcp_approval_response"}], "tools": [tool]}, "input[0]"),
        ({"input": [{"type": "mcp_list_tools", "server_label": "calc", "tools": [1]}], "tools": [tool]}, "input[0]"),
        ({"input": [{"type": "mcp_call", "server_label": "calc", "name": "add"}], "tools": [tool]}, "input[0]"),
        ({"input": "x", "tools": [{"type": "mcp", "server_label": ""}]}, "tools[0].server_label"),
        ({"input": "x", "tools": [tool, tool]}, "tools[1].server_label"),
        ({"input": "x", "tools": [mcp_tool(mcp_http.url, headers={"X-Caller": 1})]}, "tools[0].headers"),
        ({"input": "x", "tools": [mcp_tool("ftp://127.0.0.1/mcp")]}, "tools[0].server_url"),
        ({"input": "x", "tools": [tool], "max_tool_calls": 0}, "max_tool_calls"),
    ]
    for body, param in cases:
        response = post(rostra, body)
        assert response.status_code == 400, (body, response.text)
        assert response.json()["error"]["param"] == param, (body, response.json())
    assert post(rostra, {"input": "add 2 and 3", "tools": [tool]}).status_code == 200  # still serving
