"""Request fields of the servers rostra's users move from: vLLM's newer names and tabbyAPI's.

Where a field means what one of rostra's fields already means, it is folded into that field once, when
the request is validated (tabby's `json_schema` is vLLM's `guided_json`, `banned_strings` is `bad_words`,
...), so nothing downstream reads two names. Setting both names to different values is a 400 naming the
second. The llama.cpp samplers (DRY, XTC, mirostat, typical_p) become one `NativeSamplers`, which each
engine honours or refuses by name (`Engine.native_samplers`).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import ConfigDict, Field, model_validator

from rostra.core import NativeSamplers
from rostra.errors import InvalidRequest
from rostra.protocol.strict import StrictModel

MAX_BANNED = 1024  # banned_tokens / allowed_tokens entries beyond allowed_token_ids' own bound
MAX_SEQUENCE_BREAKERS = 64
MAX_REQUEST_ID = 256

# Fields folded into another field of the request: the relay forwards that one (repeat_penalty goes as written
# too: llama.cpp's servers read only that name).
FOLDED_FIELDS = frozenset({"structured_outputs", "json_schema", "regex_pattern", "grammar_string", "banned_strings",
                           "banned_tokens", "allowed_tokens", "ban_eos_token", "mirostat_mode", "dry_range"})


class StructuredOutputs(StrictModel):
    """vLLM's `structured_outputs` (its new name for the guided_* fields): one constraint."""

    model_config = ConfigDict(extra="allow", strict=True, populate_by_name=True)
    json_schema: Any = Field(None, alias="json")
    regex: str | None = None
    choice: list[str] | None = None
    grammar: str | None = None
    json_object: bool | None = None
    structural_tag: Any = None

    def as_guided(self) -> dict[str, Any]:
        """The guided_* field each set key means."""
        guided = {"guided_json": self.json_schema, "guided_regex": self.regex, "guided_choice": self.choice,
                  "guided_grammar": self.grammar, "structural_tag": self.structural_tag}
        if self.json_object:
            guided["guided_json"] = guided["guided_json"] or {"type": "object"}
        return {name: value for name, value in guided.items() if value is not None}


def _token_list(value: list[int] | str | None, param: str) -> list[int] | None:
    """tabby takes token lists as JSON lists or as comma-separated strings ("1, 2, 3")."""
    if value is None or isinstance(value, list):
        return value
    parts = [part.strip() for part in value.split(",") if part.strip()]
    if len(parts) > MAX_BANNED or not all(part.isascii() and part.isdigit() and len(part) < 10 for part in parts):
        raise InvalidRequest(f"{param} must be token ids: a list or a comma-separated string of at most "
                             f"{MAX_BANNED}", param=param)
    return [int(part) for part in parts]


