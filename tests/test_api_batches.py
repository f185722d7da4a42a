"""The Files and Batch APIs through the openai SDK over the app (scripted engine, real SQLite store and files):
upload, list, retrieve, content, delete; a batch's lines answered as the same requests are online, bad lines in the
error file, cancel, expiry, 1,000 lines, another key's files and batches invisible; objects checked against the spec."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
from openai import AsyncOpenAI, BadRequestError, NotFoundError

from harness import MODEL, InProcessServer, write_script
from rostra.api.batches.dispatch import run_line
from rostra.model_aliases import ModelAlias
from spec import validate
from wire import check_error

SCRIPT = [{"match": "^hello", "output": "Hello there."}, {"match": "^slow", "output": "one two three four five six",
                                                            "delay_ms": 150},
          {"match": "", "output": "Something else."}]
CHAT = "/v1/chat/completions"


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(params=["sqlite", "postgres"])
def stored(request) -> dict:
    """Where files and batches live: SQLite and a directory (the default), or a real PostgreSQL server."""
    if request.param == "sqlite":
        return {}
    return {"store": request.getfixturevalue("postgres").new_database()}


def sdk(server: InProcessServer, key: str = "none") -> AsyncOpenAI:
    transport = httpx.ASGITransport(app=server.app)
    return AsyncOpenAI(base_url="http://rostra/v1", api_key=key, max_retries=0,
                       http_client=httpx.AsyncClient(transport=transport, base_url="http://rostra", timeout=60))


def chat_line(custom_id: str, text: str, **body) -> dict:
    return {"custom_id": custom_id, "method": "POST", "url": CHAT,
            "body": {"model": MODEL, "messages": [{"role": "user", "content": text}], **body}}


def jsonl(lines: list) -> bytes:
    return "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines).encode()


async def finished(client: AsyncOpenAI, batch_id: str, timeout: float = 60, until=("completed", "failed", "expired",
                                                                                     "cancelled")):
    deadline = time.monotonic() + timeout
    while True:
        batch = await client.batches.retrieve(batch_id)
        if batch.status in until:
            return batch
        assert time.monotonic() < deadline, f"batch still {batch.status}"
        await asyncio.sleep(0.05)


async def lines_of(client: AsyncOpenAI, file_id: str | None) -> list[dict]:
    if file_id is None:
        return []
    return [json.loads(line) for line in (await client.files.content(file_id)).text.splitlines()]


async def run_batch(client: AsyncOpenAI, lines: list, endpoint: str = CHAT):
    upload = await client.files.create(file=("requests.jsonl", jsonl(lines)), purpose="batch")
    batch = await client.batches.create(input_file_id=upload.id, endpoint=endpoint, completion_window="24h")
    return await finished(client, batch.id)


@pytest.mark.anyio
async def test_files_upload_list_retrieve_content_delete(tmp_path, stored):
    async with InProcessServer(tmp_path, SCRIPT, **stored) as server:
        client = sdk(server)
        content = b'{"a": 1}\n' * 1000
        made = await client.files.create(file=("data.jsonl", content), purpose="user_data")
        assert (made.object, made.bytes, made.filename, made.purpose) == ("file", len(content), "data.jsonl",
                                                                          "user_data")
        raw = await server.client.get(f"/v1/files/{made.id}")
        validate("OpenAIFile", raw.json())
        assert (await client.files.retrieve(made.id)).id == made.id
        assert (await client.files.content(made.id)).content == content
        second = await client.files.create(file=("b.jsonl", b"{}\n"), purpose="batch")
        listed = await server.client.get("/v1/files")
        validate("ListFilesResponse", listed.json())
        assert [file["id"] for file in listed.json()["data"]] == [second.id, made.id]
        assert [file.id for file in (await client.files.list(purpose="batch")).data] == [second.id]
        page = (await server.client.get("/v1/files?limit=1")).json()
        assert [file["id"] for file in page["data"]] == [second.id] and page["has_more"]
        rest = (await server.client.get(f"/v1/files?limit=1&after={second.id}")).json()
        assert [file["id"] for file in rest["data"]] == [made.id] and not rest["has_more"]
        deleted = await server.client.delete(f"/v1/files/{made.id}")
        validate("DeleteFileResponse", deleted.json())
        assert deleted.json() == {"id": made.id, "object": "file", "deleted": True}
        with pytest.raises(NotFoundError):
            await client.files.retrieve(made.id)
        check_error(await server.client.get(f"/v1/files/{made.id}/content"), 404)
        assert not await server.app.state.batches.blobs.exists(made.id)  # its content is gone too


@pytest.mark.anyio
async def test_upload_refusals(tmp_path):
    async with InProcessServer(tmp_path, SCRIPT, max_file_bytes=1000) as server:
        client = sdk(server)
        check_error(await server.client.post("/v1/files", files={"file": ("big.jsonl", b"x" * 5000)},
                                             data={"purpose": "batch"}), 413)
        with pytest.raises(BadRequestError):
            await client.files.create(file=("a.jsonl", b"{}\n"), purpose="fine-tune")
        check_error(await server.client.post("/v1/files", data={"purpose": "batch"}), 400, "file")
        assert not list((tmp_path / "data" / "files").glob("*")) if (tmp_path / "data" / "files").exists() else True


@pytest.mark.anyio
async def test_a_batch_answers_each_line_as_online_and_reports_bad_lines(tmp_path, stored):
    async with InProcessServer(tmp_path, SCRIPT, **stored) as server:
        client = sdk(server)
        lines = [chat_line("a", "hello"), chat_line("b", "what?", max_tokens=2), "{not json",
                 {**chat_line("c", "hello"), "url": "/v1/completions"}, chat_line("a", "again"),
                 chat_line("d", "hello", temperature="hot"), chat_line("e", "hello", stream=True)]
        batch = await run_batch(client, lines)
        raw = (await server.client.get(f"/v1/batches/{batch.id}")).json()
        validate("Batch", raw)
        assert batch.status == "completed" and batch.model == MODEL
        assert (batch.request_counts.total, batch.request_counts.completed, batch.request_counts.failed) == (7, 2, 5)
        output = await lines_of(client, batch.output_file_id)
        assert [line["custom_id"] for line in output] == ["a", "b"]
        for line, request in zip(output, (lines[0], lines[1])):
            assert line["error"] is None and line["response"]["status_code"] == 200
            online = (await server.client.post(CHAT, json=request["body"])).json()
            body = line["response"]["body"]
            validate("CreateChatCompletionResponse", body)
            assert body["choices"] == online["choices"] and body["usage"]["completion_tokens"] == \
                online["usage"]["completion_tokens"]
        errors = {index: line for index, line in enumerate(await lines_of(client, batch.error_file_id))}
        assert [line["custom_id"] for line in errors.values()] == [None, "c", "a", "d", "e"]
        assert [line["error"]["code"] for line in errors.values() if line["error"]] == [
            "invalid_json", "invalid_url", "duplicate_custom_id", "invalid_request"]
        refused = errors[3]["response"]  # a 4xx from the route itself, in its own envelope
        assert refused["status_code"] == 400 and refused["body"]["error"]["param"] == "temperature"
        with pytest.raises(BadRequestError):  # a completed batch cannot be cancelled
            await client.batches.cancel(batch.id)
        listed = (await server.client.get("/v1/batches")).json()
        validate("ListBatchesResponse", listed)
        assert [item["id"] for item in listed["data"]] == [batch.id]


@pytest.mark.anyio
async def test_a_batch_of_a_thousand_lines(tmp_path):
    async with InProcessServer(tmp_path, SCRIPT, batch_concurrency=8, batch_chunk_lines=100) as server:
        client = sdk(server)
        batch = await run_batch(client, [chat_line(f"line-{n}", "hello" if n % 2 else "x") for n in range(1000)])
        assert (batch.status, batch.request_counts.completed, batch.request_counts.failed) == ("completed", 1000, 0)
        output = await lines_of(client, batch.output_file_id)
        assert [line["custom_id"] for line in output] == [f"line-{n}" for n in range(1000)]
        assert {line["response"]["body"]["choices"][0]["message"]["content"] for line in output} == {
            "Hello there.", "Something else."}
        assert batch.error_file_id is None


@pytest.mark.anyio
async def test_embeddings_responses_and_completions_lines(tmp_path):
    async with InProcessServer(tmp_path, SCRIPT) as server:
        client = sdk(server)
        completions = await run_batch(client, [{"custom_id": "p", "method": "POST", "url": "/v1/completions",
                                                "body": {"model": MODEL, "prompt": "hello", "max_tokens": 3}}],
                                      "/v1/completions")
        (line,) = await lines_of(client, completions.output_file_id)
        validate("CreateCompletionResponse", line["response"]["body"])
        responses = await run_batch(client, [{"custom_id": "r", "method": "POST", "url": "/v1/responses",
                                              "body": {"model": MODEL, "input": "hello"}}], "/v1/responses")
        (line,) = await lines_of(client, responses.output_file_id)
        assert line["response"]["body"]["output"][0]["content"][0]["text"] == "Hello there."
        # the stored response is there, as online (store defaults to true)
        assert (await client.responses.retrieve(line["response"]["body"]["id"])).output_text == "Hello there."


@pytest.mark.anyio
async def test_cancel(tmp_path, stored):
    async with InProcessServer(tmp_path, SCRIPT, batch_concurrency=1, batch_chunk_lines=2, **stored) as server:
        client = sdk(server)
        upload = await client.files.create(file=("r.jsonl", jsonl([chat_line(f"s{n}", "slow") for n in range(20)])),
                                           purpose="batch")
        batch = await client.batches.create(input_file_id=upload.id, endpoint=CHAT, completion_window="24h")
        await finished(client, batch.id, until=("in_progress",))
        while (await client.batches.retrieve(batch.id)).request_counts.completed < 1:
            await asyncio.sleep(0.05)
        cancelling = await client.batches.cancel(batch.id)
        assert cancelling.status in ("cancelling", "cancelled")
        done = await finished(client, batch.id)
        assert done.status == "cancelled" and done.cancelled_at
        answered, errors = await lines_of(client, done.output_file_id), await lines_of(client, done.error_file_id)
        assert 1 <= len(answered) < 20 and len(answered) + len(errors) == 20
        assert {line["error"]["code"] for line in errors} == {"batch_cancelled"}
        assert done.request_counts.completed + done.request_counts.failed == 20
        assert (await client.batches.cancel(batch.id)).status == "cancelled"  # asked again: the same answer


@pytest.mark.anyio
async def test_expiry(tmp_path, stored):
    async with InProcessServer(tmp_path, SCRIPT, batch_concurrency=1, batch_chunk_lines=1, batch_window=1.0,
                               **stored) as server:
        client = sdk(server)
        done = await run_batch(client, [chat_line(f"s{n}", "slow") for n in range(10)])
        assert done.status == "expired" and done.expired_at
        answered, errors = await lines_of(client, done.output_file_id), await lines_of(client, done.error_file_id)
        assert len(answered) < 10 and len(answered) + len(errors) == 10
        assert {line["error"]["code"] for line in errors} == {"batch_expired"}


@pytest.mark.anyio
async def test_an_expired_batch_reports_exactly_the_lines_answered_before_it_stopped(tmp_path, stored):
    """Issue 42: an idle process finalized the expired batch while another still ran a line of it; that line's
    answer was recorded afterwards, so the output file, the counts and the store disagreed. Expiry stops the running
    lines and the finalizer waits for them: the output holds every line answered, the error file the rest as
    batch_expired, and the counts agree. Two serving processes on one store (here: two apps, one loop)."""
    settings = {"batch_concurrency": 1, "batch_chunk_lines": 20, "batch_window": 2.0, **stored}
    async with InProcessServer(tmp_path, SCRIPT, **settings) as server, InProcessServer(tmp_path, SCRIPT, **settings):
        client = sdk(server)
        done = await run_batch(client, [chat_line(f"s{n}", "slow") for n in range(8)])  # ~0.9 s a line
        assert done.status == "expired"
        await asyncio.sleep(1.5)  # a line that ran on past the expiry has ended by now
        answered, errors = await lines_of(client, done.output_file_id), await lines_of(client, done.error_file_id)
        stored_answers = [row.custom_id async for row in server.app.state.batches.store.results(done.id, False)]
        assert [line["custom_id"] for line in answered] == stored_answers
        assert all(line["response"]["status_code"] == 200 for line in answered)
        assert {line["error"]["code"] for line in errors} == {"batch_expired"}
        counts = done.request_counts
        assert (counts.total, counts.completed, counts.failed) == (8, len(answered), len(errors))
        assert (await client.batches.retrieve(done.id)).request_counts == counts


@pytest.mark.anyio
async def test_files_expire_after_their_expires_after(tmp_path, stored):
    async with InProcessServer(tmp_path, SCRIPT, min_file_expiry=1, **stored) as server:
        client = sdk(server)
        soon = await client.files.create(file=("s.jsonl", b"{}\n"), purpose="user_data",
                                         expires_after={"anchor": "created_at", "seconds": 4})
        kept = await client.files.create(file=("k.jsonl", b"{}\n"), purpose="user_data")
        raw = (await server.client.get(f"/v1/files/{soon.id}")).json()
        validate("OpenAIFile", raw)
        # created_at is whole seconds, so "4 s" may end a little over 3 s after the upload: room for a slow CI machine
        assert raw["expires_at"] == raw["created_at"] + 4 and kept.expires_at is None
        assert (await client.files.content(soon.id)).content == b"{}\n"
        await asyncio.sleep(max(0.0, raw["expires_at"] + 1.1 - time.time()))
        with pytest.raises(NotFoundError):
            await client.files.retrieve(soon.id)
        check_error(await server.client.get(f"/v1/files/{soon.id}/content"), 404)
        check_error(await server.client.delete(f"/v1/files/{soon.id}"), 404)
        assert [file.id for file in (await client.files.list()).data] == [kept.id]
        blobs = server.app.state.batches.blobs
        assert await blobs.exists(soon.id)  # until the worker's sweep
        await server.app.state.batches.worker.delete_expired_files()
        assert not await blobs.exists(soon.id) and await blobs.exists(kept.id)


@pytest.mark.anyio
async def test_expires_after_refusals(tmp_path):
    async with InProcessServer(tmp_path, SCRIPT) as server:  # OpenAI's bounds: an hour to 30 days
        for fields, param in (({"expires_after[anchor]": "created_at", "expires_after[seconds]": "60"},
                               "expires_after.seconds"),
                              ({"expires_after[anchor]": "created_at", "expires_after[seconds]": "2592001"},
                               "expires_after.seconds"),
                              ({"expires_after[anchor]": "created_at", "expires_after[seconds]": "soon"},
                               "expires_after.seconds"),
                              ({"expires_after[anchor]": "last_active_at", "expires_after[seconds]": "3600"},
                               "expires_after.anchor")):
            check_error(await server.client.post("/v1/files", files={"file": ("a.jsonl", b"{}\n")},
                                                 data={"purpose": "batch", **fields}), 400, param)
        upload = await sdk(server).files.create(file=("a.jsonl", jsonl([chat_line("a", "hello")])), purpose="batch",
                                                expires_after={"anchor": "created_at", "seconds": 3600})
        assert upload.expires_at == upload.created_at + 3600
        body = {"input_file_id": upload.id, "endpoint": CHAT, "completion_window": "24h",
                "output_expires_after": {"anchor": "created_at", "seconds": 10}}
        check_error(await server.client.post("/v1/batches", json=body), 400, "output_expires_after.seconds")


@pytest.mark.anyio
async def test_a_batchs_output_files_expire_after_output_expires_after(tmp_path, stored):
    async with InProcessServer(tmp_path, SCRIPT, min_file_expiry=1, **stored) as server:
        client = sdk(server)
        upload = await client.files.create(file=("r.jsonl", jsonl([chat_line("a", "hello"), "{bad"])), purpose="batch")
        made = await client.batches.create(input_file_id=upload.id, endpoint=CHAT, completion_window="24h",
                                           output_expires_after={"anchor": "created_at", "seconds": 2})
        done = await finished(client, made.id)
        raw = (await server.client.get(f"/v1/batches/{made.id}")).json()
        validate("Batch", raw)
        assert "output_expires_after" not in raw  # not a field of OpenAI's batch object
        for file_id in (done.output_file_id, done.error_file_id):
            file = await client.files.retrieve(file_id)
            assert file.expires_at == file.created_at + 2
        await asyncio.sleep(3.1)
        for file_id in (done.output_file_id, done.error_file_id):
            check_error(await server.client.get(f"/v1/files/{file_id}/content"), 404)
        assert (await client.files.retrieve(upload.id)).id == upload.id  # the input file has no expiry


@pytest.mark.anyio
async def test_bad_batch_requests(tmp_path):
    async with InProcessServer(tmp_path, SCRIPT) as server:
        client = sdk(server)
        upload = await client.files.create(file=("r.jsonl", jsonl([chat_line("a", "hello")])), purpose="batch")
        data = await client.files.create(file=("r.jsonl", b"{}\n"), purpose="user_data")
        for body, param in (({"input_file_id": upload.id, "endpoint": "/v1/moderations", "completion_window": "24h"},
                             "endpoint"),
                            ({"input_file_id": upload.id, "endpoint": CHAT, "completion_window": "1h"},
                             "completion_window"),
                            ({"input_file_id": data.id, "endpoint": CHAT, "completion_window": "24h"},
                             "input_file_id"),
                            ({"endpoint": CHAT, "completion_window": "24h"}, "input_file_id")):
            check_error(await server.client.post("/v1/batches", json=body), 400, param)
        check_error(await server.client.post("/v1/batches", json={"input_file_id": "file-nope", "endpoint": CHAT,
                                                                  "completion_window": "24h"}), 404)
        check_error(await server.client.get("/v1/batches/batch_nope"), 404)
        empty = await client.files.create(file=("e.jsonl", b"\n\n"), purpose="batch")
        failed = await finished(client, (await client.batches.create(input_file_id=empty.id, endpoint=CHAT,
                                                                     completion_window="24h")).id)
        assert failed.status == "failed" and failed.errors.data[0].code == "empty_file"


@pytest.mark.anyio
async def test_another_key_finds_nothing_of_a_keys_files_and_batches(tmp_path):
    async with InProcessServer(tmp_path, SCRIPT, api_keys=["key-a", "key-b"]) as server:
        a, b = sdk(server, "key-a"), sdk(server, "key-b")
        batch = await run_batch(a, [chat_line("x", "hello")])
        for call in (b.files.retrieve(batch.input_file_id), b.files.content(batch.output_file_id),
                     b.files.delete(batch.input_file_id), b.batches.retrieve(batch.id), b.batches.cancel(batch.id),
                     b.batches.create(input_file_id=batch.input_file_id, endpoint=CHAT, completion_window="24h")):
            with pytest.raises(NotFoundError):
                await call
        assert (await b.files.list()).data == [] and (await b.batches.list()).data == []
        assert len((await a.files.list()).data) == 2 and (await a.batches.list()).data[0].id == batch.id


@pytest.mark.anyio
async def test_a_background_line_is_refused(tmp_path):
    """OpenAI's Batch API runs no background response: such a line is answered in the error file at once."""
    async with InProcessServer(tmp_path, SCRIPT) as server:
        client = sdk(server)
        line = {"custom_id": "bg", "method": "POST", "url": "/v1/responses",
                "body": {"model": MODEL, "input": "hello", "background": True}}
        done = await run_batch(client, [line, {**line, "custom_id": "fg", "body": {"model": MODEL, "input": "hello"}}],
                               "/v1/responses")
        (refused,) = await lines_of(client, done.error_file_id)
        assert refused["custom_id"] == "bg" and refused["response"] is None
        assert refused["error"]["code"] == "invalid_request" and "background" in refused["error"]["message"]
        assert [line["custom_id"] for line in await lines_of(client, done.output_file_id)] == ["fg"]


