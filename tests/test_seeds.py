"""The seeds' request and response fields (vLLM's and tabbyAPI's), one test per feature row, named after it.

Over real HTTP on the scripted engine (exact outputs), and on the embedded model where the field changes
generation. Bodies and SSE events are validated against the spec and the SDK types (wire.check).
"""

from __future__ import annotations

import pytest

from conftest import scripted, server_fixture
from servers import DATA
from wire import check, check_error, echoed_as_spec_says, post, stream

MODEL = "scripted"
STOPTEST = "STOPTEST"  # extensions.jsonl answers "alpha beta STOP gamma delta"

seeds_server = server_fixture(*scripted("extensions.jsonl", "--max-model-len", "2048"))
trusting_server = server_fixture(*scripted("extensions.jsonl", "--trust-request-chat-template"))
vars_server = server_fixture(*scripted("extensions.jsonl", "--chat-template",
                                       str(DATA / "template_vars_template.jinja")))


def chat(server, content: str = STOPTEST, **fields) -> dict:
    response = post(server.base_url, "/v1/chat/completions",
                    {"model": MODEL, "messages": [{"role": "user", "content": content}], **fields})
    assert response.status_code == 200, response.text
    return check("chat", response.json())


def completion(server, prompt: str = STOPTEST, **fields) -> dict:
    response = post(server.base_url, "/v1/completions", {"model": MODEL, "prompt": prompt, **fields})
    assert response.status_code == 200, response.text
    return check("completion", response.json())


def token_id(server, text: str) -> int:
    ids = post(server.base_url, "/tokenize", {"model": MODEL, "prompt": text, "add_special_tokens": False}).json()["tokens"]
    assert len(ids) == 1, ids
    return ids[0]


def finishing(chunks: list[dict]) -> list[dict]:
    """The choices of a stream that carry a finish_reason."""
    return [choice for chunk in chunks for choice in chunk["choices"] if choice.get("finish_reason")]


# -- stop_reason (vLLM) and stop_str (tabbyAPI) ----------------------------------------------------

def test_stop_reason_is_the_matched_stop_string(seeds_server):
    for reply in (chat(seeds_server, stop=["nothing", "STOP"])["choices"][0],
                  completion(seeds_server, stop=["nothing", "STOP"])["choices"][0]):
        assert reply["finish_reason"] == "stop"
        assert reply["stop_reason"] == "STOP" and reply["stop_str"] == "STOP"


def test_stop_reason_is_the_stop_token_id(seeds_server):
    gamma = token_id(seeds_server, " gamma")
    for reply in (chat(seeds_server, stop_token_ids=[gamma])["choices"][0],
                  completion(seeds_server, stop_token_ids=[gamma])["choices"][0]):
        assert reply["finish_reason"] == "stop"
        assert reply["stop_reason"] == gamma and reply["stop_str"] == " gamma"


def test_stop_reason_is_null_at_end_of_generation_and_length(seeds_server):
    ended = chat(seeds_server)["choices"][0]
    assert ended["finish_reason"] == "stop" and ended["stop_reason"] is None and ended["stop_str"] is None
    cut = completion(seeds_server, max_tokens=2, stop=["delta"])["choices"][0]
    assert cut["finish_reason"] == "length" and cut["stop_reason"] is None and cut["stop_str"] is None


@pytest.mark.parametrize("path,kind,body", [
    ("/v1/chat/completions", "chat_chunk", {"messages": [{"role": "user", "content": STOPTEST}]}),
    ("/v1/completions", "completion_chunk", {"prompt": STOPTEST}),
])
def test_stop_reason_streamed_on_the_finishing_chunk(seeds_server, path, kind, body):
    chunks = stream(seeds_server.base_url, path, {"model": MODEL, **body, "stop": ["beta"], "n": 2}, kind)
    ends = finishing(chunks)
    assert sorted(choice["index"] for choice in ends) == [0, 1]
    assert all(choice["stop_reason"] == "beta" and choice["stop_str"] == "beta" for choice in ends)
    others = [choice for chunk in chunks for choice in chunk["choices"] if not choice.get("finish_reason")]
    assert others and not any("stop_reason" in choice for choice in others)