class SeedFields(StrictModel):
    """The fields, declared once for Chat Completions and Completions (README: "vLLM's and tabbyAPI's fields")."""

    # vLLM
    request_id: Annotated[str, Field(min_length=1, max_length=MAX_REQUEST_ID)] | None = None
    priority: int = 0
    return_tokens_as_token_ids: bool = False
    structured_outputs: StructuredOutputs | None = None
    cache_salt: Annotated[str, Field(min_length=1, max_length=MAX_REQUEST_ID)] | None = None
    mm_processor_kwargs: dict[str, Any] | None = None
    # tabbyAPI
    json_schema: Any = None
    regex_pattern: str | None = None
    grammar_string: str | None = None
    banned_strings: str | Annotated[list[str], Field(max_length=64)] | None = None
    banned_tokens: Annotated[list[int], Field(max_length=MAX_BANNED)] | str | None = None
    allowed_tokens: Annotated[list[int], Field(max_length=MAX_BANNED)] | str | None = None
    ban_eos_token: bool = False
    # llama.cpp's name for repetition_penalty (a gateway's raw mode sends both)
    repeat_penalty: Annotated[float, Field(gt=0, le=10)] | None = None
    # llama.cpp's samplers (tabby's names too: mirostat_mode, dry_range)
    typical_p: Annotated[float, Field(gt=0, le=1)] | None = None
    mirostat: Annotated[int, Field(ge=0, le=2)] | None = None
    mirostat_mode: Annotated[int, Field(ge=0, le=2)] | None = None
    mirostat_tau: Annotated[float, Field(ge=0, le=100)] | None = None
    mirostat_eta: Annotated[float, Field(ge=0, le=1)] | None = None
    dry_multiplier: Annotated[float, Field(ge=0, le=100)] | None = None
    dry_base: Annotated[float, Field(ge=1, le=100)] | None = None
    dry_allowed_length: Annotated[int, Field(ge=0, le=1_000_000)] | None = None
    dry_penalty_last_n: Annotated[int, Field(ge=-1, le=1_000_000)] | None = None
    dry_range: Annotated[int, Field(ge=-1, le=1_000_000)] | None = None
    dry_sequence_breakers: Annotated[list[Annotated[str, Field(min_length=1, max_length=64)]],
                                     Field(max_length=MAX_SEQUENCE_BREAKERS)] | None = None
    xtc_probability: Annotated[float, Field(ge=0, le=1)] | None = None
    xtc_threshold: Annotated[float, Field(ge=0, le=1)] | None = None
    # tabby's truncation samplers that llama.cpp lacks (the transformers engine runs them): tail-free
    # sampling's z (1: off) and top-a's a (0: off)
    tfs: Annotated[float, Field(gt=0, le=1)] | None = None
    top_a: Annotated[float, Field(ge=0, le=1)] | None = None

    @model_validator(mode="after")
    def _fold_aliases(self) -> "SeedFields":
        """tabby's and vLLM's newer names into the fields rostra reads (raises InvalidRequest on a clash)."""
        guided = dict((self.structured_outputs.as_guided() if self.structured_outputs else {}),
                      **{name: value for name, value in (("guided_json", self.json_schema),
                                                          ("guided_regex", self.regex_pattern),
                                                          ("guided_grammar", self.grammar_string)) if value is not None})
        if len(guided) > 1:
            raise InvalidRequest("set one structured-output constraint, not several",
                                 param="structured_outputs" if self.structured_outputs else _alias_of(next(iter(guided))))
        for name, value in guided.items():
            self._merge(name, value, _alias_of(name) if not self.structured_outputs else "structured_outputs")
        self._merge("repetition_penalty", self.repeat_penalty, "repeat_penalty")
        self._merge("mirostat", self.mirostat_mode, "mirostat_mode")
        self._merge("dry_penalty_last_n", self.dry_range, "dry_range")
        self._merge("allowed_token_ids", _token_list(self.allowed_tokens, "allowed_tokens"), "allowed_tokens")
        if self.banned_strings:
            words = [self.banned_strings] if isinstance(self.banned_strings, str) else self.banned_strings
            setattr(self, "bad_words", [*(getattr(self, "bad_words", None) or []), *words])
        banned = _token_list(self.banned_tokens, "banned_tokens") or []
        if banned:  # tabby bans them outright: OpenAI's strongest bias
            setattr(self, "logit_bias", {**(getattr(self, "logit_bias", None) or {}),
                                         **{str(token): -100.0 for token in banned}})
        if self.ban_eos_token:
            setattr(self, "ignore_eos", True)
        return self

    def _merge(self, field: str, value: Any, alias: str) -> None:
        if value is None:
            return
        current = getattr(self, field, None)
        if current is not None and current != value:
            raise InvalidRequest(f"{alias} and {field} are the same parameter: set one", param=alias)
        setattr(self, field, value)

    def native_samplers(self) -> NativeSamplers:
        """The llama.cpp samplers the request sets (the rest keep their 'off' values)."""
        given = {name: getattr(self, name) for name in NativeSamplers.field_names() if getattr(self, name) is not None}
        if "dry_sequence_breakers" in given:
            given["dry_sequence_breakers"] = tuple(given["dry_sequence_breakers"])
        return NativeSamplers(**given)


def _alias_of(guided_name: str) -> str:
    return {"guided_json": "json_schema", "guided_regex": "regex_pattern", "guided_grammar": "grammar_string",
            "guided_choice": "structured_outputs", "structural_tag": "structured_outputs"}[guided_name]