def two_models(tmp_path) -> dict:
    """A server of two scripted models, `alpha` and `beta`, where `gpt-*` names alpha (--model-alias)."""
    script = write_script(tmp_path, SCRIPT)
    config = tmp_path / "models.yaml"
    config.write_text("models:\n" + "".join(f"  - name: {name}\n    engine: scripted\n    script: {script}\n"
                                             for name in ("alpha", "beta")))
    return {"models_config": str(config), "model_aliases": [ModelAlias("gpt-*", "alpha")]}


@pytest.mark.anyio
async def test_on_a_server_of_two_models_an_aliased_and_an_unserved_models_batch_end(tmp_path):
    """Issue 42: with several models, a batch's chunks were run only by a process serving the model the batch names,
    literally: a batch naming an alias, or a model nobody serves, stayed in progress forever."""
    async with InProcessServer(tmp_path, [], **two_models(tmp_path)) as server:
        client = sdk(server)
        aliased = await run_batch(client, [{**chat_line("a", "hello"), "body": {
            "model": "gpt-4o", "messages": [{"role": "user", "content": "hello"}]}}])
        assert (aliased.status, aliased.model, aliased.request_counts.completed) == ("completed", "alpha", 1)
        (answer,) = await lines_of(client, aliased.output_file_id)
        assert answer["response"]["body"]["choices"][0]["message"]["content"] == "Hello there."
        unserved = await run_batch(client, [{**chat_line(f"n{n}", "hello"), "body": {
            "model": "nobody", "messages": [{"role": "user", "content": "hello"}]}} for n in range(2)])
        assert (unserved.status, unserved.request_counts.failed) == ("completed", 2)
        for line in await lines_of(client, unserved.error_file_id):  # answered as online: a 404
            assert line["response"]["status_code"] == 404
            assert line["response"]["body"]["error"]["code"] == "model_not_found"