# -- request fields: vLLM's newer names ------------------------------------------------------------

def test_request_id_names_the_completion(seeds_server):
    assert chat(seeds_server, request_id="tenant-7")["id"] == "chatcmpl-tenant-7"
    assert completion(seeds_server, request_id="tenant-7")["id"] == "cmpl-tenant-7"
    assert chat(seeds_server)["id"].startswith("chatcmpl-") and chat(seeds_server)["id"] != "chatcmpl-tenant-7"


def test_request_id_from_the_x_request_id_header(seeds_server):
    """vLLM's: the header wins over the field; two requests may share the name (their generations never collide)."""
    for path, prefix, body in (("/v1/chat/completions", "chatcmpl", {"messages": [{"role": "user", "content": "count"}]}),
                               ("/v1/completions", "cmpl", {"prompt": "count"})):
        reply = post(seeds_server.base_url, path, {"model": MODEL, **body, "request_id": "field", "n": 2},
                     headers={"X-Request-Id": "from-header"})
        assert reply.status_code == 200, reply.text
        assert reply.json()["id"] == f"{prefix}-from-header"
        assert reply.headers["x-request-id"] == "from-header"
        texts = {c.get("text") or c["message"]["content"] for c in reply.json()["choices"]}
        assert texts == {"one two three four five six seven eight nine ten"}


def test_priority(seeds_server):
    """vLLM's priority orders admission on every engine (tests/test_admission_priority.py): any value is served."""
    assert chat(seeds_server, priority=0)["choices"][0]["message"]["content"]
    assert chat(seeds_server, priority=3)["choices"][0]["message"]["content"]
    assert chat(seeds_server, priority=-2)["choices"][0]["message"]["content"]


def test_return_tokens_as_token_ids(seeds_server):
    plain = completion(seeds_server, "count", max_tokens=3, logprobs=1, return_token_ids=True)["choices"][0]
    as_ids = completion(seeds_server, "count", max_tokens=3, logprobs=1, return_tokens_as_token_ids=True)["choices"][0]
    assert as_ids["logprobs"]["tokens"] == [f"token_id:{i}" for i in plain["token_ids"]]
    assert list(as_ids["logprobs"]["top_logprobs"][0]) == [f"token_id:{plain['token_ids'][0]}"]
    assert as_ids["logprobs"]["text_offset"] == plain["logprobs"]["text_offset"]
    message = chat(seeds_server, "count", max_tokens=3, logprobs=True, top_logprobs=1, return_token_ids=True)
    token_ids = message["choices"][0]["token_ids"]
    content = chat(seeds_server, "count", max_tokens=3, logprobs=True, top_logprobs=1,
                   return_tokens_as_token_ids=True)["choices"][0]["logprobs"]["content"]
    assert [entry["token"] for entry in content] == [f"token_id:{i}" for i in token_ids]
    assert [entry["bytes"] for entry in content] == [e["bytes"] for e in message["choices"][0]["logprobs"]["content"]]


def test_structured_outputs_is_guided(seeds_server):
    """vLLM's new name: its keys are checked as the guided_* fields they mean (the scripted engine does not
    constrain: the real model's test below shows the constraint)."""
    assert chat(seeds_server, structured_outputs={"choice": ["a", "b"]})["choices"][0]["message"]["content"]
    error = check_error(post(seeds_server.base_url, "/v1/completions",
                             {"model": MODEL, "prompt": "x", "structured_outputs": {"choice": "ab"}}), 400)
    assert error["param"].startswith("structured_outputs")
    check_error(post(seeds_server.base_url, "/v1/completions",
                     {"model": MODEL, "prompt": "x", "structured_outputs": {"jsonn": {}}}), 400,
                "structured_outputs.jsonn")
    check_error(post(seeds_server.base_url, "/v1/completions",
                     {"model": MODEL, "prompt": "x", "structured_outputs": {"regex": "a", "grammar": "root ::= \"a\""}}),
                400, "structured_outputs")


