"""The lines of a batch's input file, checked before any runs: each is a request to run, or an error line.

A line is `{"custom_id": str, "method": "POST", "url": ENDPOINT, "body": {...}}`. A line that is not that (invalid
JSON, another url than the batch's endpoint, a repeated custom_id, a streamed or background request, another model
than the batch's) is answered at once in the error file; the other lines still run.
"""

from __future__ import annotations

from typing import Any

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from rostra.api.batches.objects import LineError, refused_line
from rostra.store.batch_store import BatchLine
from rostra.store.tables import dumps


@dataclass
class LineChecker:
    endpoint: str
    model: str | None = None  # the batch's: the first valid line's
    seen: set[str] = field(default_factory=set)

    def check(self, number: int, raw: bytes) -> BatchLine:
        custom_id: str | None = None
        try:
            line = json.loads(raw)
            if not isinstance(line, dict):
                raise ValueError
        except ValueError:
            return self._refused(number, None, LineError("invalid_json", f"line {number + 1} is not a JSON object"))
        if isinstance(line.get("custom_id"), str):
            custom_id = line["custom_id"]
        error = self._error(number, line, custom_id)
        if error is not None:
            return self._refused(number, custom_id, error)
        assert custom_id is not None
        self.seen.add(custom_id)
        self.model = self.model or line["body"].get("model")
        return BatchLine(number, custom_id, dumps(line["body"]))

    def _error(self, number: int, line: dict[str, Any], custom_id: str | None) -> LineError | None:
        where = f"line {number + 1}"
        if not custom_id:
            return LineError("missing_required_parameter", f"{where}: custom_id must be a non-empty string")
        if custom_id in self.seen:
            return LineError("duplicate_custom_id", f"{where}: custom_id {custom_id!r} is used by an earlier line")
        if line.get("method") != "POST":
            return LineError("invalid_method", f"{where}: method must be POST")
        if line.get("url") != self.endpoint:
            return LineError("invalid_url", f"{where}: url {line.get('url')!r} is not the batch's endpoint "
                                            f"{self.endpoint!r}")
        body = line.get("body")
        if not isinstance(body, dict):
            return LineError("invalid_request", f"{where}: body must be a JSON object")
        for unsupported in ("stream", "background"):  # OpenAI's batches run neither a stream nor a background response
            if body.get(unsupported):
                return LineError("invalid_request", f"{where}: {unsupported} is not supported in a batch")
        if self.model is not None and body.get("model") != self.model:
            return LineError("model_mismatch", f"{where}: every line of a batch names the same model "
                                               f"({self.model!r}), not {body.get('model')!r}")
        return None

    @staticmethod
    def _refused(number: int, custom_id: str | None, error: LineError) -> BatchLine:
        return BatchLine(number, custom_id, None, refused_line(custom_id, error).jsonl(), failed=True)


def checked_lines(endpoint: str, raw_lines: Iterable[bytes]) -> tuple[list[BatchLine], str | None]:
    """Blocking (run it in a thread): every non-empty line checked, and the batch's model."""
    checker = LineChecker(endpoint)
    lines = [checker.check(number, raw) for number, raw in enumerate(raw for raw in raw_lines if raw.strip())]
    return lines, checker.model


def check_block(checker: LineChecker, raw_lines: list[bytes], first: int) -> list[BatchLine]:
    """Blocking (run it in a thread): a block of non-empty lines checked, numbered from `first` (a large file is
    validated and stored a block at a time, never held whole in memory)."""
    return [checker.check(first + offset, raw) for offset, raw in enumerate(raw_lines)]
