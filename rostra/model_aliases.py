"""--model-alias 'PATTERN=MODEL': model names a client sends that no model is served under, answered by a model that
is (Claude Code's fixed side-task ids such as `claude-haiku-4-5`, a tool that hard-codes `gpt-4o`...).

PATTERN is a shell-style glob (`*`, `?`, `[...]`), matched against the whole name, case-sensitively; the first
alias that matches wins. A name a model is served under is never aliased. The request is then served as if it had
named MODEL, on every API, and its answer names MODEL; GET /v1/models lists only served names.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase


@dataclass(frozen=True)
class ModelAlias:
    pattern: str
    model: str

    @classmethod
    def parse(cls, text: str) -> ModelAlias:
        pattern, equals, model = text.partition("=")
        if not equals or not pattern.strip() or not model.strip():
            raise ValueError(f"--model-alias {text!r}: expected PATTERN=MODEL, e.g. 'claude-*=qwen3-coder'")
        return cls(pattern.strip(), model.strip())


def aliased(name: str, aliases: list[ModelAlias], served: list[str]) -> str:
    """The model that answers a request naming `name`: itself when served (or when no alias matches)."""
    if name in served:
        return name
    for alias in aliases:
        if fnmatchcase(name, alias.pattern):
            return alias.model
    return name
