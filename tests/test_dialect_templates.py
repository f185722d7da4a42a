"""Each family's real chat template selects its tool-call and reasoning parsers at zero configuration, and a real
output of the model comes out exactly over HTTP (Chat, Responses and Messages; streamed = not streamed), with the
scripted engine standing in for the model and the real template rendering every prompt.

The templates are the models' own, kept in tests/data/templates (SOURCES says where each one comes from); the
outputs are the models' formats as their templates write past turns back and as the reference parsers' tests have
them (named in tests/test_tool_parser_*.py and tests/test_reasoning_parser_families.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness import MODEL, InProcessServer
from rostra.parsing.reasoning import reasoning_parser_class
from rostra.parsing.reasoning.detect import detect_reasoning_parser
from rostra.parsing.tools import detect_tool_parser
from rostra.prompt.chat_template import ChatTemplate
from test_truncation_matrix import answer, fold_message, sse, without_ids
from wire import fold_chat_stream

TEMPLATES = Path(__file__).parent / "data" / "templates"
LLAMA_CPP = "github.com/ggml-org/llama.cpp models/templates/"
SOURCES = {
    "deepseek-ai-DeepSeek-V3.1.jinja": LLAMA_CPP + "deepseek-ai-DeepSeek-V3.1.jinja",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": LLAMA_CPP + "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
    "DeepSeek-V3.2.jinja": LLAMA_CPP + "DeepSeek-V3.2.jinja",
    # llama.cpp's copy of Qwen/Qwen3-0.6B's template, as a fork of llama.cpp keeps it (the index had no other).
    "Qwen-Qwen3-0.6B.jinja": "github.com/Indras-Mirror/llama.cpp-turboq-mtp models/templates/Qwen-Qwen3-0.6B.jinja",
    "moonshotai-Kimi-K2-Thinking.jinja": LLAMA_CPP + "moonshotai-Kimi-K2-Thinking.jinja",
    # The template llama.cpp's test_magistral_parser uses (kept in ochafik/llama.cpp's copy of that directory).
    "unsloth-Magistral-Small-2509.jinja": "github.com/ochafik/llama.cpp models/templates/unsloth-Magistral-Small-2509.jinja",
    "NVIDIA-Nemotron-Nano-v2.jinja": LLAMA_CPP + "NVIDIA-Nemotron-Nano-v2.jinja",
    "nvidia-Llama-3_3-Nemotron-Super-49B-v1_5.jinja": LLAMA_CPP + "nvidia-Llama-3_3-Nemotron-Super-49B-v1_5.jinja",
    # huggingface.co/microsoft/Phi-4-mini-instruct tokenizer_config.json "chat_template" (as guidance-ai/guidance's
    # chat-template cache quotes it): tools in <|tool|>…<|/tool|>, no call markup.
    "microsoft-Phi-4-mini-instruct.jinja": "huggingface.co/microsoft/Phi-4-mini-instruct tokenizer_config.json",
    "vllm-tool_chat_template_phi4_mini.jinja": "github.com/vllm-project/vllm examples/tool_chat_template_phi4_mini.jinja",
}
# Issue 43, second round. (The Functionary v3.2 copy, as Qwen3's, from a mirror of llama.cpp's directory.)
SOURCES.update({
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja":
        LLAMA_CPP + "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja",
    "meetkai-functionary-medium-v3.1.jinja": "github.com/ggerganov/llama.cpp models/templates/"
                                             "meetkai-functionary-medium-v3.1.jinja",
    "meetkai-functionary-medium-v3.2.jinja": "github.com/ye-NX/llama.cpp models/templates/"
                                             "meetkai-functionary-medium-v3.2.jinja",
    # Hunyuan-A13B's tool template as vLLM ships it for the model (its Hugging Face repository's, with tools).
    "vllm-tool_chat_template_hunyuan_a13b.jinja": "github.com/vllm-project/vllm examples/"
                                                  "tool_chat_template_hunyuan_a13b.jinja",
    # InternLM2's own template renders no tool calls; this is the tool template vLLM ships for it.
    "vllm-tool_chat_template_internlm2_tool.jinja": "github.com/vllm-project/vllm examples/"
                                                    "tool_chat_template_internlm2_tool.jinja",
    # xLAM-2's (Llama-based) template as vLLM ships it, the one Salesforce's model card points to.
    "vllm-tool_chat_template_xlam_llama.jinja": "github.com/vllm-project/vllm examples/tool_chat_template_xlam_llama.jinja",
})
# Issue 43, third round.
SOURCES.update({
    # FunctionGemma's tool template as vLLM's docs name it for the model (`--tool-call-parser functiongemma
    # --chat-template examples/tool_chat_template_functiongemma.jinja`), from the eigen-hub/vllm copy of vLLM's
    # examples/ (commit cca57d421f5aa1786deb113981ebe3bbbbd94581; CRLF there, LF here).
    "vllm-tool_chat_template_functiongemma.jinja": "github.com/eigen-hub/vllm examples/"
                                                   "tool_chat_template_functiongemma.jinja",
    # AI21 Jamba Mini 1.7's own template, as its GGUF (bartowski/ai21labs_AI21-Jamba-Mini-1.7-GGUF) carries it,
    # extracted with the gguf package by r-rojo/rampipe (tests/fixtures/jamba_mini_1_7_chat_template.jinja, commit
    # 3c7722e3161b0b15312e3d78b203df4955cba762).
    "ai21labs-AI21-Jamba-Mini-1.7.jinja": "github.com/r-rojo/rampipe tests/fixtures/jamba_mini_1_7_chat_template.jinja",
    # inclusionAI Ling 2.0's template (BailingMoeV2), as llama-server printed it from the GGUF it loaded (its
    # "chat template" log line, quoted in github.com/ikawrakow/ik_llama.cpp issue 854, 2025-10-21).
    "inclusionAI-Ling-2.0.jinja": "github.com/ikawrakow/ik_llama.cpp issue 854 (llama-server's chat template log)",
    "gemma4.jinja": LLAMA_CPP + "gemma4.jinja",  # (commit 75f1ba7389067a9f90082515e124c377a1e104b2)
})

# template -> (tool-call parser, reasoning parser) detected with no flag
DETECTED = {
    "deepseek-ai-DeepSeek-V3.1.jinja": ("deepseek_v3", "deepseek_v3"),
    "DeepSeek-V3.2.jinja": ("deepseek_v32", "deepseek_v3"),  # V3.2 calls tools in DSML
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": ("deepseek_v3", "deepseek_r1"),
    "Qwen-Qwen3-0.6B.jinja": ("hermes", "qwen3"),
    "moonshotai-Kimi-K2-Thinking.jinja": ("kimi_k2", "kimi_k2"),
    "unsloth-Magistral-Small-2509.jinja": ("mistral", "magistral"),
    "NVIDIA-Nemotron-Nano-v2.jinja": ("nemotron_json", "qwen3"),
    "nvidia-Llama-3_3-Nemotron-Super-49B-v1_5.jinja": ("nemotron_json", "qwen3"),
    "microsoft-Phi-4-mini-instruct.jinja": ("phi4_mini_json", None),
    "vllm-tool_chat_template_phi4_mini.jinja": ("phi4_mini_json", None),
}
DETECTED.update({  # issue 43, second round
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja": ("command_r", "command_r"),
    "meetkai-functionary-medium-v3.1.jinja": ("functionary_v31", None),
    "meetkai-functionary-medium-v3.2.jinja": ("functionary_v32", None),
    "vllm-tool_chat_template_hunyuan_a13b.jinja": ("hunyuan_a13b", "hunyuan_a13b"),
    "vllm-tool_chat_template_internlm2_tool.jinja": ("internlm2", None),
    "vllm-tool_chat_template_xlam_llama.jinja": ("xlam", None),
})
DETECTED.update({  # issue 43, third round
    "vllm-tool_chat_template_functiongemma.jinja": ("functiongemma", None),
    "ai21labs-AI21-Jamba-Mini-1.7.jinja": ("jamba", None),
    "inclusionAI-Ling-2.0.jinja": ("hermes", "qwen3"),  # Ling / Ring: hermes's calls, <think> for Ring's thinking
    "gemma4.jinja": ("gemma4", "gemma4"),
})


def template(name: str) -> str:
    return (TEMPLATES / name).read_text(encoding="utf-8")


def test_every_template_has_its_source():
    assert sorted(path.name for path in TEMPLATES.glob("*.jinja") if path.name in SOURCES) == sorted(SOURCES)
    assert set(DETECTED) == set(SOURCES)


@pytest.mark.parametrize("name", sorted(DETECTED))
def test_the_real_template_selects_the_parsers(name):
    tools, reasoning = DETECTED[name]
    assert detect_tool_parser(template(name)) == tools
    assert detect_reasoning_parser(template(name))[0] == reasoning


def test_a_template_without_thinking_markup_gets_no_reasoning_parser(tmp_path):
    server = InProcessServer(tmp_path, [])  # the embedded SmolLM2's template: it does not think
    assert detect_reasoning_parser(server.engine.chat_template)[0] is None
    assert detect_reasoning_parser(None) == (None, "no thinking markup in the template")


USER = [{"role": "user", "content": "What is the weather in Oslo?"}]


# template, the variables a request gives it, the messages -> is the output's start inside the thinking?
OPENED = [
    ("deepseek-ai-DeepSeek-V3.1.jinja", {}, USER, False),  # V3.1 thinks only when asked: the prompt ends </think>
    ("deepseek-ai-DeepSeek-V3.1.jinja", {"thinking": True}, USER, True),  # … and <think> when asked
    ("deepseek-ai-DeepSeek-V3.1.jinja", {"enable_thinking": True}, USER, True),
    ("DeepSeek-V3.2.jinja", {}, USER, True),  # V3.2 thinks by default: the prompt ends <think>
    ("DeepSeek-V3.2.jinja", {"enable_thinking": False}, USER, False),
    ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", {}, USER, True),  # R1 ends every prompt with <think>\n
    ("NVIDIA-Nemotron-Nano-v2.jinja", {}, USER, True),  # Nano v2: <think>\n\n unless /no_think
    ("NVIDIA-Nemotron-Nano-v2.jinja", {}, [{"role": "user", "content": "Hi /no_think"}], False),
    ("Qwen-Qwen3-0.6B.jinja", {}, USER, False),  # Qwen3: the model opens <think> itself
    ("Qwen-Qwen3-0.6B.jinja", {"enable_thinking": False}, USER, False),
    ("moonshotai-Kimi-K2-Thinking.jinja", {}, USER, False),
    ("unsloth-Magistral-Small-2509.jinja", {}, USER, False),
    ("CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", {}, USER, False),  # the model opens its thinking
    ("vllm-tool_chat_template_hunyuan_a13b.jinja", {}, USER, False),  # Hunyuan too …
    ("vllm-tool_chat_template_hunyuan_a13b.jinja", {"enable_thinking": False}, USER, False),  # … or it is closed
    ("inclusionAI-Ling-2.0.jinja", {}, USER, False),  # Ling: "detailed thinking off"; Ring opens <think> itself
    ("gemma4.jinja", {}, USER, False),  # Gemma 4: thinking off closes an empty thought channel …
    ("gemma4.jinja", {"enable_thinking": True}, USER, False),  # … on, the model opens it
]


@pytest.mark.parametrize("name,variables,messages,opened", OPENED)
def test_the_rendered_prompt_tells_whether_the_thinking_is_open(name, variables, messages, opened):
    prompt = ChatTemplate(template(name), "<s>", "</s>").render(messages, **variables)
    parser = reasoning_parser_class(DETECTED[name][1])(prompt)
    assert parser.in_reasoning == opened, prompt[-40:]


# -- end to end ----------------------------------------------------------------------------------------------

WEATHER = {"name": "get_weather", "description": "The weather in a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                          "required": ["city"]}}
ADD = {"name": "add", "description": "Add two numbers.",
       "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}}
ASK = "What is the weather in Oslo?"
OSLO = {"city": "Oslo ☀ \"Nord\"", "days": 3, "extra": {"units": ["°C", None]}}
OSLO_JSON = json.dumps(OSLO, ensure_ascii=False)
DS_CALLS, DS_CALL, DS_SEP, DS_END, DS_CALLS_END = ("<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>",
                                                   "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>")
KIMI = ("<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
        + OSLO_JSON + '<|tool_call_end|><|tool_call_begin|>functions.add:1<|tool_call_argument_begin|>{"a": 1, "b": 2}'
        "<|tool_call_end|><|tool_calls_section_end|>")


@dataclass
class Family:
    id: str
    template: str
    output: str
    reasoning: str
    content: str
    calls: list[tuple[str, dict]] = field(default_factory=list)
    variables: dict = field(default_factory=dict)  # chat_template_kwargs


FAMILIES = [
    Family("deepseek-v3.1", "deepseek-ai-DeepSeek-V3.1.jinja",
           f"Let me check.{DS_CALLS}{DS_CALL}get_weather{DS_SEP}{OSLO_JSON}{DS_END}{DS_CALL}add{DS_SEP}"
           f'{{"a": 1, "b": 2}}{DS_END}{DS_CALLS_END}', "", "Let me check.",
           [("get_weather", OSLO), ("add", {"a": 1, "b": 2})]),
    Family("deepseek-v3.1-thinking", "deepseek-ai-DeepSeek-V3.1.jinja",
           "The user asks about Oslo; I cannot look it up.</think>I cannot check the weather, sorry.",
           "The user asks about Oslo; I cannot look it up.", "I cannot check the weather, sorry.",
           variables={"thinking": True}),
    Family("deepseek-v3.2", "DeepSeek-V3.2.jinja",  # thinking on by default: the prompt ends <think>
           'The user wants Oslo.</think>Checking.\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n'
           '<｜DSML｜parameter name="city" string="true">Oslo ☀ "Nord"</｜DSML｜parameter>\n'
           '<｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>\n'
           '<｜DSML｜parameter name="extra" string="false">{"units": ["°C", null]}</｜DSML｜parameter>\n'
           '</｜DSML｜invoke>\n<｜DSML｜invoke name="add">\n<｜DSML｜parameter name="a" string="false">1'
           '</｜DSML｜parameter>\n<｜DSML｜parameter name="b" string="false">2</｜DSML｜parameter>\n'
           '</｜DSML｜invoke>\n</｜DSML｜function_calls>', "The user wants Oslo.", "Checking.\n\n",
           [("get_weather", OSLO), ("add", {"a": 1, "b": 2})]),
    Family("deepseek-r1", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
           f"Okay, the user wants Oslo's weather.\n</think>\n\n{DS_CALLS}{DS_CALL}function{DS_SEP}get_weather\n"
           f"```json\n{OSLO_JSON}\n```{DS_END}{DS_CALLS_END}", "Okay, the user wants Oslo's weather.\n", "",
           [("get_weather", OSLO)]),
    Family("qwen3", "Qwen-Qwen3-0.6B.jinja",
           f'<think>\nWeather for Oslo.\n</think>\n\n<tool_call>\n{{"name": "get_weather", "arguments": {OSLO_JSON}}}'
           "\n</tool_call>", "\nWeather for Oslo.\n", "", [("get_weather", OSLO)]),
    Family("kimi-k2-thinking", "moonshotai-Kimi-K2-Thinking.jinja",
           "<think>I need the weather for Oslo and a sum.</think>" + KIMI, "I need the weather for Oslo and a sum.", "",
           [("get_weather", OSLO), ("add", {"a": 1, "b": 2})]),
    Family("kimi-k2-thinking-section-inside-the-thinking", "moonshotai-Kimi-K2-Thinking.jinja",
           "<think>I need the weather for Oslo and a sum." + KIMI, "I need the weather for Oslo and a sum.", "",
           [("get_weather", OSLO), ("add", {"a": 1, "b": 2})]),
    Family("magistral", "unsloth-Magistral-Small-2509.jinja",
           f"[THINK]L'utilisateur veut la météo d'Oslo.[/THINK]Je vérifie.[TOOL_CALLS]get_weather[ARGS]{OSLO_JSON}",
           "L'utilisateur veut la météo d'Oslo.", "Je vérifie.", [("get_weather", OSLO)]),
    Family("nemotron-nano-v2", "NVIDIA-Nemotron-Nano-v2.jinja",
           f'The user wants Oslo.\n</think>\n\n<TOOLCALL>[{{"name": "get_weather", "arguments": {OSLO_JSON}}}, '
           '{"name": "add", "arguments": {"a": 1, "b": 2}}]</TOOLCALL>', "The user wants Oslo.\n", "",
           [("get_weather", OSLO), ("add", {"a": 1, "b": 2})]),
    Family("nemotron-malformed-call-stays-text", "NVIDIA-Nemotron-Nano-v2.jinja",
           'Hm.\n</think>\n\n<TOOLCALL>get_weather(city="Oslo")</TOOLCALL> Sorry.', "Hm.\n",
           '<TOOLCALL>get_weather(city="Oslo")</TOOLCALL> Sorry.'),
    Family("phi-4-mini", "microsoft-Phi-4-mini-instruct.jinja",
           f'I will look it up.\nfunctools[{{"name": "get_weather", "arguments": {OSLO_JSON}}}]', "",
           "I will look it up.\n", [("get_weather", OSLO)]),
]

# Issue 43, second round: outputs as the templates write past turns back and as llama.cpp's tests/test-chat.cpp has
# them (Command R7B: thinking, then the action list or the answer between its markers; Functionary v3.1:
# <function=NAME>{json}</function>; v3.2: the prompt ends with `>>>`, so the output starts with its recipient).
COMMAND_R_ACTION = ('<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "get_weather", "parameters": '
                    + OSLO_JSON + '},\n    {"tool_call_id": "1", "tool_name": "add", "parameters": {"a": 1, "b": 2}}\n'
                    "]<|END_ACTION|>")
FAMILIES += [
    Family("command-r7b", "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja",
           "<|START_THINKING|>I will look up Oslo, then add the numbers.<|END_THINKING|>" + COMMAND_R_ACTION,
           "I will look up Oslo, then add the numbers.", "", [("get_weather", OSLO), ("add", {"a": 1, "b": 2})]),
    Family("command-r7b-answer", "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja",
           "<|START_RESPONSE|>I cannot look up the weather, sorry. ☔<|END_RESPONSE|>", "",
           "I cannot look up the weather, sorry. ☔"),
    Family("command-r7b-malformed-call-stays-text", "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja",
           "<|START_THINKING|>Hm.<|END_THINKING|><|START_ACTION|>get_weather(Oslo)<|END_ACTION|>", "Hm.",
           "<|START_ACTION|>get_weather(Oslo)<|END_ACTION|>"),
    Family("functionary-v3.1", "meetkai-functionary-medium-v3.1.jinja",
           f'Let me check.<function=get_weather>{OSLO_JSON}</function><function=add>{{"a": 1, "b": 2}}</function>',
           "", "Let me check.", [("get_weather", OSLO), ("add", {"a": 1, "b": 2})]),
    Family("functionary-v3.2", "meetkai-functionary-medium-v3.2.jinja",
           f'all\nLet me check.>>>get_weather\n{OSLO_JSON}>>>add\n{{"a": 1, "b": 2}}', "", "Let me check.",
           [("get_weather", OSLO), ("add", {"a": 1, "b": 2})]),
    Family("hunyuan-a13b", "vllm-tool_chat_template_hunyuan_a13b.jinja",
           f'<think>\nOslo, then a sum.\n</think>\n<answer>\n<tool_calls>[{{"name": "get_weather", "arguments": '
           f'{OSLO_JSON}}}, {{"name": "add", "arguments": {{"a": 1, "b": 2}}}}]</tool_calls>\n</answer>',
           "\nOslo, then a sum.\n", "", [("get_weather", OSLO), ("add", {"a": 1, "b": 2})]),
    Family("hunyuan-a13b-answer", "vllm-tool_chat_template_hunyuan_a13b.jinja",
           "<think>\nNo tool for this.\n</think>\n<answer>\n我无法查询天气。\n</answer>", "\nNo tool for this.\n",
           "我无法查询天气。"),
    Family("internlm2", "vllm-tool_chat_template_internlm2_tool.jinja",
           f'Let me check.<|action_start|><|plugin|>\n{{"name": "get_weather", "parameters": {OSLO_JSON}}}'
           "<|action_end|>", "", "Let me check.", [("get_weather", OSLO)]),
    Family("xlam", "vllm-tool_chat_template_xlam_llama.jinja",
           f'[{{"name": "get_weather", "arguments": {OSLO_JSON}}}, {{"name": "add", "arguments": {{"a": 1, "b": 2}}}}]',
           "", "", [("get_weather", OSLO), ("add", {"a": 1, "b": 2})]),
    Family("xlam-fenced-after-text", "vllm-tool_chat_template_xlam_llama.jinja",
           f'Let me check.\n```json\n[{{"name": "get_weather", "arguments": {OSLO_JSON}}}]\n```', "",
           "Let me check.\n", [("get_weather", OSLO)]),
    Family("functionary-v3.2-malformed-call-stays-text", "meetkai-functionary-medium-v3.2.jinja",
           'all\nOne moment.>>>launch_rocket\n{"target": "moon"}', "",
           'One moment.>>>launch_rocket\n{"target": "moon"}'),
]
# Issue 43, third round: FunctionGemma as Google's guide and vLLM's parser tests have its calls (strings between
# <escape>, numbers bare, several calls one after another); Jamba as vLLM's jamba parser tests (a space, then the
# list); Ling 2.0 / Ring as their template writes past turns (hermes's blocks; Ring's thinking in <think>).
FG_OSLO = "<start_function_call>call:get_weather{city:<escape>Oslo ☀ \"Nord\"<escape>,days:3,extra:{units:[<escape>°C<escape>,null]}}<end_function_call>"
FAMILIES += [
    Family("functiongemma", "vllm-tool_chat_template_functiongemma.jinja",
           FG_OSLO + "<start_function_call>call:add{a:1,b:2}<end_function_call>", "", "",
           [("get_weather", OSLO), ("add", {"a": 1, "b": 2})]),
    Family("functiongemma-malformed-call-stays-text", "vllm-tool_chat_template_functiongemma.jinja",
           "<start_function_call>call:get_weather(city=Oslo)<end_function_call> Sorry.", "",
           "<start_function_call>call:get_weather(city=Oslo)<end_function_call> Sorry."),
    Family("jamba", "ai21labs-AI21-Jamba-Mini-1.7.jinja",
           f' Let me check.<tool_calls>[\n{{"name": "get_weather", "arguments": {OSLO_JSON}}},\n'
           '{"name": "add", "arguments": {"a": 1, "b": 2}}\n]</tool_calls>', "", " Let me check.",
           [("get_weather", OSLO), ("add", {"a": 1, "b": 2})]),
    Family("ring-thinks-then-calls", "inclusionAI-Ling-2.0.jinja",
           f'<think>\nThe user wants Oslo.\n</think>\n\n<tool_call>\n{{"name": "get_weather", "arguments": '
           f"{OSLO_JSON}}}\n</tool_call>", "\nThe user wants Oslo.\n", "", [("get_weather", OSLO)]),
    Family("gemma4-thinks-then-calls", "gemma4.jinja",
           '<|channel>thought\nOslo, then a sum.<channel|><|tool_call>call:get_weather{city:<|"|>Oslo ☀ "Nord"<|"|>,'
           'days:3,extra:{units:[<|"|>°C<|"|>,null]}}<tool_call|><|tool_call>call:add{a:1,b:2}<tool_call|>',
           "Oslo, then a sum.", "", [("get_weather", OSLO), ("add", {"a": 1, "b": 2})], {"enable_thinking": True}),
    Family("ling-answer", "inclusionAI-Ling-2.0.jinja", "I cannot check the weather, sorry. ☔", "",
           "I cannot check the weather, sorry. ☔"),
]


def tools_for(api: str) -> list[dict]:
    if api == "chat":
        return [{"type": "function", "function": tool} for tool in (WEATHER, ADD)]
    if api == "responses":
        return [{"type": "function", **tool} for tool in (WEATHER, ADD)]
    return [{"name": t["name"], "description": t["description"], "input_schema": t["parameters"]} for t in (WEATHER, ADD)]


async def check_chat(server: InProcessServer, family: Family) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": ASK}], "tools": tools_for("chat"),
            "chat_template_kwargs": family.variables}
    message = (await answer(server, "/v1/chat/completions", body))["choices"][0]
    folded = fold_chat_stream(await sse(server, "/v1/chat/completions", body))[0]
    calls = [(c["function"]["name"], json.loads(c["function"]["arguments"]))
             for c in message["message"].get("tool_calls") or []]
    assert (message["message"].get("reasoning_content") or "", message["message"]["content"] or "", calls) == (
        family.reasoning, family.content, family.calls)
    assert message["finish_reason"] == ("tool_calls" if family.calls else "stop")
    assert (folded["reasoning"], folded["content"], folded["finish_reason"]) == (
        family.reasoning, family.content, message["finish_reason"])
    assert [(c["name"], json.loads(c["arguments"])) for c in folded["tool_calls"]] == calls


async def check_responses(server: InProcessServer, family: Family) -> None:
    body = {"model": MODEL, "input": ASK, "store": False, "tools": tools_for("responses")}
    response = await answer(server, "/v1/responses", body)
    events = await sse(server, "/v1/responses", body)
    assert without_ids(events[-1]["response"]) == without_ids(response)
    calls = [(item["name"], json.loads(item["arguments"])) for item in response["output"]
             if item["type"] == "function_call"]
    text = "".join(part["text"] for item in response["output"] if item["type"] == "message"
                   for part in item["content"])
    thinking = "".join(part["text"] for item in response["output"] if item["type"] == "reasoning"
                       for part in item.get("content") or [])
    assert (thinking, text, calls) == (family.reasoning, family.content, family.calls)


def unsigned(message: dict) -> dict:
    """A message without its thinking blocks' signatures (each seals the thinking with a fresh nonce)."""
    return {**message, "content": [{k: v for k, v in block.items() if k != "signature"} for block in message["content"]]}


