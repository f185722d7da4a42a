"""A stored response whose runner is gone (the process was killed, or its replica's lease expired) is settled
from its event log: failed, with the output its logged events had built, the item that was being written closed
as `incomplete` (its text or arguments so far kept, not dropped), and the events that end its log as a failing
runner's would have: `response.output_item.done` for that item, then `response.failed`.

The store runs this inside its recovery transaction (ResponseStore.mark_interrupted / fail_expired_leases).
"""

from __future__ import annotations

from typing import Any

from rostra.api.responses.objects import snapshot
from rostra.store.base import failed_copy, failed_event

# Delta events: where their text goes in the item they belong to.
_TEXT_DELTAS = {"response.output_text.delta", "response.reasoning_text.delta"}
_ARGUMENT_DELTAS = {"response.function_call_arguments.delta", "response.mcp_call_arguments.delta"}


def settle_from_events(response: dict[str, Any], events: list[dict[str, Any]],
                       error: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    output: list[dict[str, Any]] = [snapshot(item) for item in response.get("output") or []]
    open_items: set[int] = set()
    for event in events:
        kind, index = event.get("type"), event.get("output_index")
        if not isinstance(index, int) or index < 0 or index > len(output):
            continue
        if kind in ("response.output_item.added", "response.output_item.done") and isinstance(event.get("item"), dict):
            item = snapshot(event["item"])
            if index == len(output):
                output.append(item)
            else:
                output[index] = item
            (open_items.add if kind.endswith("added") else open_items.discard)(index)
        elif index == len(output):
            continue
        elif kind == "response.content_part.added" and isinstance(event.get("part"), dict):
            output[index].setdefault("content", []).append(snapshot(event["part"]))
        elif kind in _TEXT_DELTAS:
            parts = output[index].get("content") or []
            position = event.get("content_index", 0)
            if isinstance(position, int) and 0 <= position < len(parts):
                parts[position]["text"] = parts[position].get("text", "") + str(event.get("delta", ""))
        elif kind in _ARGUMENT_DELTAS:
            output[index]["arguments"] = output[index].get("arguments", "") + str(event.get("delta", ""))
    tail = []
    for index in sorted(open_items):
        output[index]["status"] = "incomplete"
        tail.append({"type": "response.output_item.done", "output_index": index, "item": snapshot(output[index])})
    failed = failed_copy({**response, "output": output}, error)
    return failed, [*tail, failed_event(failed, 0)]
