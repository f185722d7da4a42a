"""Per-key limits and usage (issue 48): a YAML --api-key-file, 429s with Retry-After and OpenAI's x-ratelimit-*
headers as the openai SDK reads them, one key saturated while another is served at once, usage per key and model
equal to the sum of the responses' `usage`, and the counts shared by two servers on one store."""

from __future__ import annotations

import asyncio
import json
import time

import openai
import pytest

from harness import InProcessServer
from rostra.api_keys import ApiKey, KeyLimits, read_key_file
from rostra.http.key_limits import duration, rate_limit_headers, refusal
from rostra.store.usage_store import KeyWindow

SCRIPT = [{"match": "slow", "output": "A slow answer of several tokens.", "delay_ms": 150},
          {"match": "", "output": "Hello there, friend."}]
KEY_A, KEY_B, ADMIN = "sk-team-a", "sk-team-b", "sk-admin"


def keys(**limits) -> dict:
    """Settings for a server of two named keys (A limited by `limits`, B unlimited) and an admin key."""
    details = [ApiKey(KEY_A, "team-a", KeyLimits(**limits)), ApiKey(KEY_B, "team-b")]
    return {"api_keys": [KEY_A, KEY_B], "api_key_details": details, "admin_keys": [ADMIN]}


def client(server: InProcessServer, key: str, retries: int = 0) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key=key, base_url="http://rostra/v1", max_retries=retries,
                              http_client=server.client)


async def ask(server: InProcessServer, key: str, text: str = "hi", **options):
    return await client(server, key).chat.completions.with_raw_response.create(
        model="scripted", messages=[{"role": "user", "content": text}], max_tokens=16, **options)


# -- the key file -------------------------------------------------------------------------------


def test_key_file_lines_and_yaml():
    assert [key.key for key in read_key_file("sk-1\n\n  sk-2 \n")] == ["sk-1", "sk-2"]
    parsed = read_key_file("- key: sk-1\n  name: a\n  rpm: 3\n  daily_tokens: 100\n- sk-2\n")
    assert parsed == [ApiKey("sk-1", "a", KeyLimits(rpm=3, daily_tokens=100)), ApiKey("sk-2")]
    assert "sk-1" not in repr(parsed[0])  # a key is never printed


@pytest.mark.parametrize("text, says", [
    ("- key: sk-1\n  rpm: 0\n", "`rpm` must be a positive integer"),
    ("- key: sk-1\n  rmp: 3\n", "unknown field(s) rmp"),
    ("- name: a\n", "non-empty `key`"),
    ("- key: sk-1\n  name: a\n- key: sk-2\n  name: a\n", "share a name"),
])
def test_key_file_errors_name_the_entry(text, says):
    with pytest.raises(ValueError, match="entry|share") as error:
        read_key_file(text, "keys.yaml")
    assert says in str(error.value)


# -- decisions and headers ------------------------------------------------------------------------


def window(now=1000.0, requests=0, oldest=None, running=0, tokens=0, oldest_tokens=None, today=0) -> KeyWindow:
    return KeyWindow(now, requests, oldest, running, tokens, oldest_tokens, today)


def test_refusals_name_the_limit_and_when_to_retry():
    assert refusal(KeyLimits(rpm=2), window(requests=1, oldest=990.0)) is None
    rpm = refusal(KeyLimits(rpm=2), window(requests=2, oldest=990.0))
    assert rpm is not None and rpm.limit == "rpm" and rpm.retry_after == pytest.approx(50.0)
    assert refusal(KeyLimits(max_concurrent=1), window(running=1)).limit == "max_concurrent"
    tpm = refusal(KeyLimits(tpm=100), window(tokens=100, oldest_tokens=970.0))
    assert tpm.limit == "tpm" and tpm.retry_after == pytest.approx(30.0)
    daily = refusal(KeyLimits(daily_tokens=5), window(now=86400 * 3 + 3600.0, today=5))
    assert daily.limit == "daily_tokens" and daily.retry_after == pytest.approx(86400 - 3600)