async def check_messages(server: InProcessServer, family: Family) -> None:
    body = {"model": MODEL, "max_tokens": 2048, "messages": [{"role": "user", "content": ASK}],
            "tools": tools_for("messages")}
    if family.variables:  # Messages' own switch: it sets the templates' thinking / enable_thinking
        body["thinking"] = {"type": "enabled", "budget_tokens": 1024}
    message = await answer(server, "/v1/messages", body)
    folded = fold_message(await sse(server, "/v1/messages", body))
    for key in ("usage",):
        message.pop(key), folded.pop(key, None)
    assert unsigned(without_ids(folded)) == unsigned(without_ids({k: v for k, v in message.items() if v is not None}))
    uses = [(block["name"], block["input"]) for block in message["content"] if block["type"] == "tool_use"]
    text = "".join(block["text"] for block in message["content"] if block["type"] == "text")
    thinking = "".join(block["thinking"] for block in message["content"] if block["type"] == "thinking")
    assert (thinking, text, uses) == (family.reasoning, family.content, family.calls)
    assert message["stop_reason"] == ("tool_use" if family.calls else "end_turn")


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.id)
async def test_a_real_output_through_every_api_with_no_parser_flag(tmp_path, family):
    script = [{"match": "weather in Oslo", "output": family.output}]
    async with InProcessServer(tmp_path, script, chat_template=str(TEMPLATES / family.template),
                               reasoning_field="reasoning_content") as server:
        await check_chat(server, family)
        if not family.variables:  # (Responses passes no template variables: each template's default thinking)
            await check_responses(server, family)
        await check_messages(server, family)


