"""Compaction (Codex's, OpenAI's `compaction_trigger`): a turn whose input ends with a compaction_trigger item asks
the model to summarize the conversation so far, and answers with exactly one `compaction` item holding that summary,
sealed (encrypted_content, as reasoning is). Given back as input, a compaction item stands for the conversation it
summarized: the model reads the summary in its place (rostra/api/responses/to_chat.py)."""

from __future__ import annotations

from typing import Any

from rostra.api.responses.models import CreateResponseRequest
from rostra.api.responses.to_chat import COMPACT
from rostra.errors import InvalidRequest

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