# -- request fields: tabbyAPI's names --------------------------------------------------------------

@pytest.mark.parametrize("tabby,vllm,value,other", [
    ("json_schema", "guided_json", {"type": "object"}, {"type": "string"}),
    ("regex_pattern", "guided_regex", "a+", "b+"),
    ("grammar_string", "guided_grammar", 'root ::= "a"', 'root ::= "b"'),
    ("allowed_tokens", "allowed_token_ids", [1, 2], [3]),
    ("mirostat_mode", "mirostat", 2, 1),
    ("dry_range", "dry_penalty_last_n", 64, 32),
])
def test_tabby_names_are_vllm_names(seeds_server, tabby, vllm, value, other):
    """Accepted alone or with the same value under vLLM's name; a 400 naming tabby's when the two differ."""
    assert completion(seeds_server, "count", max_tokens=2, **{tabby: value})["choices"][0]["text"]
    assert completion(seeds_server, "count", max_tokens=2, **{tabby: value, vllm: value})["choices"][0]["text"]
    check_error(post(seeds_server.base_url, "/v1/completions",
                     {"model": MODEL, "prompt": "count", tabby: value, vllm: other}), 400, tabby)


def test_banned_tokens_and_allowed_tokens_as_strings(seeds_server):
    assert completion(seeds_server, "count", max_tokens=2, banned_tokens="5, 6", allowed_tokens=[1, 2, 3])
    for field in ("banned_tokens", "allowed_tokens"):
        check_error(post(seeds_server.base_url, "/v1/completions",
                         {"model": MODEL, "prompt": "count", field: "1, two"}), 400, field)


def test_ban_eos_token(seeds_server):
    """The scripted engine ends its script: ignore_eos (what ban_eos_token means) repeats nothing, but is accepted."""
    assert completion(seeds_server, "count", max_tokens=2, ban_eos_token=True)["choices"][0]["text"]


@pytest.mark.parametrize("sampler", [
    {"typical_p": 0.5}, {"mirostat": 2, "mirostat_tau": 4.0, "mirostat_eta": 0.2},
    {"dry_multiplier": 0.8, "dry_base": 1.75, "dry_allowed_length": 2, "dry_penalty_last_n": -1,
     "dry_sequence_breakers": ["\n", ":"]},
    {"xtc_probability": 0.5, "xtc_threshold": 0.1},
])
def test_native_samplers_are_accepted(seeds_server, sampler):
    assert chat(seeds_server, "count", **sampler)["choices"][0]["message"]["content"]


def test_native_samplers_an_engine_lacks_are_a_400_naming_it():
    from rostra.core import NativeSamplers, SamplingParams
    from rostra.engines.base import Engine
    from rostra.engines.vllm import VllmEngine
    from rostra.errors import InvalidRequest

    vllm = VllmEngine.__new__(VllmEngine)  # the class's declarations, no model loaded
    for sampler in ("typical_p", "mirostat", "dry_multiplier", "xtc_probability"):
        value = {"typical_p": 0.5, "mirostat": 1}.get(sampler, 0.5)
        with pytest.raises(InvalidRequest) as caught:
            Engine.check_params(vllm, SamplingParams(8, samplers=NativeSamplers(**{sampler: value})))
        assert caught.value.param == sampler and "vLLM engine" in str(caught.value)
    # Off values (typical_p 1, mirostat 0, multipliers 0) and a sampler's tuning alone change nothing: accepted.
    Engine.check_params(vllm, SamplingParams(8, samplers=NativeSamplers(typical_p=1.0, mirostat=0, dry_base=2.0,
                                                                        xtc_threshold=0.2, dry_multiplier=0.0)))



# -- add_special_tokens, cache_salt, mm_processor_kwargs (vLLM) -------------------------------------

