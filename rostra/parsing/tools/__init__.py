"""Tool-call parsers: one small file per format over one base contract (base.ToolParser).

Select one with `--tool-call-parser NAME`; `tool_parser_class(NAME)` finds it in REGISTRY.
"""

from __future__ import annotations

from typing import Callable

from rostra.parsing.tools.base import ToolParser
from rostra.parsing.registry import load_class

# name -> "module:Class" under rostra.parsing.tools, imported on first use.
REGISTRY: dict[str, str] = {
    "deepseek_v3": "deepseek_v3:DeepSeekV3ToolParser",
    "glm45": "glm45:Glm45ToolParser",
    "deepseek_v32": "deepseek_v32:DeepSeekV32ToolParser",
    "granite": "granite:GraniteToolParser",
    "hermes": "hermes:HermesToolParser",
    "json": "json_lenient:JsonToolParser",
    "kimi_k2": "kimi_k2:KimiK2ToolParser",
    "llama3_json": "llama3_json:Llama3JsonToolParser",
    "minimax_m2": "minimax_m2:MiniMaxM2ToolParser",
    "mistral": "mistral:MistralToolParser",
    "nemotron_json": "nemotron:NemotronToolParser",
    "phi4_mini_json": "phi4_mini:Phi4MiniToolParser",
    "pythonic": "pythonic:PythonicToolParser",
    "qwen3_coder": "qwen3_coder:Qwen3CoderToolParser",
    "seed_oss": "seed_oss:SeedOssToolParser",
    "longcat": "longcat:LongCatToolParser",
    "olmo3": "olmo3:Olmo3ToolParser",
    "step3": "step3:Step3ToolParser",
}
# Command R7B / Command A, Functionary (issue 43, second round).
REGISTRY.update({
    "command_r": "command_r:CommandRToolParser",
    "functionary_v31": "functionary_v31:FunctionaryV31ToolParser",
    "functionary_v32": "functionary_v32:FunctionaryV32ToolParser",
    "hunyuan_a13b": "hunyuan:HunyuanToolParser",
    "internlm2": "internlm2:InternLM2ToolParser",
    "xlam": "xlam:XlamToolParser",
})
# FunctionGemma, Gemma 4, Jamba, ERNIE 4.5 (issue 43, third round).
REGISTRY.update({
    "ernie45": "ernie45:Ernie45ToolParser",
    "functiongemma": "functiongemma:FunctionGemmaToolParser",
    "gemma4": "gemma4:Gemma4ToolParser",
    "jamba": "jamba:JambaToolParser",
})


# A marker in a chat template that tells which format the model was trained to call tools in, most specific
# first: Seed-OSS's template also contains `<function=`, GLM's also `<tool_call>`. Only a fallback: detection
# renders a probe call through the template first (rostra/parsing/dialect.py).
_TEMPLATE_MARKERS = [
    # Issue 43, third round. FunctionGemma: <start_function_call>call:NAME{…}<end_function_call>. Jamba: its turns are
    # <|bom|><|role|> … <|eom|> (its template names its <tool_calls> only in a variable; it contains hermes's
    # <tool_call> as a substring of that).
    ("<start_function_call>", "functiongemma"),
    ("<|tool_call>call:", "gemma4"),  # Gemma 4: <|tool_call>call:NAME{…}<tool_call|>
    ("<|bom|>", "jamba"),
    # Issue 43, second round (before the markers of others that these templates also contain).
    ("<|START_ACTION|>", "command_r"),  # Command R7B / A: <|START_ACTION|>[{"tool_name": …}]<|END_ACTION|>
    ("<function=example_function_name>{", "functionary_v31"),  # Functionary v3.1's example call: JSON arguments
    (">>>${recipient}", "functionary_v32"),  # Functionary v3.2: "Respond in this format:\n>>>${recipient}\n…"
    ("<tool_calls>[", "hunyuan_a13b"),  # Hunyuan-A13B: <tool_calls>[{"name": …, "arguments": …}]</tool_calls>
    ("<|action_start|><|plugin|>", "internlm2"),  # InternLM2 / 2.5: <|action_start|><|plugin|>{…}<|action_end|>
    ("make calls in a single JSON array", "xlam"),  # xLAM-2's template: "When using tools, make calls in a single …"
    ("<seed:tool_call>", "seed_oss"),
    ("<minimax:tool_call>", "minimax_m2"),
    ("<arg_key>", "glm45"),
    ("<function=", "qwen3_coder"),
    ("<|tool_calls_section_begin|>", "kimi_k2"),
    ("<|tool_call|>", "granite"),
    ("<tool_call>", "hermes"),
    ("[TOOL_CALLS]", "mistral"),
    ("<｜tool▁calls▁begin｜>", "deepseek_v3"),
    ("<|python_tag|>", "llama3_json"),
    ("<TOOLCALL>", "nemotron_json"),  # Nemotron's templates teach and write back <TOOLCALL>[…]</TOOLCALL>
    ("functools[", "phi4_mini_json"),  # vLLM's Phi-4-mini tool template teaches functools[…]
    ("<|/tool|>", "phi4_mini_json"),  # Phi-4-mini's own template: tools in <|tool|>…<|/tool|>, no call markup
    ("\uff5cDSML\uff5c", "deepseek_v32"),  # DeepSeek V3.2's template teaches <｜DSML｜function_calls> blocks
    ("<longcat_tool_call>", "longcat"),  # Meituan LongCat: its own tags around hermes's JSON or GLM's pairs
    ("<steptml:invoke", "step3"),  # Step-3: steptml elements in DeepSeek-like call tokens
    ("<function_calls>", "olmo3"),  # OLMo 3: Python calls in <function_calls> (last: other formats name it too)
]


def detect_tool_parser(chat_template: str | None) -> str:
    """The format the model's template speaks; models with none get the lenient `json` parser."""
    for marker, name in _TEMPLATE_MARKERS:
        if chat_template and marker in chat_template:
            return name
    return "json"


def tool_parser_names() -> list[str]:
    return sorted(REGISTRY)


def tool_parser_class(name: str) -> type[ToolParser]:
    return load_class(REGISTRY, "rostra.parsing.tools", "tool-call parser", name, ToolParser)


def layered_tool_parser(primary: type[ToolParser]) -> Callable[..., ToolParser]:
    """The default: `primary`, then the lenient recognisers on the text it leaves (layered.py)."""
    from rostra.parsing.tools.layered import layered_tool_parser as make

    return make(primary)
