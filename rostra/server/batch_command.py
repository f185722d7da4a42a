"""`rostra batch FILE.jsonl -o OUT.jsonl`: a batch input file answered offline, without a server (vLLM's `run-batch`
equivalent). The model flags are `serve`'s; each line runs through the same routes a served request takes (as the
Batch API's lines do), at most --parallel at once, with a progress bar on stderr. OUT.jsonl holds one line per input
line, in input order: the answer (`response`) or why the line was not run (`error`), as the Batch API's output and
error files write them."""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from rostra.api.batches.dispatch import run_line
from rostra.api.batches.lines import checked_lines
from rostra.api.batches.objects import ENDPOINTS, answered_line
from rostra.config import Settings
from rostra.store.batch_store import BatchLine


def first_url(path: Path) -> str:
    """The batch's endpoint: the url of its first line that names one of ours."""
    with open(path, "rb") as handle:
        for raw in handle:
            try:
                url = json.loads(raw).get("url")
            except (ValueError, AttributeError):
                continue
            if url in ENDPOINTS:
                return str(url)
    raise SystemExit(f"rostra batch: {path}: no line names an endpoint ({', '.join(ENDPOINTS)})")


async def answer_all(settings: Settings, lines: list[BatchLine], endpoint: str) -> list[str]:
    from tqdm import tqdm

    from rostra.engines.registry import build_engine
    from rostra.server.app import create_app
    from rostra.store import SqliteResponseStore

    app = create_app(build_engine(settings), settings, SqliteResponseStore.in_memory())
    lines_app = app.state.batches.worker.app
    results = [line.result or "" for line in lines]
    slots = asyncio.Semaphore(max(1, settings.parallel))
    progress = tqdm(total=len(lines), desc="batch", unit="line", file=sys.stderr)

    async def one(index: int, line: BatchLine) -> None:
        if line.request is not None:
            async with slots:
                request_id = "req_" + secrets.token_hex(12)
                answer = await run_line(lines_app, endpoint, line.request.encode(), None, request_id, None)
            results[index] = answered_line(line.custom_id or "", answer.status_code, request_id, answer.body).jsonl()
        progress.update(1)

    async with app.router.lifespan_context(app):
        await asyncio.gather(*(one(index, line) for index, line in enumerate(lines)))
    progress.close()
    return results


def run_batch_file(settings: Settings, input_path: Path, output_path: Path) -> None:
    endpoint = first_url(input_path)
    with open(input_path, "rb") as handle:
        lines, _ = checked_lines(endpoint, handle)
    with tempfile.TemporaryDirectory(prefix="rostra-batch-") as scratch:  # nothing of the run is kept
        results = asyncio.run(answer_all(replace(settings, data_dir=scratch, ui=False), lines, endpoint))
    with open(output_path, "w", encoding="utf-8") as out:
        out.writelines(result + "\n" for result in results)
    failed = sum(1 for result in results if not 200 <= ((json.loads(result).get("response") or {}).get("status_code")
                                                        or 0) < 300)
    print(f"rostra batch: {len(results)} lines, {len(results) - failed} answered, {failed} failed -> {output_path}",
          file=sys.stderr)
