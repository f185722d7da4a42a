"""Batches on real `rostra serve` processes: kill -9 in the middle of a batch and a restart answer every line exactly
once; two processes on one store (one data directory, or one PostgreSQL database with data directories of their own)
share one batch chunk by chunk and take over a dead one's."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from openai import OpenAI

from servers import RunningServer

LEASE = "1"
SLOW = [{"match": "", "output": "a b c d", "delay_ms": 40}]  # each line about 0.2 s


def server_on(data_dir: str | None, script, log_level: str = "warning") -> RunningServer:
    return RunningServer(["--engine", "scripted", "--script", str(script), "--lease-seconds", LEASE,
                          "--batch-chunk-lines", "4", "--batch-concurrency", "2"], data_dir=data_dir,
                         log_level=log_level)


def script_file(tmp_path):
    path = tmp_path / "script.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in SLOW))
    return path


def client(server: RunningServer) -> OpenAI:
    return OpenAI(base_url=server.v1, api_key="none", max_retries=2)


def start_batch(api: OpenAI, count: int) -> str:
    lines = [{"custom_id": f"line-{n}", "method": "POST", "url": "/v1/chat/completions",
              "body": {"model": "scripted", "messages": [{"role": "user", "content": f"number {n}"}]}}
             for n in range(count)]
    upload = api.files.create(file=("in.jsonl", "".join(json.dumps(line) + "\n" for line in lines).encode()),
                              purpose="batch")
    return api.batches.create(input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h").id


def wait(api: OpenAI, batch_id: str, done: int | None = None, timeout: float = 120):
    deadline = time.monotonic() + timeout
    while True:
        batch = api.batches.retrieve(batch_id)
        if (done is not None and batch.request_counts.completed >= done) or batch.status == "completed":
            return batch
        assert time.monotonic() < deadline, f"batch {batch.status} {batch.request_counts}"
        time.sleep(0.1)


def answered_exactly_once(api: OpenAI, batch, count: int) -> None:
    assert batch.status == "completed" and batch.error_file_id is None
    output = [json.loads(line) for line in api.files.content(batch.output_file_id).text.splitlines()]
    assert [line["custom_id"] for line in output] == [f"line-{n}" for n in range(count)]
    assert all(line["response"]["status_code"] == 200 for line in output)
    assert (batch.request_counts.completed, batch.request_counts.failed) == (count, 0)


@pytest.mark.parametrize("stop", ["kill -9", "SIGTERM"])
def test_a_restart_in_the_middle_answers_every_line_once(tmp_path, stop):
    script = script_file(tmp_path)
    first = server_on(None, script)
    try:
        api = client(first)
        batch_id = start_batch(api, 40)
        wait(api, batch_id, done=10)
    finally:
        first.kill() if stop == "kill -9" else first.stop()
    second = server_on(first.data_dir, script)
    try:
        api = client(second)
        partial = api.batches.retrieve(batch_id)
        assert partial.status == "in_progress" and 10 <= partial.request_counts.completed < 40
        answered_exactly_once(api, wait(api, batch_id), 40)
    finally:
        second.stop()


def test_two_processes_share_one_batch_and_take_over_a_dead_ones_chunks(tmp_path):
    script = script_file(tmp_path)
    a = server_on(None, script, log_level="info")
    b = server_on(a.data_dir, script, log_level="info")
    try:
        api_a, api_b = client(a), client(b)
        batch_id = start_batch(api_a, 60)
        wait(api_b, batch_id, done=30)
        a.kill()  # its chunks in flight are taken over by b once their lease expires
        answered_exactly_once(api_b, wait(api_b, batch_id), 60)
        ran = [log.read_text().count(f"batch {batch_id} chunk") for log in (a.log_path, b.log_path)]
        assert all(count > 0 for count in ran), ran
    finally:
        a.stop()
        b.stop()


def test_two_replicas_on_postgresql_share_one_batch_and_take_over_a_dead_ones_chunks(tmp_path, postgres):
    """Replicas with data directories of their own (as on two machines): the batch, its input and output files all
    live in the database."""
    script = script_file(tmp_path)
    dsn = postgres.new_database()
    a = RunningServer(["--engine", "scripted", "--script", str(script), "--lease-seconds", LEASE, "--store", dsn,
                       "--batch-chunk-lines", "4", "--batch-concurrency", "2"], log_level="info")
    b = RunningServer(["--engine", "scripted", "--script", str(script), "--lease-seconds", LEASE, "--store", dsn,
                       "--batch-chunk-lines", "4", "--batch-concurrency", "2"], log_level="info")
    try:
        assert a.data_dir != b.data_dir
        api_a, api_b = client(a), client(b)
        batch_id = start_batch(api_a, 60)
        wait(api_b, batch_id, done=30)
        a.kill()  # kill -9 mid-batch: its chunks in flight are taken over by b once their lease expires
        answered_exactly_once(api_b, wait(api_b, batch_id), 60)
        ran = [log.read_text().count(f"batch {batch_id} chunk") for log in (a.log_path, b.log_path)]
        assert all(count > 0 for count in ran), ran
        assert not list((Path(a.data_dir) / "files").glob("*")) and not list((Path(b.data_dir) / "files").glob("*"))
    finally:
        a.stop()
        b.stop()