@pytest.mark.anyio
async def test_messages_lines(tmp_path):
    async with InProcessServer(tmp_path, SCRIPT) as server:
        client = sdk(server)
        done = await run_batch(client, [{"custom_id": "m", "method": "POST", "url": "/v1/messages",
                                         "body": {"model": MODEL, "max_tokens": 16,
                                                  "messages": [{"role": "user", "content": "hello"}]}},
                                        {"custom_id": "bad", "method": "POST", "url": "/v1/messages",
                                         "body": {"model": MODEL, "messages": []}}], "/v1/messages")
        (line,) = await lines_of(client, done.output_file_id)
        assert line["response"]["body"]["type"] == "message"
        assert line["response"]["body"]["content"][0]["text"] == "Hello there."
        (refused,) = await lines_of(client, done.error_file_id)  # Anthropic's own error envelope, as online
        assert refused["response"]["status_code"] == 400 and refused["response"]["body"]["type"] == "error"


@pytest.mark.anyio
async def test_an_online_request_goes_before_the_batch_lines_waiting(tmp_path):
    """One admission slot, two batch lines wanted at once: an online request that arrives while a line runs gets
    the slot next, not after the other line (which waits behind it, never queued ahead of it)."""
    async with InProcessServer(tmp_path, SCRIPT, max_concurrency=1, batch_concurrency=2,
                               batch_chunk_lines=10) as server:
        client = sdk(server)
        upload = await client.files.create(file=("r.jsonl", jsonl([chat_line(f"s{n}", "slow") for n in range(6)])),
                                           purpose="batch")
        batch = await client.batches.create(input_file_id=upload.id, endpoint=CHAT, completion_window="24h")
        await finished(client, batch.id, until=("in_progress",))
        while server.app.state.rostra.admission.running == 0:  # a line runs
            await asyncio.sleep(0.01)
        before = (await client.batches.retrieve(batch.id)).request_counts.completed
        online = await client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hello"}])
        after = (await client.batches.retrieve(batch.id)).request_counts.completed
        assert online.choices[0].message.content == "Hello there."
        assert after - before <= 1, (before, after)  # it waited for the running line only
        assert (await finished(client, batch.id)).request_counts.completed == 6


