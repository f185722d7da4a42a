"""Reasoning parsers: one small file per format over one base contract (base.ReasoningParser).

Select one with `--reasoning-parser NAME`; without it the chat template's markup picks one (detect.py). They run before the tool parser, which then sees
only the answer.
"""

from __future__ import annotations

from rostra.parsing.reasoning.base import ReasoningParser
from rostra.parsing.registry import load_class

REGISTRY: dict[str, str] = {
    "deepseek_r1": "think:DeepSeekR1ReasoningParser",
    "qwen3": "think:Qwen3ReasoningParser",
    "granite": "granite:GraniteReasoningParser",
    "gpt_oss": "gpt_oss:GptOssReasoningParser",
    "glm45": "glm45:Glm45ReasoningParser",
    "minimax_m2": "minimax_m2:MiniMaxM2ReasoningParser",
    "minimax_m2_append_think": "minimax_m2:MiniMaxM2AppendThinkReasoningParser",
    "seed_oss": "seed_oss:SeedOssReasoningParser",
    "deepseek_v3": "think:DeepSeekV3ReasoningParser",
    "kimi_k2": "think:KimiK2ReasoningParser",
    "magistral": "magistral:MagistralReasoningParser",
    "apertus": "apertus:ApertusReasoningParser",
}
# Command R7B / Command A (issue 43, second round).
REGISTRY.update({
    "command_r": "command_r:CommandRReasoningParser",
    "hunyuan_a13b": "hunyuan:HunyuanReasoningParser",
    "ernie45": "ernie45:Ernie45ReasoningParser",  # (third round)
    "gemma4": "gemma4:Gemma4ReasoningParser",
})


def reasoning_parser_names() -> list[str]:
    return sorted(REGISTRY)


def reasoning_parser_class(name: str) -> type[ReasoningParser]:
    return load_class(REGISTRY, "rostra.parsing.reasoning", "reasoning parser", name, ReasoningParser)