def test_headers_in_openais_spelling():
    headers = dict(rate_limit_headers(KeyLimits(rpm=10, tpm=1000), window(requests=3, oldest=985.0, tokens=400,
                                                                          oldest_tokens=995.0), admitted=True))
    assert headers[b"x-ratelimit-limit-requests"] == b"10"
    assert headers[b"x-ratelimit-remaining-requests"] == b"6"
    assert headers[b"x-ratelimit-reset-requests"] == b"45s"
    assert headers[b"x-ratelimit-remaining-tokens"] == b"600"
    assert headers[b"x-ratelimit-reset-tokens"] == b"55s"
    assert [duration(0.02), duration(1), duration(360), duration(3723)] == ["20ms", "1s", "6m0s", "1h2m3s"]


# -- end to end -------------------------------------------------------------------------------------


async def test_rpm_refuses_the_key_past_its_limit_and_serves_another(tmp_path):
    async with InProcessServer(tmp_path, SCRIPT, **keys(rpm=2)) as server:
        for remaining in ("1", "0"):
            answer = await ask(server, KEY_A)
            assert answer.headers["x-ratelimit-limit-requests"] == "2"
            assert answer.headers["x-ratelimit-remaining-requests"] == remaining
        with pytest.raises(openai.RateLimitError) as refused:
            await ask(server, KEY_A)
        assert refused.value.code == "rate_limit_exceeded"
        assert 1 <= int(refused.value.response.headers["retry-after"]) <= 60
        assert "requests per minute" in refused.value.message
        other = await ask(server, KEY_B)  # the other key is served at once, and has no limit headers
        assert other.status_code == 200 and "x-ratelimit-limit-requests" not in other.headers
        # Anthropic's clients get the refusal in Anthropic's envelope.
        messages = await server.client.post("/v1/messages", headers={"x-api-key": KEY_A}, json={
            "model": "scripted", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]})
        assert messages.status_code == 429 and messages.json()["error"]["type"] == "rate_limit_error"


async def test_max_concurrent_holds_while_a_stream_runs(tmp_path):
    async with InProcessServer(tmp_path, SCRIPT, **keys(max_concurrent=1)) as server:
        stream = server.call("POST", "/v1/chat/completions", {
            "model": "scripted", "messages": [{"role": "user", "content": "slow please"}], "stream": True}, key=KEY_A)
        await stream.wait_for("data: ")  # the stream is running
        with pytest.raises(openai.RateLimitError, match="Concurrency limit"):
            await ask(server, KEY_A)
        assert (await ask(server, KEY_B)).status_code == 200  # B is not held up by A's stream
        await stream.finished()
        assert stream.status == 200 and "[DONE]" in stream.text()
        assert (await ask(server, KEY_A)).status_code == 200  # the finished stream frees the slot


async def test_token_limits_count_finished_turns(tmp_path):
    async with InProcessServer(tmp_path, SCRIPT, **keys(tpm=10)) as server:
        first = await ask(server, KEY_A)
        assert first.headers["x-ratelimit-remaining-tokens"] == "10"
        await server.app.state.rostra.usage.flush()
        with pytest.raises(openai.RateLimitError, match="tokens per minute"):
            await ask(server, KEY_A)


async def test_the_sdk_waits_out_retry_after(tmp_path, monkeypatch):
    """The openai SDK's own retry logic reads Retry-After: with its default retries it gets through once the
    window moves (the clock is moved instead of waiting a minute)."""
    import rostra.http.key_limits as key_limits

    now = [1_000_000.0]
    monkeypatch.setattr(key_limits.time, "time", lambda: now[0])
    async with InProcessServer(tmp_path, SCRIPT, **keys(rpm=1)) as server:
        await ask(server, KEY_A)
        sdk = client(server, KEY_A, retries=2)
        slept: list[float] = []
        real_sleep = asyncio.sleep

        async def sleep(seconds: float) -> None:
            slept.append(seconds)
            now[0] += 61  # the minute has passed
            await real_sleep(0)

        monkeypatch.setattr(openai._base_client.anyio, "sleep", sleep, raising=False)
        monkeypatch.setattr(asyncio, "sleep", sleep)
        answer = await sdk.chat.completions.create(model="scripted", messages=[{"role": "user", "content": "hi"}])
        assert answer.choices[0].message.content and slept and 1 <= slept[0] <= 60