@pytest.mark.anyio
async def test_cancel_at_once_wins_over_validation(tmp_path):
    async with InProcessServer(tmp_path, SCRIPT) as server:
        client = sdk(server)
        upload = await client.files.create(file=("r.jsonl", jsonl([chat_line(f"s{n}", "slow") for n in range(50)])),
                                           purpose="batch")
        batch = await client.batches.create(input_file_id=upload.id, endpoint=CHAT, completion_window="24h")
        assert (await client.batches.cancel(batch.id)).status == "cancelling"
        done = await finished(client, batch.id, timeout=30)
        assert done.status == "cancelled" and done.request_counts.completed < 50


# Each token after a pause of 100 ms: "hold" holds the slot ~0.5 s, a "line" generates for ~0.6 s.
HOLD = [{"match": "^hold", "output": "one two three four five", "delay_ms": 100},
        {"match": "^line", "output": "a b c d e f", "delay_ms": 100}]


async def line_behind_an_online_request(server: InProcessServer) -> tuple:
    """A batch line sent to the route (as the worker sends it) while an online request holds the only slot."""
    online = asyncio.create_task(server.client.post(CHAT, json={
        "model": MODEL, "messages": [{"role": "user", "content": "hold"}]}))
    while server.app.state.rostra.admission.running == 0:
        await asyncio.sleep(0.005)
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "line"}]}).encode()
    started = time.monotonic()
    answer = await run_line(server.app.state.batches.worker.app, CHAT, body, None, "req_line",
                            window_ends=time.time() + 3600)
    return answer, time.monotonic() - started, await online


