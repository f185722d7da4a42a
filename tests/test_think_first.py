"""Think, then constrain (rostra/serving/think_first.py), on the scripted engine made to enforce constraints.

The scripts follow what reasoning models write: Qwen3 opens `<think>` itself and ends `</think>` followed by a
blank line (its chat template's generation prompt is `<|im_start|>assistant\\n`); DeepSeek-R1's template since
its 0528 release ends the prompt with `<think>\\n`, so the output starts inside the thinking and only closes it.
The scripted engine picks, under a JSON schema, a line whose output obeys it: the constrained continuation
gets the answer line, the free generation the thinking line. The engine records every generation it is
asked for, so the tests see the two parts: the free one without a constraint, the second continuing the
prompt with the thinking's own tokens.
"""

import json

import jsonschema
import pytest

from harness import InProcessServer
from test_api_tools import TOOLS
from wire import check, fold_chat_stream

MODEL = "scripted"
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
        "additionalProperties": False}
CITY_FORMAT = {"type": "json_schema", "json_schema": {"name": "city", "schema": CITY}}
QWEN3 = [
    {"match": "Name a city",
     "output": "<think>\nThe user wants a city. Paris is one.\n</think>\n\n{\"city\": \"Paris\"}"},
    {"match": "Name a city", "output": "{\"city\": \"Paris\"}"},
    {"match": "Ponder", "output": "<think>\n" + "I keep thinking about it. " * 40},
    {"match": "Ponder", "output": "{\"city\": \"Oslo\"}"},
    {"match": "Quick", "output": "Sure! Here is one: Rome."},
    {"match": "Quick", "output": "{\"city\": \"Rome\"}"},
    {"match": "Weather", "output": "<think>\nI need the weather tool.\n</think>\n\n"},
    {"match": "Weather", "output": "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}]"},
]
DEEPSEEK_R1 = [
    {"match": "Name a city",
     "output": "Okay, the user wants a city. Let me pick Paris.\n</think>\n\n{\"city\": \"Paris\"}"},
    {"match": "Name a city", "output": "{\"city\": \"Paris\"}"},
]


class Recording:
    """The scripted engine, enforcing constraints (as llama.cpp does), recording each generation it runs."""

    def __init__(self, engine):
        self.calls: list[tuple[list[int], object]] = []
        engine.enforces_constraints = True
        generate = engine.generate

        def recorded(request_id, prompt, params):
            self.calls.append((list(prompt.token_ids), params))
            return generate(request_id, prompt, params)

        engine.generate = recorded


def chat(content, **extra):
    return {"model": MODEL, "messages": [{"role": "user", "content": content}], "temperature": 0, **extra}


async def both(server, body):
    """The whole answer and the stream folded as a client folds it (must agree)."""
    whole = (await server.client.post("/v1/chat/completions", json=body)).json()
    check("chat", whole)
    exchange = await server.call("POST", "/v1/chat/completions", {**body, "stream": True}).finished()
    folded = fold_chat_stream(exchange.events())[0]
    message = whole["choices"][0]["message"]
    assert folded["content"] == (message["content"] or "")
    assert folded["reasoning"] == (message.get("reasoning_content") or "")
    return whole


async def test_qwen3_thinks_freely_then_answers_in_schema(tmp_path):
    async with InProcessServer(tmp_path, QWEN3, reasoning_parser="qwen3") as server:
        engine = Recording(server.engine)
        whole = await both(server, chat("Name a city.", response_format=CITY_FORMAT, max_tokens=200))
        message = whole["choices"][0]["message"]
        assert message["reasoning_content"] == "\nThe user wants a city. Paris is one.\n"
        assert json.loads(message["content"]) == {"city": "Paris"}
        (prompt, free), (continued, constrained) = engine.calls[:2]
        assert free.json_schema is None and free.think_first is None
        assert free.max_tokens == 150 - 5  # three quarters, less the 5 tokens of "\n</think>\n\n"
        assert constrained.json_schema == CITY and constrained.think_first is None
        thinking = continued[len(prompt):]  # the prompt, then the thinking's own tokens up to </think>
        assert continued[:len(prompt)] == prompt and thinking
        text = "".join(server.engine.token_bytes(t).decode() for t in thinking)
        assert text.startswith("<think>") and "</think>" in text and "Paris\"" not in text
        usage = whole["usage"]
        assert usage["completion_tokens"] == len(thinking) + constrained_tokens(server, '{"city": "Paris"}')
        assert usage["completion_tokens"] <= 200 and usage["completion_tokens_details"]["reasoning_tokens"] > 0


