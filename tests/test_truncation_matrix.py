"""The truncation matrix: every tool-call format x Chat, Responses and Messages x stream and non-stream, with
the output cut by max_tokens at every token of the call. A cut call is never reported complete (Chat `length`,
Responses `incomplete` with its call items `incomplete`, Messages `max_tokens`), no markup reaches the text, and
each stream folds to its non-streamed answer. The whole output is the one complete call."""

import copy
import json

import pytest

from harness import MODEL, InProcessServer
from rostra.parsing.tools import deepseek_v3, kimi_k2
from wire import fold_chat_stream

PREFACE = "Let me check."
ARGUMENTS = '{"city": "Oslo", "days": 3}'
CALL = {"name": "get_weather", "arguments": {"city": "Oslo", "days": 3}}

FORMATS = {
    "hermes": f'{PREFACE}\n<tool_call>\n{{"name": "get_weather", "arguments": {ARGUMENTS}}}\n</tool_call>',
    "qwen3_coder": (f"{PREFACE}\n<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
                    "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"),
    "mistral": f"{PREFACE}[TOOL_CALLS]get_weather{ARGUMENTS}",
    "llama3_json": f'<|python_tag|>{{"name": "get_weather", "parameters": {ARGUMENTS}}}',
    "pythonic": '[get_weather(city="Oslo", days=3)]',
    "granite": f'<|tool_call|>[{{"name": "get_weather", "arguments": {ARGUMENTS}}}]',
    "json": f'{PREFACE}\n```json\n{{"name": "get_weather", "arguments": {ARGUMENTS}}}\n```',
    "deepseek_v3": (f"{PREFACE}{deepseek_v3.CALLS_BEGIN}{deepseek_v3.CALL_BEGIN}function{deepseek_v3.SEP}get_weather\n"
                    f"```json\n{ARGUMENTS}\n```{deepseek_v3.CALL_END}{deepseek_v3.CALLS_END}"),
    "deepseek_v32": (f'{PREFACE}\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n'
                     '<｜DSML｜parameter name="city" string="true">Oslo</｜DSML｜parameter>\n'
                     '<｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
                     '</｜DSML｜function_calls>'),
    "nemotron_json": f'{PREFACE}\n\n<TOOLCALL>[{{"name": "get_weather", "arguments": {ARGUMENTS}}}]</TOOLCALL>',
    "phi4_mini_json": f'{PREFACE}\nfunctools[{{"name": "get_weather", "arguments": {ARGUMENTS}}}]',
    "kimi_k2": (f"{PREFACE}{kimi_k2.SECTION_BEGIN}{kimi_k2.CALL_BEGIN}functions.get_weather:0"
                f"{kimi_k2.ARGUMENTS_BEGIN}{ARGUMENTS}{kimi_k2.CALL_END}{kimi_k2.SECTION_END}"),
    "glm45": (f"{PREFACE}\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n"
              "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>"),
    "minimax_m2": (f'{PREFACE}\n<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Oslo'
                   '</parameter>\n<parameter name="days">3</parameter>\n</invoke>\n</minimax:tool_call>'),
    "seed_oss": (f"{PREFACE}\n<seed:tool_call>\n<function=get_weather>\n<parameter=city>Oslo</parameter>\n"
                 "<parameter=days>3</parameter>\n</function>\n</seed:tool_call>"),
    "longcat": f'{PREFACE}\n<longcat_tool_call>{{"name": "get_weather", "arguments": {ARGUMENTS}}}</longcat_tool_call>',
    "olmo3": f'{PREFACE}\n<function_calls>get_weather(city="Oslo", days=3)</function_calls>',
    "step3": (f'{PREFACE}\n<｜tool_calls_begin｜><｜tool_call_begin｜><steptml:invoke name="get_weather">'
              '<steptml:parameter name="city">Oslo</steptml:parameter><steptml:parameter name="days">3'
              '</steptml:parameter></steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>'),
}
FORMATS.update({  # issue 43, second round
    "command_r": (f'{PREFACE}<|START_ACTION|>[\n    {{"tool_call_id": "0", "tool_name": "get_weather", "parameters": '
                  f"{ARGUMENTS}}}\n]<|END_ACTION|>"),
    "functionary_v31": f"{PREFACE}<function=get_weather>{ARGUMENTS}</function>",
    # (the output starts with its recipient: the prompt wrote `>>>`; a text part would start `all\n`, no preface)
    "functionary_v32": f"get_weather\n{ARGUMENTS}",
    "hunyuan_a13b": f'{PREFACE}\n<tool_calls>[{{"name": "get_weather", "arguments": {ARGUMENTS}}}]</tool_calls>',
    "internlm2": (f'{PREFACE}<|action_start|><|plugin|>\n{{"name": "get_weather", "parameters": {ARGUMENTS}}}'
                  "<|action_end|>"),
    "xlam": f'{PREFACE}\n```json\n[{{"name": "get_weather", "arguments": {ARGUMENTS}}}]\n```',
})
FORMATS.update({  # issue 43, third round
    "ernie45": f'{PREFACE}\n<tool_call>\n{{"name": "get_weather", "arguments": {ARGUMENTS}}}\n</tool_call>\n',
    "functiongemma": f"{PREFACE}<start_function_call>call:get_weather{{city:<escape>Oslo<escape>,days:3}}"
                     "<end_function_call>",
    "gemma4": f'{PREFACE}<|tool_call>call:get_weather{{city:<|"|>Oslo<|"|>,days:3}}<tool_call|>',
    "jamba": f'{PREFACE}<tool_calls>[\n{{"name": "get_weather", "arguments": {ARGUMENTS}}}\n]</tool_calls>',
})
TOOL = {"name": "get_weather", "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                       "required": ["city"]}}
ASK = "call the tool"


def test_every_format_is_in_the_matrix():
    from rostra.parsing.tools import REGISTRY

    assert set(REGISTRY) == set(FORMATS)


def text_is_no_markup(text: str, output: str) -> None:
    """What reaches the answer is (a piece of) the preface: not one character of the call's markup."""
    head = output[: output.index(PREFACE) + len(PREFACE)] if PREFACE in output else ""
    assert head.startswith(text.strip()), f"markup in the text: {text!r}"


async def sse(server: InProcessServer, path: str, body: dict) -> list[dict]:
    response = await server.client.post(path, json={**body, "stream": True})
    assert response.status_code == 200, response.text
    frames = [line[len("data: "):] for line in response.text.splitlines() if line.startswith("data: ")]
    return [json.loads(frame) for frame in frames if frame != "[DONE]"]


async def answer(server: InProcessServer, path: str, body: dict) -> dict:
    response = await server.client.post(path, json=body)
    assert response.status_code == 200, response.text
    return response.json()


def without_ids(value):
    """A body without what differs between two runs by construction (ids, timestamps)."""
    if isinstance(value, dict):
        return {key: without_ids(item) for key, item in value.items()
                if key not in ("id", "call_id", "created_at", "completed_at", "sequence_number")}
    if isinstance(value, list):
        return [without_ids(item) for item in value]
    return value


async def chat(server: InProcessServer, output: str, budget: int, whole: bool) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": ASK}], "max_tokens": budget,
            "tools": [{"type": "function", "function": TOOL}]}
    message = (await answer(server, "/v1/chat/completions", body))["choices"][0]
    folded = fold_chat_stream(await sse(server, "/v1/chat/completions", body))[0]
    calls = [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
             for c in message["message"].get("tool_calls") or []]
    assert folded["finish_reason"] == message["finish_reason"]
    assert folded["content"] == (message["message"]["content"] or "")
    assert [{"name": c["name"], "arguments": c["arguments"]} for c in folded["tool_calls"]] == calls
    if whole:
        assert message["finish_reason"] == "tool_calls" and [json.loads(c["arguments"]) for c in calls] == [
            CALL["arguments"]]
        return
    assert message["finish_reason"] == "length", message
    text_is_no_markup(folded["content"], output)