async def test_a_detected_reasoning_model_offers_reasoning_levels_to_codex(tmp_path):
    async with InProcessServer(tmp_path, [], chat_template=str(TEMPLATES / "moonshotai-Kimi-K2-Thinking.jinja")) as server:
        response = await server.client.get("/v1/models", params={"client_version": "0.169.0"})
        [entry] = response.json()["models"]
        assert [level["effort"] for level in entry["supported_reasoning_levels"]] == ["low", "medium", "high"]


THINKING_ENDS = ("</think>", "[/THINK]", "<|tool_calls_section_begin|>", "<|END_THINKING|>", "<channel|>")
# Markup of every family above: none of it may reach the content, however the output is cut.
MARKUP = ("</think>", "<think>", "[THINK]", "[/THINK]", "<|tool_call", "<｜tool", "<TOOLCALL>", "functools", "<tool_call>",
          "[TOOL_CALLS]", "｜DSML｜")
MARKUP += ("<|START_THINKING|>", "<|END_THINKING|>", "<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|START_ACTION|>",
           "<function=", ">>>", "<answer>", "</answer>", "<tool_calls>", "<|action_start|>")  # issue 43, second round
MARKUP += ("<start_function_call>", "<end_function_call>", "<escape>", "</tool_calls>", "<|tool_call>", "<tool_call|>",
           "<|channel>", "<channel|>")  # third round