def constrained_tokens(server, text):
    return len(server.engine.tokenizer.encode(text))


async def test_deepseek_r1_thinking_opened_by_the_template(tmp_path):
    async with InProcessServer(tmp_path, DEEPSEEK_R1, reasoning_parser="deepseek_r1") as server:
        Recording(server.engine)
        whole = await both(server, chat("Name a city.", response_format=CITY_FORMAT, max_tokens=200))
        message = whole["choices"][0]["message"]
        assert message["reasoning_content"] == "Okay, the user wants a city. Let me pick Paris.\n"
        assert json.loads(message["content"]) == {"city": "Paris"}


async def test_thinking_that_runs_out_of_budget_is_closed_and_the_answer_still_comes(tmp_path):
    async with InProcessServer(tmp_path, QWEN3, reasoning_parser="qwen3") as server:
        engine = Recording(server.engine)
        whole = await both(server, chat("Ponder a city.", response_format=CITY_FORMAT, max_tokens=60, logprobs=True,
                                        top_logprobs=2))
        message = whole["choices"][0]["message"]
        assert message["reasoning_content"].startswith("\nI keep thinking about it.")
        assert json.loads(message["content"]) == {"city": "Oslo"}
        assert whole["choices"][0]["finish_reason"] == "stop"
        (prompt, free), (continued, constrained) = engine.calls[:2]
        assert free.max_tokens == 45 - 5  # three quarters of the budget, less the closing marker (5 tokens)
        written = continued[len(prompt):]
        closing = "".join(server.engine.token_bytes(t).decode() for t in written[40:])
        assert closing == "\n</think>\n\n"  # the end marker, written for the model
        assert constrained.max_tokens == 60 - len(written)
        assert whole["usage"]["completion_tokens"] == len(written) + constrained_tokens(server, '{"city": "Oslo"}')
        # Every token has its logprob entry, the marker's written ones too (certain: 0, no alternatives).
        assert len(whole["choices"][0]["logprobs"]["content"]) == whole["usage"]["completion_tokens"]


async def test_an_output_that_opens_no_thinking_is_generated_again_constrained(tmp_path):
    async with InProcessServer(tmp_path, QWEN3, reasoning_parser="qwen3") as server:
        engine = Recording(server.engine)
        whole = await both(server, chat("Quick, a city.", response_format=CITY_FORMAT, max_tokens=100))
        message = whole["choices"][0]["message"]
        assert "reasoning_content" not in message and json.loads(message["content"]) == {"city": "Rome"}
        (prompt, free), (again, constrained) = engine.calls[:2]
        assert again == prompt and constrained.json_schema == CITY and constrained.max_tokens == 100
        assert whole["usage"]["completion_tokens"] == constrained_tokens(server, '{"city": "Rome"}')


async def test_forced_tool_call_after_thinking(tmp_path):
    async with InProcessServer(tmp_path, QWEN3, reasoning_parser="qwen3", tool_call_parser="hermes") as server:
        Recording(server.engine)
        whole = await both(server, chat("Weather in Oslo?", tools=TOOLS, tool_choice="required", max_tokens=200))
        message = whole["choices"][0]["message"]
        assert message["reasoning_content"] == "\nI need the weather tool.\n"
        call = message["tool_calls"][0]["function"]
        assert call["name"] == "get_weather" and json.loads(call["arguments"]) == {"city": "Oslo"}
        assert whole["choices"][0]["finish_reason"] == "tool_calls"


async def test_guided_choice_after_thinking(tmp_path):
    script = [{"match": "Pick", "output": "<think>\nYes fits.\n</think>\n\nyes"}]
    async with InProcessServer(tmp_path, script, reasoning_parser="qwen3") as server:
        engine = Recording(server.engine)
        whole = await both(server, chat("Pick one.", guided_choice=["yes", "no"], max_tokens=50))
        assert whole["choices"][0]["message"]["reasoning_content"] == "\nYes fits.\n"
        assert engine.calls[0][1].grammar is None and engine.calls[1][1].grammar == 'root ::= "yes" | "no"'