def test_add_special_tokens(seeds_server):
    """The prompt's ids are the tokenizer's with or without its special tokens, as /tokenize gives them (vLLM's
    defaults: true for Completions, false for Chat, whose template writes them)."""
    def tokenized(text: str, add: bool) -> list[int]:
        return post(seeds_server.base_url, "/tokenize", {"model": MODEL, "prompt": text,
                                                        "add_special_tokens": add}).json()["tokens"]

    for add in (True, False):
        reply = completion(seeds_server, "count", max_tokens=2, return_token_ids=True, add_special_tokens=add)
        assert reply["choices"][0]["prompt_token_ids"] == tokenized("count", add)
    plain = chat(seeds_server, "count", max_tokens=2, return_token_ids=True)["prompt_token_ids"]
    assert chat(seeds_server, "count", max_tokens=2, return_token_ids=True,
                add_special_tokens=False)["prompt_token_ids"] == plain
    added = chat(seeds_server, "count", max_tokens=2, return_token_ids=True, add_special_tokens=True)
    assert added["prompt_token_ids"] == tokenized("", True) + plain


def test_cache_salt(seeds_server):
    """Accepted on both APIs (the scripted engine has no prefix cache); llama.cpp's isolation:
    tests/test_llamacpp_slots.py and tests/test_e2e_extensions.py."""
    assert chat(seeds_server, cache_salt="tenant-a")["choices"][0]["message"]["content"]
    assert completion(seeds_server, cache_salt="tenant-a")["choices"][0]["text"]
    check_error(post(seeds_server.base_url, "/v1/completions", {"model": MODEL, "prompt": "x", "cache_salt": ""}),
                400, "cache_salt")


def test_mm_processor_kwargs(seeds_server):
    """Empty changes nothing anywhere; options for a multimodal processor are a 400 naming the engine where
    there is none (vLLM passes them on)."""
    assert chat(seeds_server, mm_processor_kwargs={})["choices"][0]["message"]["content"]
    for path in ("/v1/chat/completions", "/v1/completions"):
        body = {"model": MODEL, "mm_processor_kwargs": {"num_crops": 4},
                **({"messages": [{"role": "user", "content": "x"}]} if "chat" in path else {"prompt": "x"})}
        error = check_error(post(seeds_server.base_url, path, body), 400, "mm_processor_kwargs")
        assert "scripted engine" in error["message"] or "this engine" in error["message"]


def test_vllm_gets_cache_salt_and_mm_processor_kwargs_with_the_prompt():
    from rostra.core import Prompt
    from rostra.engines.vllm import prompt_options

    assert prompt_options(Prompt([1, 2])) == {}
    assert prompt_options(Prompt([1], cache_salt="a", mm_processor_kwargs={"num_crops": 4})) == {
        "cache_salt": "a", "mm_processor_kwargs": {"num_crops": 4}}


# -- the gateway's conversions ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def together():
    from together_upstream import TogetherUpstream

    upstream = TogetherUpstream()
    yield upstream
    upstream.stop()


@pytest.fixture(scope="module")
def together_gateways(together):
    """The same Together-style upstream, in raw mode (rostra's prompt) and passed through."""
    from rostra.embedded import embedded_model_path
    from servers import RunningServer

    common = ["--engine", "remote", "--health-check-interval", "0.5"]
    raw = RunningServer([*common, "--upstream", f"{together.v1},mode=raw", "--tokenizer", str(embedded_model_path()),
                         "--max-model-len", "2048"])
    passthrough = RunningServer([*common, "--upstream", together.v1])
    yield raw, passthrough
    raw.stop()
    passthrough.stop()


def together_request(path: str, **fields) -> dict:
    body = {"model": "together-model", "max_tokens": 8, **fields}
    return {**body, "messages": [{"role": "user", "content": "sea?"}]} if "chat" in path else {**body, "prompt": "sea?"}


