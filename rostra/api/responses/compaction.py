"""Compaction (Codex's, OpenAI's `compaction_trigger`): a turn whose input ends with a compaction_trigger item asks
the model to summarize the conversation so far, and answers with exactly one `compaction` item holding that summary,
sealed (encrypted_content, as reasoning is). Given back as input, a compaction item stands for the conversation it
summarized: the model reads the summary in its place (rostra/api/responses/to_chat.py).

POST /v1/responses/compact (compacted.py) is the same turn as an endpoint of its own: its body (CompactRequest) is the
conversation to compact (input, previous_response_id or both), run as a compaction turn."""

from __future__ import annotations

from typing import Any, Literal

from rostra.api.responses.models import CreateResponseRequest
from rostra.api.responses.to_chat import COMPACT
from rostra.errors import InvalidRequest
from rostra.protocol.strict import RequestModel, check_service_tier

TRIGGER = "compaction_trigger"


def compaction_requested(items: list[dict[str, Any]]) -> bool:
    """Whether this turn compacts: its input ends with a compaction_trigger (one anywhere else is a 400)."""
    for index, item in enumerate(items[:-1]):
        if item["type"] == TRIGGER:
            raise InvalidRequest("a compaction_trigger must be the last input item", param=f"input[{index}]")
    return bool(items) and items[-1]["type"] == TRIGGER


def summary_request(request: CreateResponseRequest) -> CreateResponseRequest:
    """The request as the summarizing turn runs it: no tools to call and no output format, only the summary."""
    return request.model_copy(update={"tool_choice": None, "text": None})


def asking_for_summary(conversation: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation (its trigger dropped) followed by the request to summarize it."""
    kept = [item for item in conversation if item["type"] != TRIGGER]
    return kept + [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": COMPACT}]}]


class CompactRequest(RequestModel):
    """POST /v1/responses/compact's body (OpenAI's CompactResponseMethodPublicBody): the conversation to compact."""

    model: str
    input: str | list[dict[str, Any]] | None = None
    previous_response_id: str | None = None
    instructions: str | None = None
    # Cache hints and the SDK's request-level image options: they change nothing here (as on POST /v1/responses).
    prompt_cache_key: str | None = None
    prompt_cache_retention: Literal["in_memory", "24h"] | None = None
    prompt_cache_options: dict[str, Any] | None = None
    service_tier: str | None = None
    image: dict[str, Any] | None = None

    def unsupported(self) -> InvalidRequest | None:
        return check_service_tier(self.service_tier)

    def as_turn(self) -> CreateResponseRequest:
        """The compaction turn that answers it: its input then a compaction_trigger, never stored (OpenAI keeps no
        compacted response to retrieve or continue: the client sends the compacted window back as input)."""
        if not self.input and not self.previous_response_id:
            raise InvalidRequest("give the conversation to compact: input, previous_response_id or both",
                                 param="input")
        items: list[dict[str, Any]] = (
            [{"type": "message", "role": "user", "content": self.input}] if isinstance(self.input, str)
            else list(self.input or []))
        return CreateResponseRequest(model=self.model, input=[*items, {"type": TRIGGER}],
                                     instructions=self.instructions, previous_response_id=self.previous_response_id,
                                     store=False, prompt_cache_key=self.prompt_cache_key,
                                     service_tier=self.service_tier)
