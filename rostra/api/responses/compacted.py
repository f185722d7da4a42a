"""POST /v1/responses/compact's answer: the compacted window of a conversation, as OpenAI returns it (its
CompactResource, the SDK's CompactedResponse): every user message of the conversation, in order, followed by one
compaction item that summarizes the rest. Sent back as input (with the next user message), it stands for the whole
conversation: the model reads the user's own words and the summary in place of its earlier answers, calls and
reasoning (to_chat.py)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from rostra.api.responses.models import CreateResponseRequest
from rostra.api.responses.response_object import ResponseObject
from rostra.api.responses.service import ResponseJob, ResponsesService
from rostra.api.responses.wire import ResponseUsage, WireObject
from rostra.serving.deadline import NO_DEADLINE, Deadline
from rostra.store.tenancy import Tenant

log = logging.getLogger("rostra.responses")


@dataclass(frozen=True)
class Compactor:
    """The Responses service as the compact endpoint drives it (through serve_generation, as every generation:
    admission, the model's lease, the deadline, the disconnect): a compaction turn for `tenant`, folded into the
    compacted window."""

    service: ResponsesService
    tenant: Tenant

    async def prepare(self, turn: CreateResponseRequest) -> ResponseJob:
        """`turn`: the compact request as its compaction turn (CompactRequest.as_turn)."""
        return await self.service.prepare(turn, self.tenant)

    async def complete(self, job: ResponseJob, deadline: Deadline = NO_DEADLINE) -> dict[str, Any]:
        """(The generation endpoint's contract is the wire's: the window leaves here as JSON.)"""
        response = await self.service.complete(job, deadline)
        if response.status != "completed":  # the context ran out mid-summary: what was written is kept
            log.warning("compaction %s: the summary was cut short (%s)", response.id, response.incomplete_details)
        return CompactedWindow.of(job.conversation, response).wire()


class CompactedWindow(WireObject):
    """The CompactResource of a compaction turn."""

    id: str
    object: str = "response.compaction"
    created_at: int
    output: list[dict[str, Any]]
    usage: ResponseUsage | None

    @classmethod
    def of(cls, conversation: list[dict[str, Any]], response: ResponseObject) -> CompactedWindow:
        """`conversation`: the stored history, then the input, that the compaction turn summarized."""
        kept = [{**item, "status": "completed"} for item in conversation
                if item.get("type") == "message" and item.get("role") == "user"]
        return cls(id=response.id, created_at=response.created_at, output=kept + response.output, usage=response.usage)