@pytest.mark.parametrize("path,kind", [("/v1/completions", "completion_chunk"), ("/v1/chat/completions", "chat_chunk")])
def test_gateway_float_logprobs(together_gateways, path, kind):
    """Together sends each piece's logprob as a bare number: streamed and not, in both modes, no server error."""
    for gateway in together_gateways:
        logprobs = {"logprobs": 1} if "chat" not in path else {"logprobs": True}
        chunks = stream(gateway.base_url, path, together_request(path, **logprobs), kind)
        whole = post(gateway.base_url, path, together_request(path, **logprobs))
        assert whole.status_code == 200, whole.text
        choice = check(kind.removesuffix("_chunk"), whole.json())["choices"][0]
        text = choice.get("text") if "chat" not in path else choice["message"]["content"]
        assert text == " the sea is calm"
        scores = (choice["logprobs"]["token_logprobs"] if "chat" not in path
                  else [entry["logprob"] for entry in choice["logprobs"]["content"]])
        assert scores == [-0.25] * 4
        assert any(c.get("finish_reason") == "stop" for chunk in chunks for c in chunk["choices"])


def test_gateway_stop_reason(together_gateways):
    """The upstream's stop_reason (here a stop token's id) comes through, in raw mode and passed through."""
    for gateway in together_gateways:
        for path in ("/v1/completions", "/v1/chat/completions"):
            choice = post(gateway.base_url, path, together_request(path)).json()["choices"][0]
            assert choice["stop_reason"] == 7, (gateway.base_url, path, choice)
    raw = post(together_gateways[0].base_url, "/v1/completions", together_request("/v1/completions")).json()
    seventh = post(together_gateways[0].base_url, "/detokenize", {"tokens": [7]}).json()["prompt"]
    assert seventh and raw["choices"][0]["stop_str"] == seventh  # token 7's text, from the gateway's tokenizer


def test_gateway_raw_mode_sends_repeat_penalty_and_stop_token_ids(together_gateways, together):
    together.bodies.clear()
    post(together_gateways[0].base_url, "/v1/completions",
         together_request("/v1/completions", repetition_penalty=1.3, stop_token_ids=[7]))
    sent = together.bodies[-1]
    assert sent["repetition_penalty"] == sent["repeat_penalty"] == 1.3
    assert sent["stop_token_ids"] == [7]
    # The other direction: llama.cpp's name is accepted by rostra, as repetition_penalty.
    assert post(together_gateways[0].base_url, "/v1/completions",
                together_request("/v1/completions", repeat_penalty=1.2)).status_code == 200
    assert together.bodies[-1]["repeat_penalty"] == together.bodies[-1]["repetition_penalty"] == 1.2


# -- logprobs of impossible tokens -----------------------------------------------------------------

def test_gateway_raw_mode_prompt_logprobs(together_gateways, together):
    """A raw-mode upstream scores the prompt rostra rendered: its prompt_logprobs (and echo with logprobs) come
    back, the prompt's own token told apart from the alternatives by its id."""
    from together_upstream import PROMPT_TOKEN_LOGPROB

    raw, passthrough = together_gateways
    reply = post(raw.base_url, "/v1/completions", together_request("/v1/completions", prompt_logprobs=1,
                                                                     return_token_ids=True)).json()
    choice = reply["choices"][0]
    assert together.bodies[-1]["prompt_logprobs"] == 1
    ids = choice["prompt_token_ids"]
    assert len(ids) > 1 and choice["prompt_logprobs"][0] is None
    for token, entry in zip(ids[1:], choice["prompt_logprobs"][1:]):
        assert entry[str(token)]["logprob"] == PROMPT_TOKEN_LOGPROB and entry["99"]["rank"] == 1
    echoed = post(raw.base_url, "/v1/completions", together_request("/v1/completions", echo=True,
                                                                     logprobs=1)).json()
    check("completion", echoed_as_spec_says(echoed))
    echoed = echoed["choices"][0]
    assert echoed["text"].startswith("sea?") and echoed["logprobs"]["token_logprobs"][:len(ids)] == [
        None, *[PROMPT_TOKEN_LOGPROB] * (len(ids) - 1)]