async def responses(server: InProcessServer, output: str, budget: int, whole: bool) -> None:
    body = {"model": MODEL, "input": ASK, "max_output_tokens": budget, "store": False,
            "tools": [{"type": "function", **TOOL}]}
    response = await answer(server, "/v1/responses", body)
    events = await sse(server, "/v1/responses", body)
    assert without_ids(events[-1]["response"]) == without_ids(response)
    arguments = "".join(e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta")
    calls = [item for item in response["output"] if item["type"] == "function_call"]
    assert arguments == "".join(item["arguments"] for item in calls)
    if whole:
        assert response["status"] == "completed" and [json.loads(c["arguments"]) for c in calls] == [
            CALL["arguments"]]
        assert all(item["status"] == "completed" for item in response["output"])
        return
    assert response["status"] == "incomplete" and response["incomplete_details"] == {"reason": "max_output_tokens"}
    for item in calls:  # `completed` only for a call written out whole (just its end marker cut)
        assert item["status"] == "incomplete" or json.loads(item["arguments"]) == CALL["arguments"], item
    for item in response["output"]:
        if item["type"] == "message":
            text_is_no_markup(item["content"][0]["text"], output)


def fold_message(events: list[dict]) -> dict:
    from anthropic.lib.streaming._messages import accumulate_event
    from anthropic.types import RawMessageStreamEvent
    from pydantic import TypeAdapter

    adapter, snapshot, buffers = TypeAdapter(RawMessageStreamEvent), None, {}
    for event in events:
        if event["type"] != "ping":
            snapshot = accumulate_event(event=adapter.validate_python(event), current_snapshot=snapshot,
                                        json_bufs=buffers)
    return snapshot.model_dump(mode="json", exclude_none=True)


async def messages(server: InProcessServer, output: str, budget: int, whole: bool) -> None:
    body = {"model": MODEL, "max_tokens": budget, "messages": [{"role": "user", "content": ASK}],
            "tools": [{"name": TOOL["name"], "description": TOOL["description"], "input_schema": TOOL["parameters"]}]}
    message = await answer(server, "/v1/messages", body)
    folded = fold_message(await sse(server, "/v1/messages", body))
    comparable = copy.deepcopy(message)
    for key in ("usage",):  # the stream's first usage is the prompt's; the SDK keeps the final counts
        comparable.pop(key), folded.pop(key, None)
    assert without_ids(folded) == without_ids({k: v for k, v in comparable.items() if v is not None})
    uses = [block["input"] for block in message["content"] if block["type"] == "tool_use"]
    if whole:
        assert message["stop_reason"] == "tool_use" and uses == [CALL["arguments"]]
        return
    assert message["stop_reason"] == "max_tokens", message
    for block in message["content"]:
        if block["type"] == "text":
            text_is_no_markup(block["text"], output)


@pytest.mark.parametrize("parser", sorted(FORMATS))
async def test_a_call_cut_at_every_token_is_never_reported_complete(tmp_path, parser):
    output = FORMATS[parser]
    script = [{"match": ASK, "output": output}]
    async with InProcessServer(tmp_path, script, tool_call_parser=parser) as server:
        tokens = len(server.engine.tokenizer.encode(output))
        apis = (chat, responses, messages)
        for budget in range(1, tokens + 1):
            whole = budget == tokens
            # Each cut through one API in turn (the parsing behind the three is one; what differs is how each
            # renders a cut call), the whole output through all three: every API meets a third of the cuts, at
            # every place in the call's markup over the formats (all three at every cut cost minutes of CI's time).
            for api in apis if whole else (apis[budget % len(apis)],):
                try:
                    await api(server, output, budget, whole)
                except AssertionError as failure:
                    raise AssertionError(f"{parser}, {api.__name__}, cut at token {budget} of {tokens}") from failure


PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch"
CUSTOM_OUTPUT = f"{PREFACE}\n<tool_call>\n" + json.dumps({"name": "apply_patch", "arguments": {"input": PATCH}}) + \
    "\n</tool_call>"


async def test_a_custom_tool_input_cut_at_every_token_leaves_the_response_incomplete(tmp_path):
    body = {"model": MODEL, "input": ASK, "store": False,
            "tools": [{"type": "custom", "name": "apply_patch", "description": "Apply a patch."}]}
    async with InProcessServer(tmp_path, [{"match": ASK, "output": CUSTOM_OUTPUT}], tool_call_parser="hermes") as server:
        tokens = len(server.engine.tokenizer.encode(CUSTOM_OUTPUT))
        for budget in range(1, tokens + 1):
            request = {**body, "max_output_tokens": budget}
            response = await answer(server, "/v1/responses", request)
            events = await sse(server, "/v1/responses", request)
            assert without_ids(events[-1]["response"]) == without_ids(response), budget
            calls = [item for item in response["output"] if item["type"] == "custom_tool_call"]
            if budget == tokens:
                assert response["status"] == "completed" and [c["input"] for c in calls] == [PATCH]
                continue
            assert response["status"] == "incomplete", (budget, response["output"])
            for item in response["output"]:
                if item["type"] == "message":
                    text_is_no_markup(item["content"][0]["text"], CUSTOM_OUTPUT)