@pytest.mark.parametrize("family", [f for f in FAMILIES if "malformed" not in f.id], ids=lambda f: f.id)
async def test_an_output_cut_at_every_token_folds_and_leaks_no_markup(tmp_path, family):
    """max_tokens at every token of the output: streamed = not streamed, the thinking is a prefix of the thinking,
    no marker in the content, and `length` until the whole output fits."""
    script = [{"match": "weather in Oslo", "output": family.output}]
    async with InProcessServer(tmp_path, script, chat_template=str(TEMPLATES / family.template),
                               reasoning_field="reasoning_content") as server:
        tokens = len(server.engine.tokenizer.encode(family.output))
        for budget in range(1, tokens + 1):
            body = {"model": MODEL, "messages": [{"role": "user", "content": ASK}], "tools": tools_for("chat"),
                    "chat_template_kwargs": family.variables, "max_tokens": budget}
            choice = (await answer(server, "/v1/chat/completions", body))["choices"][0]
            folded = fold_chat_stream(await sse(server, "/v1/chat/completions", body))[0]
            message, where = choice["message"], f"{family.id}, cut at token {budget} of {tokens}"
            assert (folded["content"], folded["reasoning"], folded["finish_reason"]) == (
                message["content"] or "", message.get("reasoning_content") or "", choice["finish_reason"]), where
            # (a cut inside the end marker leaves its first characters in the thinking: the scripted engine's
            # tokenizer spells the marker in several tokens, where the model's is one special token)
            assert any((family.reasoning + end).startswith(folded["reasoning"]) for end in THINKING_ENDS), where
            assert not any(marker in folded["content"] for marker in MARKUP), where
            assert choice["finish_reason"] == ("length" if budget < tokens else
                                               "tool_calls" if family.calls else "stop"), where