async def test_batch_lines_have_their_own_budget(tmp_path):
    """A key's batch lines are held to its batch_daily_tokens, not to its online limits (rpm 1 here): lines start
    while the day's batch tokens are under the budget, and the lines after it are 429s in the error file."""
    from test_api_batches import jsonl

    async with InProcessServer(tmp_path, SCRIPT, batch_concurrency=1, **keys(rpm=1, batch_daily_tokens=50)) as server:
        sdk = client(server, KEY_A)
        lines = [{"custom_id": f"line-{n}", "method": "POST", "url": "/v1/chat/completions",
                  "body": {"model": "scripted", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 16}}
                 for n in range(4)]
        upload = await sdk.files.create(file=("lines.jsonl", jsonl(lines)), purpose="batch")
        batch = await sdk.batches.create(input_file_id=upload.id, endpoint="/v1/chat/completions",
                                         completion_window="24h")
        while batch.status not in ("completed", "failed", "expired"):
            await asyncio.sleep(0.05)
            batch = await sdk.batches.retrieve(batch.id)
        answered = [json.loads(line) for line in (await sdk.files.content(batch.output_file_id)).text.splitlines()]
        refused = [json.loads(line) for line in (await sdk.files.content(batch.error_file_id)).text.splitlines()]
        spent = [line["response"]["body"]["usage"]["total_tokens"] for line in answered]
        # Each line costs 36 tokens: the first starts at 0, the second at 36 (under 50), the rest at 72.
        assert len(answered) == 2 and spent[0] < 50 <= sum(spent), spent
        assert [line["response"]["status_code"] for line in refused] == [429, 429]
        assert refused[0]["response"]["body"]["error"]["code"] == "rate_limit_exceeded"
        assert "Batch token budget" in refused[0]["response"]["body"]["error"]["message"]
        assert (await ask(server, KEY_A)).http_response.status_code == 200  # online: its own minute, untouched


async def test_usage_per_key_and_model_equals_the_responses_usage(tmp_path):
    async with InProcessServer(tmp_path, SCRIPT, **keys()) as server:
        totals = {KEY_A: [0, 0, 0], KEY_B: [0, 0, 0]}
        for key, text in ((KEY_A, "hi"), (KEY_A, "hello"), (KEY_B, "hey there")):
            usage = (await ask(server, key, text)).parse().usage
            totals[key] = [totals[key][0] + usage.prompt_tokens, totals[key][1] + usage.completion_tokens,
                           totals[key][2] + 1]
        response = await client(server, KEY_B).responses.create(model="scripted", input="one more")
        totals[KEY_B] = [totals[KEY_B][0] + response.usage.input_tokens,
                         totals[KEY_B][1] + response.usage.output_tokens, totals[KEY_B][2] + 1]
        await server.app.state.rostra.usage.flush()
        page = await server.client.get("/v1/organization/usage/completions", headers={"authorization": f"Bearer {ADMIN}"},
                                       params={"start_time": int(time.time()) - 3600, "bucket_width": "1d",
                                               "group_by": ["api_key_id", "model"]})
        assert page.status_code == 200, page.text
        results = [result for bucket in page.json()["data"] for result in bucket["results"]]
        seen = {result["api_key_id"]: [result["input_tokens"], result["output_tokens"],
                                       result["num_model_requests"]] for result in results}
        assert seen == {"team-a": totals[KEY_A], "team-b": totals[KEY_B]}
        assert {result["model"] for result in results} == {"scripted"}
        own = await server.client.get("/v1/organization/usage/completions", headers={"authorization": f"Bearer {KEY_A}"},
                                      params={"start_time": int(time.time()) - 3600, "group_by[]": "api_key_id"})
        assert [result["api_key_id"] for bucket in own.json()["data"] for result in bucket["results"]] == ["team-a"]
        metrics = (await server.client.get("/metrics", headers={"authorization": f"Bearer {ADMIN}"})).text
        assert 'rostra_key_requests_total{key="team-a",model_name="scripted"} 2.0' in metrics
        assert KEY_A not in metrics


async def test_usage_page_is_openais_shape(tmp_path):
    from spec import validate  # noqa: PLC0415  (tests/spec.py)

    async with InProcessServer(tmp_path, SCRIPT, **keys()) as server:
        await ask(server, KEY_A)
        await server.app.state.rostra.usage.flush()
        page = await server.client.get("/v1/organization/usage/completions", headers={"authorization": f"Bearer {ADMIN}"},
                                       params={"start_time": 0, "bucket_width": "1h", "limit": 3})
        body = page.json()
        validate("UsageResponse", body)
        assert len(body["data"]) == 3 and body["has_more"] is True and body["next_page"] == str(3 * 3600)
        bad = await server.client.get("/v1/organization/usage/completions", headers={"authorization": f"Bearer {ADMIN}"},
                                      params={"bucket_width": "1d"})
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "start_time"


