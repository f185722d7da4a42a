"""The README's parameter tables list every request field rostra takes beyond OpenAI's own (vLLM's, tabbyAPI's,
llama.cpp's names): each field of the Chat Completions and Completions request models that OpenAI's spec lacks
appears, in backticks, in the README's "Request parameters" section, with what it does on each engine.
OpenAI's own fields are walked against the spec by tests/test_request_fields.py. The behaviour of each row
is tested by a test named after it: tests/test_seeds.py (scripted engine, gateways), tests/test_e2e_extensions.py
and tests/test_engine_llamacpp_scoring.py (the embedded model)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rostra.protocol.chat import ChatCompletionRequest
from rostra.protocol.completions import CompletionRequest
from rostra.protocol.seeds import SeedFields
from test_request_fields import spec_properties

# The reference these sections moved to from README.md (issue 44): the docs site's pages.
DOCS = Path(__file__).resolve().parents[1] / "docs"


def reference() -> str:
    return "\n".join(page.read_text() for page in sorted(DOCS.glob("*.md")))
# Fields documented in another section of the README (named there).
ELSEWHERE = {"reasoning_effort": "## Reasoning", "include_reasoning": "## Reasoning",
             "continue_final_message": "## Tool calling", "chat_template_kwargs": "## Reasoning"}


def parameter_section() -> str:
    text = reference()
    start = text.index("## Request parameters")
    return text[start:text.index("\n## ", start + 1)]


def named_in(text: str) -> set[str]:
    """Every name in backticks, and each dotted or `a` / `b` part of one."""
    names: set[str] = set()
    for quoted in re.findall(r"`([^`]+)`", text):
        names |= set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", quoted))
    return names


@pytest.mark.parametrize("model,schema", [(ChatCompletionRequest, "CreateChatCompletionRequest"),
                                          (CompletionRequest, "CreateCompletionRequest")])
def test_every_extension_field_is_in_the_parameter_table(model, schema):
    extensions = set(model.model_fields) - spec_properties(schema)
    assert set(SeedFields.model_fields) <= extensions | spec_properties(schema)
    documented = named_in(parameter_section())
    missing = {name for name in extensions - documented
               if name not in ELSEWHERE or name not in named_in(_section(ELSEWHERE[name]))}
    assert not missing, f"README's parameter tables lack {sorted(missing)} ({model.__name__})"


def _section(heading: str) -> str:
    text = reference()
    start = text.index(heading + "\n")
    return text[start:text.index("\n## ", start + 1)]


def test_every_table_row_names_each_engine():
    """A row says what the field does on llama.cpp, transformers, vLLM, a gateway and the scripted engine."""
    rows = [line for line in parameter_section().splitlines() if line.startswith("| `")]
    assert len(rows) > 20
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert len(cells) in (2, 7) and all(cells), row