@pytest.mark.anyio
async def test_a_batch_line_waiting_behind_online_traffic_is_not_cut_by_the_request_timeout(tmp_path):
    """--request-timeout 1: the line waits ~0.5 s for the slot, then generates for ~0.6 s; its wait is bounded by the
    batch's window, its generation by the request timeout (from its admission), so it completes (it was a 504)."""
    async with InProcessServer(tmp_path, HOLD, max_concurrency=1, request_timeout=1) as server:
        answer, took, online = await line_behind_an_online_request(server)
        assert answer.status_code == 200, answer.body
        assert answer.body["choices"][0]["message"]["content"] == "a b c d e f"
        assert took > 1, took  # it did wait behind the online request (and ran past its own arrival + 1 s)
        assert online.status_code == 200


@pytest.mark.anyio
async def test_a_batch_line_waits_for_a_slot_beyond_the_queue_bound(tmp_path):
    """--max-queue 0: an online request finding the slot taken gets a 429 at once; a batch line waits its turn."""
    async with InProcessServer(tmp_path, HOLD, max_concurrency=1, max_queue=0) as server:
        answer, _, online = await line_behind_an_online_request(server)
        assert answer.status_code == 200, answer.body
        assert online.status_code == 200


@pytest.mark.anyio
async def test_a_batch_lines_wait_for_admission_ends_with_its_batchs_window(tmp_path):
    async with InProcessServer(tmp_path, HOLD, max_concurrency=1) as server:
        online = asyncio.create_task(server.client.post(CHAT, json={
            "model": MODEL, "messages": [{"role": "user", "content": "hold"}]}))
        while server.app.state.rostra.admission.running == 0:
            await asyncio.sleep(0.005)
        body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "line"}]}).encode()
        answer = await run_line(server.app.state.batches.worker.app, CHAT, body, None, "req_line",
                                window_ends=time.time() + 0.2)
        assert answer.status_code == 504 and "completion window" in answer.body["error"]["message"], answer.body
        assert (await online).status_code == 200
        assert server.app.state.rostra.admission.running == 0  # the line held nothing