async def test_two_servers_on_one_store_share_a_keys_limits(tmp_path):
    """Two servers (each its own app, usage store connection and middleware) on one data directory, as replicas
    share a store: the key's requests per minute are counted across both."""
    settings = keys(rpm=2)
    async with InProcessServer(tmp_path, SCRIPT, **settings) as one, InProcessServer(tmp_path, SCRIPT, **settings) as two:
        await ask(one, KEY_A)
        await ask(two, KEY_A)
        with pytest.raises(openai.RateLimitError):
            await ask(one, KEY_A)
        with pytest.raises(openai.RateLimitError):
            await ask(two, KEY_A)


def test_a_yaml_key_file_starts_the_server(tmp_path):
    from rostra.cli import build_parser, settings_from_args  # noqa: PLC0415

    key_file = tmp_path / "keys.yaml"
    key_file.write_text(json.dumps([{"key": "sk-x", "name": "x", "rpm": 5}]))  # JSON is YAML
    args = build_parser().parse_args(["serve", "--api-key-file", str(key_file)])
    settings = settings_from_args(args)
    assert settings.api_keys == ["sk-x"] and settings.api_key_details[0].limits.rpm == 5


# -- the stores --------------------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def usage_store(request, tmp_path):
    """Not opened: the test opens it in its own loop (a PostgreSQL database is made outside any loop)."""
    if request.param == "sqlite":
        from rostra.store.usage_sqlite import SqliteUsageStore  # noqa: PLC0415

        return SqliteUsageStore(tmp_path / "usage.sqlite3")
    from rostra.store.usage_postgres import PostgresUsageStore  # noqa: PLC0415

    return PostgresUsageStore(request.getfixturevalue("postgres").new_database())


async def test_store_counts_requests_running_and_tokens(usage_store):
    await usage_store.open()
    try:
        await _counts(usage_store)
    finally:
        await usage_store.close()


async def _counts(usage_store) -> None:
    from rostra.store.usage_store import UsageQuery, UsageRecord  # noqa: PLC0415

    now = 86400 * 20000 + 7200.0
    seen, first = await usage_store.admit("t1", now, lambda window: True)
    assert (seen.requests_last_minute, seen.running, first) == (0, 0, first) and first is not None
    seen, second = await usage_store.admit("t1", now + 1, lambda window: window.running < 1)
    assert second is None and seen.running == 1 and seen.oldest_request_at == now
    await usage_store.finish(first, now + 2)
    await usage_store.record(UsageRecord("t1", "a", "m1", now + 2, 30, 10, 5))
    await usage_store.record(UsageRecord("t1", "a", "m2", now + 3, 7, 0, 3, batch=True))
    await usage_store.record(UsageRecord("t2", None, "m1", now - 86400, 1000, 0, 1000))  # yesterday, another key
    seen, third = await usage_store.admit("t1", now + 4, lambda window: True)
    assert third is not None
    assert (seen.requests_last_minute, seen.running, seen.tokens_last_minute, seen.tokens_today) == (1, 0, 45, 45)
    other, _ = await usage_store.admit("t2", now + 4, lambda window: False)
    assert (other.tokens_today, other.tokens_last_minute, other.requests_last_minute) == (0, 0, 0)
    sums = await usage_store.sums(UsageQuery(int(now) - 86400, int(now) + 60, 86400))
    by_model = {(row.bucket, row.tenant, row.model, row.batch): (row.input_tokens, row.cached_tokens,
                                                                  row.output_tokens, row.requests) for row in sums}
    assert by_model == {(0, "t2", "m1", False): (1000, 0, 1000, 1), (1, "t1", "m1", False): (30, 10, 5, 1),
                        (1, "t1", "m2", True): (7, 0, 3, 1)}
    assert {row.tenant for row in await usage_store.sums(UsageQuery(0, int(now) + 60, 86400, "t1", ("m2",)))} == {"t1"}
