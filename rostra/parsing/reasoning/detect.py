"""Which reasoning parser a chat template calls for, at zero configuration.

A template that thinks says so in its markup: the thinking markers it writes around past reasoning, or opens in
the generation prompt. Whether the thinking is open when the output starts is decided per request from the
rendered prompt itself (ReasoningParser reads it: a prompt that ends with `<think>` or `<think>\\n` means the
output begins inside the thinking, so `</think>` and the thinking never land in the answer), so detection only
has to name the markup. Checked in order, first match wins (gpt-oss is found earlier, by rostra/prompt/harmony.py):
"""

from __future__ import annotations

from dataclasses import dataclass

DEEPSEEK_ASSISTANT = "<\uff5cAssistant\uff5c>"  # "<｜Assistant｜>", fullwidth bars: DeepSeek's role token


@dataclass(frozen=True)
class TemplateSign:
    markers: tuple[str, ...]  # all of them are in the template
    parser: str
    why: str


SIGNS = (
    # Command R7B / Command A: the template teaches <|START_THINKING|>…<|END_THINKING|> (reasoning/command_r.py).
    TemplateSign(("<|START_THINKING|>",), "command_r", "the template writes <|START_THINKING|>"),
    # Hunyuan-A13B: <think> beside its <tool_calls>[…] (reasoning/hunyuan.py: the answer in <answer>…</answer>).
    TemplateSign(("<think>", "<tool_calls>["), "hunyuan_a13b", "Hunyuan's <tool_calls> and <think>"),
    # Gemma 4: a `thought` channel (gemma4.jinja: `<|channel>thought\n<channel|>` closes it when thinking is off).
    TemplateSign(("<|channel>thought",), "gemma4", "Gemma 4's thought channel"),
    # Magistral: the default system prompt teaches [THINK]…[/THINK] (unsloth-Magistral-Small-2509.jinja).
    TemplateSign(("[THINK]",), "magistral", "the template writes [THINK]"),
    # Kimi K2 Thinking: <think> beside Kimi's tool-call sections (moonshotai-Kimi-K2-Thinking.jinja).
    TemplateSign(("<think>", "<|tool_calls_section_begin|>"), "kimi_k2", "Kimi tool-call sections and <think>"),
    # DeepSeek V3.1 / V3.2: a thinking switch that ends the prompt with <think> or </think>.
    TemplateSign(("<think>", DEEPSEEK_ASSISTANT, "thinking"), "deepseek_v3",
                 "DeepSeek roles with a thinking switch"),
    # DeepSeek R1 (and its distillations): <think>\n ends every prompt; an unopened output is still thinking.
    TemplateSign(("<think>", DEEPSEEK_ASSISTANT), "deepseek_r1", "DeepSeek roles and <think>"),
    # Granite 3.2+: the thinking system prompt names its two phrases.
    TemplateSign(("Here is my thought process:",), "granite", "Granite's thought-process phrases"),
    # Apertus: <|inner_prefix|>…<|inner_suffix|> (Apertus-8B-Instruct.jinja).
    TemplateSign(("<|inner_prefix|>", "<|inner_suffix|>"), "apertus", "the template writes Apertus's inner markers"),
    # Qwen3, QwQ, Nemotron, SmolLM3 and the other <think>…</think> models.
    TemplateSign(("<think>",), "qwen3", "the template writes <think>"),
)


def detect_reasoning_parser(chat_template: str | None) -> tuple[str | None, str]:
    """(the reasoning parser's name or None: the template does not think, and why)."""
    for sign in SIGNS:
        if chat_template and all(marker in chat_template for marker in sign.markers):
            return sign.parser, sign.why
    return None, "no thinking markup in the template"