async def test_responses_text_format_after_thinking(tmp_path):
    async with InProcessServer(tmp_path, QWEN3, reasoning_parser="qwen3") as server:
        Recording(server.engine)
        body = {"model": MODEL, "input": "Name a city.", "max_output_tokens": 200, "store": False,
                "text": {"format": {"type": "json_schema", "name": "city", "schema": CITY}}}
        response = (await server.client.post("/v1/responses", json=body)).json()
        kinds = [item["type"] for item in response["output"]]
        assert kinds == ["reasoning", "message"], response
        text = response["output"][1]["content"][0]["text"]
        jsonschema.validate(json.loads(text), CITY)


@pytest.mark.parametrize("extra", [{"chat_template_kwargs": {"enable_thinking": False}}, {}])
async def test_constraint_binds_from_the_first_token_without_thinking(tmp_path, extra):
    """Thinking switched off, or no reasoning parser at all: one generation, constrained throughout."""
    settings = {"reasoning_parser": "qwen3"} if extra else {}
    async with InProcessServer(tmp_path, QWEN3, **settings) as server:
        engine = Recording(server.engine)
        whole = await both(server, chat("Name a city.", response_format=CITY_FORMAT, max_tokens=200, **extra))
        assert json.loads(whole["choices"][0]["message"]["content"]) == {"city": "Paris"}
        assert len(engine.calls) == 2  # the whole answer and the stream: one generation each
        assert all(params.json_schema == CITY and params.think_first is None for _, params in engine.calls)


SLOW = [
    {"match": "Slowly", "output": "<think>\n" + "Still thinking. " * 30 + "\n</think>\n\n", "delay_ms": 20},
    {"match": "Slowly", "output": "{\"city\": \"" + "Llanfair" * 20 + "\"}", "delay_ms": 20},
]


@pytest.mark.parametrize("gone_in", ["thinking", "answer"])
async def test_a_client_gone_in_either_part_stops_the_generation(tmp_path, gone_in):
    async with InProcessServer(tmp_path, SLOW, reasoning_parser="qwen3") as server:
        engine = Recording(server.engine)
        exchange = server.call("POST", "/v1/chat/completions",
                               {**chat("Slowly, a city.", response_format=CITY_FORMAT, max_tokens=400), "stream": True})
        await exchange.wait_for('"reasoning_content"' if gone_in == "thinking" else '"content":"{')
        exchange.hang_up()
        await exchange.finished()
        assert server.engine.running_requests() == 0
        assert len(engine.calls) == (1 if gone_in == "thinking" else 2)


# The scripted engine under a constraint judges a line by its answer, the text after its thinking: a line that thinks
# and then breaks the schema is passed over for one that thinks and obeys it (issue 43).
THINKS_THEN_BREAKS = [
    {"match": "Name a city", "output": "<think>\nParis or Rome?\n</think>\n\nSure! Paris."},
    {"match": "Name a city", "output": "<think>\nA city, as JSON.\n</think>\n\n{\"city\": \"Paris\"}"},
]


async def test_the_scripted_line_that_obeys_after_its_thinking_is_chosen(tmp_path):
    """Constraints not enforced (the scripted engine's default): the whole line, its thinking read by the parser."""
    async with InProcessServer(tmp_path, THINKS_THEN_BREAKS, reasoning_parser="qwen3") as server:
        whole = await both(server, chat("Name a city.", response_format=CITY_FORMAT, max_tokens=200))
        message = whole["choices"][0]["message"]
        assert message["reasoning_content"] == "\nA city, as JSON.\n"
        assert json.loads(message["content"]) == {"city": "Paris"}


@pytest.mark.parametrize("script", [THINKS_THEN_BREAKS, THINKS_THEN_BREAKS[1:]], ids=["two lines", "one line"])
async def test_the_constrained_part_is_the_obeying_lines_answer(tmp_path, script):
    """Enforced (think, then constrain): the thinking is the first line's, the constrained part the answer of the
    line that obeys, never its thinking again."""
    async with InProcessServer(tmp_path, script, reasoning_parser="qwen3") as server:
        Recording(server.engine)
        whole = await both(server, chat("Name a city.", response_format=CITY_FORMAT, max_tokens=200))
        message = whole["choices"][0]["message"]
        assert message["reasoning_content"] == ("\nParis or Rome?\n" if len(script) == 2 else "\nA city, as JSON.\n")
        assert json.loads(message["content"]) == {"city": "Paris"}