@pytest.mark.anyio
@pytest.mark.parametrize("cancel_first", [True, False])
async def test_a_waiting_batch_line_cancelled_in_the_loop_turn_its_slot_is_freed_loses_no_slot(tmp_path, cancel_first):
    """The worker stopped (its line cancelled) and the slot freed in one loop turn, in either order: the slot comes
    back whether the line got it or not, and the server serves the next request."""
    async with InProcessServer(tmp_path, HOLD, max_concurrency=1) as server:
        admission = server.app.state.rostra.admission
        await admission.acquire()
        body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "line"}]}).encode()
        line = asyncio.create_task(run_line(server.app.state.batches.worker.app, CHAT, body, None, "req_line",
                                            window_ends=time.time() + 3600))
        for _ in range(50):  # it reaches the admission wait
            await asyncio.sleep(0)
        assert not line.done() and admission.running == 1
        if cancel_first:
            line.cancel()
            admission.release()
        else:
            admission.release()
            line.cancel()
        with pytest.raises(asyncio.CancelledError):
            await line
        assert (admission.running, admission.waiting) == (0, 0)
        after = await server.client.post(CHAT, json={"model": MODEL, "messages": [{"role": "user", "content": "x"}]})
        assert after.status_code == 200


@pytest.mark.anyio
async def test_a_batchs_usage_is_its_keys_and_marked_batch(tmp_path):
    """Per-key usage (issue 48): a batch's lines count as its key's, under `batch: true` in the usage API."""
    from rostra.api_keys import ApiKey  # noqa: PLC0415

    async with InProcessServer(tmp_path, SCRIPT, api_keys=["key-a"], api_key_details=[ApiKey("key-a", "team-a")],
                               admin_keys=["admin"]) as server:
        a = sdk(server, "key-a")
        online = await a.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hello"}])
        done = await run_batch(a, [chat_line("x", "hello"), chat_line("y", "hello")])
        answers = [line["response"]["body"]["usage"] for line in await lines_of(a, done.output_file_id)]
        await server.app.state.rostra.usage.flush()
        page = (await server.client.get("/v1/organization/usage/completions", headers={"authorization": "Bearer admin"},
                                        params={"start_time": int(time.time()) - 3600,
                                                "group_by": ["api_key_id", "batch"]})).json()
        results = {(result["api_key_id"], result["batch"]): (result["output_tokens"], result["num_model_requests"])
                   for bucket in page["data"] for result in bucket["results"]}
        assert results == {("team-a", False): (online.usage.completion_tokens, 1),
                           ("team-a", True): (sum(usage["completion_tokens"] for usage in answers), 2)}
