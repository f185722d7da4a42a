"""Detection from the chat template (rostra/parsing/dialect.py): each family's real template (tests/data/templates,
copied from llama.cpp's models/templates) selects its tool-call parser and its reasoning parser with no flag, by
what it renders for a probe call, and the families detected before keep their parsers. Markers in a template's
source cannot fool it: GLM's template contains `<tool_call>` (hermes's marker) and Seed-OSS's `<function=`
(qwen3_coder's)."""

from pathlib import Path

import pytest

from rostra.config import Settings
from rostra.models.bundle import chosen_parsers
from rostra.parsing.dialect import detect_dialect
from rostra.parsing.tools import detect_tool_parser
from rostra.prompt.chat_template import CHATML_TEMPLATE, ChatTemplate

TEMPLATES = Path(__file__).parent / "data" / "templates"


def detect(source: str):
    template = ChatTemplate(source, "<s>", "</s>")

    def render(messages, tools, add_generation_prompt=False):
        return template.render(messages, add_generation_prompt=add_generation_prompt, tools=tools)

    return detect_dialect(render, source)


@pytest.mark.parametrize("file,tool_parser,reasoning,probed", [
    ("GLM-4.6.jinja", "glm45", "glm45", True),
    ("glm_4_5.jinja", "glm45", "glm45", True),
    ("unsloth-MiniMax-M2.jinja", "minimax_m2", "minimax_m2_append_think", True),
    ("ByteDance-Seed-OSS.jinja", "seed_oss", "seed_oss", True),
    # The families rostra read before, as before.
    ("Qwen-Qwen3-0.6B.jinja", "hermes", None, True),
    ("mistralai-Mistral-Small-3.1-24B-Instruct-2503.jinja", "mistral", None, True),
    ("meta-llama-Llama-3.3-70B-Instruct.jinja", "llama3_json", None, True),
    # Its template concatenates the arguments as a string: it renders the probe with them as JSON text.
    ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "deepseek_v3", None, True),
    # Issue 43, second round: Command R7B, Functionary v3.1 (whose template also contains qwen3_coder's
    # `<function=`) and v3.2 (arguments as JSON text, as R1's).
    ("CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", "command_r", "command_r", True),
    ("meetkai-functionary-medium-v3.1.jinja", "functionary_v31", None, True),
    ("meetkai-functionary-medium-v3.2.jinja", "functionary_v32", None, True),
    ("vllm-tool_chat_template_hunyuan_a13b.jinja", "hunyuan_a13b", "hunyuan_a13b", True),
    # (its template prints the arguments with `| string`: JSON, the probe reads back)
    ("vllm-tool_chat_template_internlm2_tool.jinja", "internlm2", None, True),
    # A bare JSON list reads as granite's too: the template's own words name xLAM.
    ("vllm-tool_chat_template_xlam_llama.jinja", "xlam", None, True),
    # It writes past calls as bare JSON (only the generic readers read them) and teaches functools[…].
    ("vllm-tool_chat_template_phi4_mini.jinja", "phi4_mini_json", None, False),
    # Issue 43, third round. Jamba's calls read as Hunyuan's too: its turn markup (<|bom|>, <|eom|>) names Jamba.
    ("vllm-tool_chat_template_functiongemma.jinja", "functiongemma", None, True),
    ("ai21labs-AI21-Jamba-Mini-1.7.jinja", "jamba", None, True),
    ("inclusionAI-Ling-2.0.jinja", "hermes", None, True),
    ("gemma4.jinja", "gemma4", None, True),  # (its thought channel names gemma4's reasoning by the markers)  # (its <think> names qwen3 by the template's markers)
])
def test_a_real_template_selects_its_parsers(file, tool_parser, reasoning, probed):
    source = (TEMPLATES / file).read_text()
    found = detect(source)
    assert (found.tool_parser, found.reasoning_parser) == (tool_parser, reasoning), found.reason
    assert ("reads back" in found.reason) is probed, found.reason
    assert detect_tool_parser(source) == tool_parser  # the marker fallback agrees, most specific first


def test_markers_alone_would_be_fooled():
    # What the issue reports: the plain markers of the other formats are in these templates.
    assert "<tool_call>" in (TEMPLATES / "GLM-4.6.jinja").read_text()
    assert "<function=" in (TEMPLATES / "ByteDance-Seed-OSS.jinja").read_text()


def test_a_template_that_renders_no_calls_gets_the_lenient_parser():
    found = detect(CHATML_TEMPLATE)
    assert (found.tool_parser, found.reasoning_parser) == ("json", None)


def test_a_template_that_refuses_the_probe_falls_back_to_its_markers():
    source = "{{ raise_exception('no tools here') }}<tool_call>"
    found = detect(source)
    assert found.tool_parser == "hermes" and "markup" in found.reason


def test_flags_win_and_the_reasoning_still_comes_from_the_template():
    template = ChatTemplate((TEMPLATES / "GLM-4.6.jinja").read_text())
    assert chosen_parsers(template, Settings(), False).tool_parser == "glm45"
    forced = chosen_parsers(template, Settings(tool_call_parser="hermes"), False)
    assert (forced.tool_parser, forced.reasoning_parser) == ("hermes", "glm45")
    both = chosen_parsers(template, Settings(tool_call_parser="hermes", reasoning_parser="qwen3"), False)
    assert (both.tool_parser, both.reasoning_parser) == ("hermes", "qwen3")