def test_gateway_passthrough_prompt_logprobs(together_gateways, together):
    """Passed through, the upstream's prompt_logprobs come back as it sent them: Completions per choice, Chat at
    the top level (in a stream: on the choice's last chunk)."""
    from together_upstream import prompt_scores

    passthrough = together_gateways[1]
    expected = prompt_scores([1, 2, 3])
    reply = post(passthrough.base_url, "/v1/completions", together_request("/v1/completions", prompt_logprobs=1))
    assert reply.status_code == 200, reply.text
    assert reply.json()["choices"][0]["prompt_logprobs"] == expected and together.bodies[-1]["prompt_logprobs"] == 1
    reply = post(passthrough.base_url, "/v1/chat/completions", together_request("/v1/chat/completions",
                                                                                 prompt_logprobs=1))
    assert check("chat", reply.json())["prompt_logprobs"] == expected
    chunks = stream(passthrough.base_url, "/v1/chat/completions",
                    together_request("/v1/chat/completions", prompt_logprobs=1), "chat_chunk")
    assert [chunk["prompt_logprobs"] for chunk in chunks if "prompt_logprobs" in chunk] == [expected]


def test_minus_infinity_logprobs_are_minus_9999():
    """A banned token's logprob is -inf, which JSON cannot spell (it went out as null); vLLM sends -9999.0."""
    import json as jsonlib

    from rostra.core import TokenStep, TopLogprob
    from rostra.http.sse import json_bytes
    from rostra.serving.chat import logprobs_content
    from rostra.api.completions.service import LegacyLogprobs
    from rostra.serving.extensions import vllm_prompt_logprobs

    inf = float("-inf")
    step = TokenStep(5, b"a", inf, (TopLogprob(6, b"b", -0.1), TopLogprob(5, b"a", inf)))
    chat_entry = jsonlib.loads(json_bytes({"c": logprobs_content((step,))}))["c"][0]
    assert chat_entry["logprob"] == -9999.0 and [t["logprob"] for t in chat_entry["top_logprobs"]] == [-0.1, -9999.0]
    legacy = jsonlib.loads(json_bytes(LegacyLogprobs().render("a", (step,))))
    assert legacy["token_logprobs"] == [-9999.0] and legacy["top_logprobs"] == [{"b": -0.1, "a": -9999.0}]
    prompt = jsonlib.loads(json_bytes({"p": vllm_prompt_logprobs((None, step), lambda data: data.decode())}))["p"]
    assert prompt[0] is None and prompt[1]["5"]["logprob"] == -9999.0 and prompt[1]["6"]["logprob"] == -0.1


def test_continuous_usage_stats_per_choice(seeds_server):
    """vLLM's: each chunk's usage counts the tokens of the choice it carries, not of all choices together."""
    chunks = stream(seeds_server.base_url, "/v1/completions",
                    {"model": MODEL, "prompt": "count to ten", "max_tokens": 5, "n": 3,
                     "stream_options": {"include_usage": True, "continuous_usage_stats": True}}, "completion_chunk")
    counts: dict[int, list[int]] = {}
    for chunk in chunks:
        for choice in chunk["choices"]:
            if choice["text"]:
                counts.setdefault(choice["index"], []).append(chunk["usage"]["completion_tokens"])
    assert counts == {index: [1, 2, 3, 4, 5] for index in range(3)}
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 15


# -- bad_words on llama.cpp: only the last token, only where the others precede it ------------------

def test_bad_words_of_several_tokens_are_resampled_where_they_complete():
    """A stand-in generation (as llama.cpp's server streams): it repeats 1 2 3, taking the next token up by
    10 where logit_bias bans it. Banning the word (2, 3) drops the 3 after 2 only; 2 itself stays allowed."""
    import asyncio

    from rostra.core import EngineOutput, SamplingParams, TokenStep
    from rostra.engines.llamacpp_bad_words import generate_without_bad_words

    calls = []

    async def generate(prompt_ids, params):
        calls.append(params.max_tokens)
        context = list(prompt_ids)
        for _ in range(params.max_tokens):
            token = context[-1] % 3 + 1 if context[-1] <= 3 else 1
            if params.logit_bias.get(token) == float("-inf"):
                token += 10
            context.append(token)
            yield EngineOutput((TokenStep(token, b"t"),))
        yield EngineOutput(finish_reason="length")

    async def run(max_tokens):
        out, reasons = [], []
        async for output in generate_without_bad_words(generate, [3], SamplingParams(max_tokens), [(2, 3)]):
            out += [step.token_id for step in output.tokens]
            reasons.append(output.finish_reason)
        return out, [r for r in reasons if r]

    out, reasons = asyncio.run(run(7))
    assert out == [1, 2, 13, 1, 2, 13, 1] and reasons == ["length"]
    assert calls[:3] == [7, 1, 4]  # the rest, one token with the end banned, the rest again


# -- tabby's chat fields: template_vars, response_prefix --------------------------------------------

def rendered_prompt(server, **fields) -> str:
    reply = chat(server, "count", max_tokens=2, return_token_ids=True, **fields)
    return post(server.base_url, "/detokenize", {"tokens": reply["prompt_token_ids"]}).json()["prompt"]


def test_template_vars(vars_server):
    assert rendered_prompt(vars_server, template_vars={"persona": "a pirate"}).startswith("persona: a pirate\n")
    assert rendered_prompt(vars_server, template_vars={"persona": "a pirate"},
                           chat_template_kwargs={"persona": "a pirate"}).startswith("persona: a pirate\n")
    assert not rendered_prompt(vars_server).startswith("persona")
    check_error(post(vars_server.base_url, "/v1/chat/completions",
                     {"model": MODEL, "messages": [{"role": "user", "content": "count"}],
                      "template_vars": {"persona": "a"}, "chat_template_kwargs": {"persona": "b"}}),
                400, "template_vars.persona")


def test_response_prefix(vars_server):
    prompt = rendered_prompt(vars_server, response_prefix=" Sure: <|im_end|>")
    assert prompt.endswith("assistant: Sure: <|im_end|>")
    check_error(post(vars_server.base_url, "/v1/chat/completions",
                     {"model": MODEL, "messages": [{"role": "user", "content": "count"}], "response_prefix": "x",
                      "add_generation_prompt": False, "continue_final_message": False}), 400, "response_prefix")


def test_response_prefix_is_plain_text(vars_server):
    """Special-token text in the prefix is spelled out, as in a user's message: it cannot open a turn."""
    special = post(vars_server.base_url, "/tokenize", {"model": MODEL, "prompt": "<|im_end|>",
                                                       "add_special_tokens": False}).json()["tokens"]
    assert len(special) == 1
    reply = chat(vars_server, "count", max_tokens=2, return_token_ids=True, response_prefix="<|im_end|>")
    assert special[0] not in reply["prompt_token_ids"]


# -- vLLM's per-request chat_template ---------------------------------------------------------------

OWN_TEMPLATE = "{% for m in messages %}<<{{ m.role }}|{{ m.content }}>>{% endfor %}{% if add_generation_prompt %}=>{% endif %}"


def test_chat_template(trusting_server):
    assert rendered_prompt(trusting_server, chat_template=OWN_TEMPLATE) == "<<user|count>>=>"
    assert rendered_prompt(trusting_server) != "<<user|count>>=>"  # the server's own, otherwise
    check_error(post(trusting_server.base_url, "/v1/chat/completions",
                     {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "chat_template": "{% if %}"}),
                400, "chat_template")
    escape = "{{ ''.__class__.__mro__[1].__subclasses__() }}"  # the sandbox holds for a request's template too
    check_error(post(trusting_server.base_url, "/v1/chat/completions",
                     {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "chat_template": escape}), 400)
    assert chat(trusting_server)["choices"][0]["message"]["content"]  # still serving


def test_chat_template_needs_the_servers_trust(seeds_server):
    error = check_error(post(seeds_server.base_url, "/v1/chat/completions",
                             {"model": MODEL, "messages": [{"role": "user", "content": "x"}],
                              "chat_template": OWN_TEMPLATE}), 400, "chat_template")
    assert "--trust-request-chat-template" in error["message"]
